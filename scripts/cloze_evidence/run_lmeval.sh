#!/bin/bash
# lm-eval 0.4.13 (its own venv) against python -m llama_cpp.server serving SmolLM2's GGUF on 127.0.0.1:18743.
cd /work/evidence-cloze/lmeval
export HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1
nice -n 10 /work/venv-cloze/bin/lm_eval --model gguf --model_args base_url=http://127.0.0.1:18743 \
  --tasks arc_challenge_prism100 --include_path /work/evidence-cloze/lmeval --log_samples \
  --output_path /work/evidence-cloze/lmeval/out --batch_size 1
