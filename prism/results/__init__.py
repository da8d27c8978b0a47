"""One run's results: scored records, metrics and the files a run writes, pure over its records.

``scoring`` (parsed answer -> correct or not, against the key), ``metrics`` (per condition, per question,
run level), ``metric_columns`` (what the metrics read of each record, as compact codes), ``consistency``
(each variant against the baseline), ``roles`` (causal or invariant steps, from the reference answers),
``label_prob_metrics`` (the second reading's measures) and ``summary`` (raw records -> results files).
"""
