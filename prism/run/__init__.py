"""The run path: one experiment from its config to an MLflow run.

``pipeline`` wires it (prepare, ask, score, track); ``inference`` turns cells into raw records with bounded
concurrency; ``cells`` is the cell grid at any size and the records read back; ``store`` the append-only
``responses.jsonl`` and the content-addressed completion store; ``lock`` one run per store at a time;
``tracking`` the only writer to MLflow, ``offline`` what keeps a run going when MLflow fails;
``writable`` and ``callbacks`` the directories a run writes, checked before any work.
"""
