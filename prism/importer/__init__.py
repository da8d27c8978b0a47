"""Runs made elsewhere, results taken elsewhere: ``prism-import`` and ``prism-export``.

``python -m prism.importer format=lm_eval|inspect path=FILE`` makes an lm-evaluation-harness sample log or an
inspect_ai eval log an ordinary PRISM run (``run.import_log``); ``python -m prism.importer.export run=ID``
writes a run or a comparison's runs as a Hugging Face dataset on disk (``export``).

Modules, bottom first: ``mapping`` (doc fields -> question parts), ``cells`` (``SourceCell``, what a log
holds), ``lm_eval`` and ``inspect_log`` (the readers), ``build`` (cells -> run files -> MLflow), ``config``
(the schemas), ``run`` (one import), ``export``; ``__main__`` and ``export_main`` the entry points.
"""
