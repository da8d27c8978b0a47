"""inspect_ai task: ARC-Challenge from a local JSONL copy, asked with inspect's own multiple_choice solver.

inspect relabels every question's options A, B, C, ... (ARC's numbered questions included) and its ``choice``
scorer reads the model's ``ANSWER: X`` line. The data file is the environment's ``ARC_LOCAL_DATA``
(scripts/make_import_fixtures.py sets it).
"""

import os
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import Sample, json_dataset
from inspect_ai.scorer import choice
from inspect_ai.solver import multiple_choice


def record_to_sample(record: dict[str, Any]) -> Sample:
    labels = record["choices"]["label"]
    return Sample(id=record["id"], input=record["question"], choices=record["choices"]["text"],
                  target=chr(ord("A") + labels.index(record["answerKey"])), metadata={"labels": labels})


@task
def arc_local() -> Task:
    return Task(dataset=json_dataset(os.environ["ARC_LOCAL_DATA"], record_to_sample),
                solver=multiple_choice(), scorer=choice())
