"""``prism.names`` owns every MLflow name: no other module of ``prism/`` spells a tag, a config-path param,
an artifact path or a logged metric it reads back.

The check reads the source (``ast``), so it fails on the line that spells a name again. Words that are also a
comparison table's column (``accuracy``, ``n_questions``) cannot be told from a metric by their text alone, so
metrics are checked where they are read from MLflow: a constant key of a ``.metrics`` mapping.
"""

from __future__ import annotations

import ast
from pathlib import Path

import prism.names as names
from prism.names import METRIC_ACCURACY, QUESTION_METRICS, RATE_METRICS, condition_metric

PACKAGE = Path(names.__file__).resolve().parent
OWNER = Path(names.__file__).resolve()


def _owned(prefixes: tuple[str, ...], suffix: str = "") -> dict[str, str]:
    """Value -> constant name of every string constant of ``prism.names`` with one of ``prefixes``."""
    return {value: key for key, value in vars(names).items()
            if isinstance(value, str) and key.startswith(prefixes) and key.endswith(suffix)}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(PACKAGE.rglob("*.py"))
            if path.resolve() != OWNER]


def spelled_again(watched: dict[str, str], modules: list[tuple[Path, ast.Module]]) -> list[str]:
    """``path:line: 'value' (CONSTANT)`` for each string literal equal to a watched name."""
    found = []
    for path, tree in modules:
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                    and node.value in watched):
                where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                found.append(f"{where}: {node.value!r} ({watched[node.value]})")
    return found


def metric_reads_by_literal(modules: list[tuple[Path, ast.Module]]) -> list[str]:
    """``path:line`` of each ``x.metrics[...]``, ``x.metrics.get(...)`` or ``... in x.metrics`` keyed by a literal name.

    A literal name is a string constant equal to a metric of ``prism.names`` (a DataFrame called ``metrics``
    read by its column, ``same``, is not one) or an f-string (``f"accuracy/{condition}"``).
    """
    logged = set(_owned(("METRIC_",)))
    def is_metrics(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "metrics") or (
            isinstance(node, ast.Name) and node.id == "metrics")

    def literal(node: ast.AST) -> bool:
        return (isinstance(node, ast.Constant) and node.value in logged) or isinstance(node, ast.JoinedStr)

    found = []
    for path, tree in modules:
        for node in ast.walk(tree):
            key: ast.expr | None = None
            if isinstance(node, ast.Subscript) and is_metrics(node.value):
                key = node.slice
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and is_metrics(node.func.value) and node.args):
                key = node.args[0]
            elif (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn)
                  and is_metrics(node.comparators[0])):
                key = node.left
            if key is not None and literal(key):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{key.lineno}")
    return found


def test_no_module_but_names_spells_a_tag_a_config_param_or_an_artifact() -> None:
    # Tags are prism.-prefixed; config-path params are dotted (model.name); artifact paths have a folder. The
    # comparison settings' params are plain words (seed, pairs) that are also config keys, so they are left out.
    tags = {**_owned(("TAG_", "MODEL_DETAIL_PREFIX", "DROPPED_PREFIX")), **_owned(("",), "_ARTIFACT")}
    params = {value: key for value, key in _owned(("PARAM_",)).items()
              if "." in value and not key.startswith(("PARAM_COMPARE_", "PARAM_EMBEDDING_"))}
    assert "prism.question_set_sha256" in tags and "model.name" in params  # the check watches what it should
    modules = _modules()
    assert spelled_again(tags, modules) == []
    # The config package's own messages name its settings by their paths (dataset.type=...): those are the
    # config's names, which the params take, not a read of a logged param.
    config = PACKAGE / "config"
    assert spelled_again(params, [(path, tree) for path, tree in modules if config not in path.parents]) == []


def test_no_module_reads_a_logged_metric_by_a_literal_name() -> None:
    assert metric_reads_by_literal(_modules()) == []


def test_the_checks_catch_a_name_spelled_again() -> None:
    # The same walk over a module that does what the tests forbid finds each line.
    source = ('TAG = "prism.question_set_sha256"\n'
              'def f(item, metrics):\n'
              '    return item.metrics.get("accuracy"), metrics[f"accuracy/{item}"], "n_questions" in item.metrics\n')
    fake = [(PACKAGE / "fake.py", ast.parse(source))]
    assert spelled_again({"prism.question_set_sha256": "TAG_QUESTION_SET"}, fake) == [
        "prism/fake.py:1: 'prism.question_set_sha256' (TAG_QUESTION_SET)"]
    assert metric_reads_by_literal(fake) == ["prism/fake.py:3", "prism/fake.py:3", "prism/fake.py:3"]


def test_metric_names_are_the_ones_runs_have_always_logged() -> None:
    # Runs logged before the names moved here must still be read: the values are the same strings.
    assert RATE_METRICS == ("accuracy", "conditional_accuracy", "answer_recovery_rate", "unknown_rate",
                            "instruction_compliance_rate")
    assert QUESTION_METRICS == ("question_majority_accuracy", "mean_agreement", "mean_prompt_sensitivity",
                                "answer_unanimous_rate", "prompt_invariant_incorrect_rate", "complete_questions",
                                "n_questions", "n_responses")
    assert condition_metric(METRIC_ACCURACY, "P0") == "accuracy/P0"
