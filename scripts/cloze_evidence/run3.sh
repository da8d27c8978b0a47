#!/bin/bash
# Evidence for issue 43, continued (one job at a time, model.n_threads=1, nice): after the SmolLM2 cloze run.
cd /work/evidence-cloze
while kill -0 16362 2>/dev/null; do sleep 5; done
echo "smollm2-cloze done $(date -u +%H:%M:%S)" >> timings.txt
export PYTHONPATH=/work/wt-cloze PRISM_DATA_DIR=/work/shared/data
T="tracking.uri=sqlite:////work/evidence-cloze/mlflow.db store.path=/work/evidence-cloze/store.sqlite"
run() { name=$1; shift; s=$(date +%s.%N); nice -n 10 python -m prism model.n_threads=1 $T "$@" hydra.run.dir=/work/evidence-cloze/out-$name > log-$name.txt 2>&1; rc=$?; e=$(date +%s.%N); echo "$name rc=$rc wall_s=$(echo "$e - $s" | bc)" >> timings.txt; }
run gemma-cloze model=gemma3_270m conditions=cloze generation.cloze=true dataset.n=15 generation.max_tokens=16
run cost-with conditions=prism generation.cloze=true generation.cloze_target=text dataset.n=10 store.enabled=false
run cost-without conditions=prism dataset.n=10 store.enabled=false
# lm-eval side by side, 8 questions (the server's echo with logprobs=10 takes ~40 s a request here).
cd lmeval && HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 nice -n 10 /work/venv-cloze/bin/lm_eval --model gguf --model_args base_url=http://127.0.0.1:18743 --tasks arc_challenge_prism100 --include_path /work/evidence-cloze/lmeval --log_samples --output_path /work/evidence-cloze/lmeval/out --batch_size 1 --limit 8 > lmeval.log 2>&1
echo "lm-eval done $(date -u +%H:%M:%S)" >> ../timings.txt
nice -n 10 python compare_lmeval.py > compare.log 2>&1
echo "compare done $(date -u +%H:%M:%S)" >> ../timings.txt
