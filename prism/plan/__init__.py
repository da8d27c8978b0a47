"""``prism-plan``: how many questions and repetitions a study needs, before it is run (issue 40).

:func:`prism.plan.core.plan` reads a pilot (finished runs, selected as compare selects them) or takes stated
rates, simulates studies with the effect to detect planted (:mod:`prism.plan.simulate`), tests each as compare
would, and logs the power table, the smallest n and a plot as an MLflow run tagged ``prism.kind=plan``. It asks
no model. (``dry_run=true`` of the main app plans one run's requests and cost; this plans a study's size.)
"""
