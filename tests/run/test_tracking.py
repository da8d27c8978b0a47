from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prism.run.tracking import MlflowTracker, TrackingError, flatten, git_state, resolve_tracking_uri


def test_tracking_uri_precedence(monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://env:5000")
    assert resolve_tracking_uri("sqlite:///cfg.db") == "sqlite:///cfg.db"
    assert resolve_tracking_uri(None) == "http://env:5000"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert resolve_tracking_uri(None) is None  # MLflow's own default store


def test_flatten_gives_dotted_string_params() -> None:
    assert flatten({"model": {"name": "smollm2", "path": None}, "seed": 0, "tags": ["a", "b"]}) == {
        "model.name": "smollm2", "model.path": "null", "seed": "0", "tags": "a,b"}


def test_git_state_of_this_checkout_and_outside_git(tmp_path: Path) -> None:
    commit, _ = git_state(Path(__file__).parent)
    assert len(commit) == 40
    assert git_state(tmp_path) == ("unknown", False)


def test_unreachable_tracking_server_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    with pytest.raises(TrackingError, match=r"cannot use the MLflow tracking store 'http://127\.0\.0\.1:9'"):
        MlflowTracker("http://127.0.0.1:9", "prism")


def test_nan_metrics_are_left_out_not_faked(tmp_path: Path) -> None:
    import mlflow

    tracker = MlflowTracker(f"sqlite:///{tmp_path}/m.db", "prism")
    run_id = tracker.start("t", {"prism.kind": "run"})
    tracker.log_metrics({"accuracy": 0.5, "conditional_accuracy": float("nan")})
    tracker.end()
    metrics = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path}/m.db").get_run(run_id).data.metrics
    assert metrics == {"accuracy": 0.5}


def test_earlier_digests_finds_runs_by_params_in_this_experiment_only(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/m.db"
    ids = {}
    for name, experiment, digest in (("a", "prism", "d1"), ("b", "prism", "d2"), ("c", "other", "d3"),
                                     ("d", "prism", "d4")):
        tracker = MlflowTracker(uri, experiment)
        ids[name] = tracker.start(name, {"prism.model_digest": digest})
        tracker.log_params({"model.name": "llama3" if name != "d" else "mistral", "model.backend": "ollama"})
        tracker.end()
    tracker = MlflowTracker(uri, "prism")
    wanted = {"model.name": "llama3", "model.backend": "ollama"}
    assert tracker.earlier_digests(wanted) == {"d1": [ids["a"]], "d2": [ids["b"]]}
    assert tracker.earlier_digests(wanted, exclude_run_id=ids["b"]) == {"d1": [ids["a"]]}
    assert tracker.earlier_digests({"model.name": "it's"}) == {}  # not expressible: no answer, not a wrong one


def test_tracking_server_without_an_address_is_an_error_not_a_local_fallback(monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(TrackingError, match="tracking=server needs the tracking server's address"):
        resolve_tracking_uri(None, require_server=True)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://team:5000")
    assert resolve_tracking_uri(None, require_server=True) == "http://team:5000"


class _RacingMlflow:
    """Stands in for ``mlflow`` in log_question_set: the first ``log_input`` raises ``first``, later ones log."""

    def __init__(self, first: Exception) -> None:
        import types

        self.first: Exception | None = first
        self.logged: list[str] = []
        self.data = types.SimpleNamespace(from_pandas=lambda frame, **kw: kw["name"])

    def log_input(self, dataset: str, context: str) -> None:
        if self.first is not None:
            error, self.first = self.first, None
            raise error
        self.logged.append(dataset)


def _tracker_with(fake: _RacingMlflow) -> Any:
    tracker = MlflowTracker.__new__(MlflowTracker)
    tracker._mlflow = fake
    return tracker


QUESTION = {"question_id": "q1", "question": "?", "options": ["a", "b"], "labels": ["A", "B"], "answer": "A"}


def test_a_question_set_another_sweep_run_inserted_first_is_linked_again() -> None:
    race = RuntimeError('BAD_REQUEST: (psycopg2.errors.UniqueViolation) duplicate key value violates unique '
                       'constraint "dataset_pk"')
    fake = _RacingMlflow(race)
    _tracker_with(fake).log_question_set([QUESTION], "arc-n1", "0" * 64, "/tmp/x.jsonl")
    assert fake.logged == ["arc-n1"]


def test_any_other_store_error_while_logging_the_question_set_is_raised() -> None:
    fake = _RacingMlflow(RuntimeError("connection refused"))
    with pytest.raises(RuntimeError, match="connection refused"):
        _tracker_with(fake).log_question_set([QUESTION], "arc-n1", "0" * 64, "/tmp/x.jsonl")
    assert fake.logged == []
