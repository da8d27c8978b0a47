"""Shared-prefix scoring (benchmarks/cloze_cost._shared_prefix_scores) against PRISM's full scoring, reading only,
the same 30 cells (6 ARC-Challenge questions x P0-P4, text target, SmolLM2 through its chat template), each from
an empty cache. Run: PYTHONPATH=. PRISM_DATA_DIR=/work/shared/data python scripts/cloze_evidence/shared_prefix_diff.py"""
import dataclasses
import prism.backends.llamacpp as E
from benchmarks.cloze_cost import _shared_prefix_scores
from benchmarks.prompts import compose, rendered_requests
from prism.backends.llamacpp import LlamaCppBackend
from prism.cloze import continuation_ids, continuations
ov = ["dataset.n=6", "conditions=prism", "model.n_threads=1", "generation.cloze=true", "generation.cloze_target=text", "dataset.cache_dir=/tmp/prism-shared-prefix-frozen"]
reqs, _ = rendered_requests(ov)
b = LlamaCppBackend(compose(ov).model); llm = b._model()
worst = 0.0; bad = 0
for i, req in enumerate(reqs):
    ctx = b.cloze_context(req)
    split = [continuation_ids(b.encode, ctx, o.text, "x") for o in continuations(req.prompt, "text")]
    conts = [ids for _, ids in split]; c = list(split[0][0])
    llm.reset(); e = E.score_continuations(llm, c, conts)
    llm.reset(); s = _shared_prefix_scores(llm, c, conts)
    d = max(abs(x - y) for x, y in zip(e, s))
    if d: bad += 1; print(i, req.prompt.question_id, req.prompt.condition, d, [len(x) for x in conts], [x[:2] for x in conts], flush=True)
    worst = max(worst, d)
print("cells", len(reqs), "differing", bad, "max", worst)
