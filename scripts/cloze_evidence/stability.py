"""Agreement across P0-P4 of each reading, per question (pairs of conditions naming the same option), with a
bootstrap interval over questions; UNKNOWN counts as an answer of its own for the parsed reading."""
import itertools, json, sys
import numpy as np
for name in sys.argv[1:]:
    recs = [json.loads(l) for l in open(f"out-{name}/results/scored.jsonl")]
    by = {}
    for r in recs:
        if r["condition"] in ("P0", "P1", "P2", "P3", "P4"):
            by.setdefault(r["question_id"], {})[r["condition"]] = r
    out = {}
    for field in ("answer", "cloze_answer", "cloze_norm_answer"):
        per_q = []
        for q, cells in by.items():
            vals = [cells[c].get(field) or "UNKNOWN" for c in sorted(cells)]
            pairs = list(itertools.combinations(vals, 2))
            per_q.append(np.mean([a == b for a, b in pairs]))
        per_q = np.array(per_q)
        rng = np.random.default_rng(0)
        boots = [rng.choice(per_q, len(per_q)).mean() for _ in range(2000)]
        out[field] = (round(per_q.mean(), 3), round(float(np.percentile(boots, 2.5)), 3), round(float(np.percentile(boots, 97.5)), 3))
    parted = sum(1 for r in recs if r.get("answer") and r.get("cloze_answer") and r["answer"] != r["cloze_answer"])
    both = sum(1 for r in recs if r.get("answer") and r.get("cloze_answer"))
    print(name, "questions", len(by), "mean pairwise agreement across P0-P4 (mean, 95% CI):", out, f"parsed!=cloze in {parted} of {both} cells with both")
