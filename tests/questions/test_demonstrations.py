"""prism.questions.demonstrations: the pool, the seeded draw per question, its freezing, and every refusal."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.config import DemonstrationsConfig
from prism.questions import DataError, builtin_dataset, freeze_question_set
from prism.questions.demonstrations import draw, freeze_demonstrations, load_pool, normalised, read_draw
from prism.types import Question

# The pool each built-in dataset's YAML names, as the fixtures under tests/data/ hold it.
POOLS = {
    "arc_challenge": DemonstrationsConfig(splits=["train"]),
    "sciq": DemonstrationsConfig(splits=["validation"]),
    "mmlu": DemonstrationsConfig(splits=["dev", "validation"], same_group=True),
}

# The MMLU subjects the committed dev and validation pools hold (scripts/make_fewshot_fixtures.py).
POOL_SUBJECTS = ("anatomy", "astronomy", "college_physics", "virology")


def spec_of(name: str, data_dir: Path):
    return builtin_dataset(name, split="test", data_dir=str(data_dir))


def test_each_builtin_yaml_names_its_pool() -> None:
    import yaml
    from conftest import CONF_DIR

    for name, pool in {**POOLS, "openbookqa": DemonstrationsConfig(splits=["train"]),
                       "commonsense_qa": DemonstrationsConfig(splits=["train"])}.items():
        cfg = yaml.safe_load((CONF_DIR / "dataset" / f"{name}.yaml").read_text())["demonstrations"]
        assert cfg["splits"] == pool.splits and bool(cfg.get("same_group")) == pool.same_group, name


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31), dataset=st.sampled_from(sorted(POOLS)), same_split=st.booleans())
def test_a_demonstration_is_never_a_frozen_question(seed: int, dataset: str, same_split: bool, data_dir: Path,
                                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    """Over seeds and datasets, and with the pool the test split itself (where every frozen question is in it)."""
    spec = spec_of(dataset, data_dir)
    sample = replace(spec, subjects=POOL_SUBJECTS) if dataset == "mmlu" else spec
    frozen = freeze_question_set(sample, "test", 8, seed, cache_dir=tmp_path_factory.mktemp("f")).questions
    pool_cfg = DemonstrationsConfig(splits=["test"], same_group=dataset == "mmlu") if same_split else POOLS[dataset]
    pool = load_pool(spec, pool_cfg, seed)
    need = 4 if dataset == "mmlu" and not same_split else 6
    if dataset == "mmlu" and same_split:
        frozen = tuple(q for q in frozen if q.group == "college_physics")  # the subject with enough left over
    by_question = draw(frozen, [(split, items) for split, items, _ in pool], need, seed, pool_cfg.same_group)
    ids = {q.question_id for q in frozen}
    texts = {normalised(q.question) for q in frozen}
    for q in frozen:
        shown = by_question[q.question_id]
        assert len(shown) == need and len({d.question_id for d in shown}) == need
        for d in shown:
            assert d.question_id not in ids and normalised(d.question) not in texts
            assert len(d.options) == len(q.options) and d.answer is not None
            if pool_cfg.same_group:
                assert d.group == q.group


def test_the_draw_is_seeded_per_question_and_mmlu_takes_dev_before_validation(data_dir: Path, tmp_path: Path) -> None:
    spec = spec_of("mmlu", data_dir)
    frozen = freeze_question_set(replace(spec, subjects=("anatomy", "astronomy", "virology")), "test", 6, 0,
                                 cache_dir=tmp_path).questions
    pool = [(s, items) for s, items, _ in load_pool(spec, POOLS["mmlu"], 0)]
    first = draw(frozen, pool, 12, 0, True)
    assert first == draw(frozen, pool, 12, 0, True)  # the same seed, the same draw
    assert draw(frozen, pool, 12, 1, True) != first
    for q in frozen:
        assert [d.split for d in first[q.question_id]] == ["dev"] * 5 + ["validation"] * 7
    # A smaller need is a prefix: shots_k shows the first k of the one draw.
    four = draw(frozen, pool, 4, 0, True)
    assert all(four[q] == first[q][:4] for q in four)


def test_a_pool_too_small_is_refused_with_the_counts(data_dir: Path, tmp_path: Path) -> None:
    spec = spec_of("mmlu", data_dir)
    frozen = freeze_question_set(replace(spec, subjects=("anatomy",)), "test", 2, 0, cache_dir=tmp_path).questions
    pool = [(s, items) for s, items, _ in load_pool(spec, POOLS["mmlu"], 0)]
    with pytest.raises(DataError, match=r"need 40 demonstrations per question, but 2 of 2 question\(s\) have") as err:
        draw(frozen, pool, 40, 0, True)
    assert "(anatomy) has 19 (of a pool of 78:" in str(err.value) and "of another group" in str(err.value)


@pytest.mark.parametrize("dataset", ["openbookqa", "commonsense_qa"])
def test_a_split_the_data_at_hand_lacks_is_refused_naming_the_file(dataset: str, data_dir: Path) -> None:
    spec = builtin_dataset(dataset, split="validation" if dataset == "commonsense_qa" else "test",
                        data_dir=str(data_dir))
    with pytest.raises(DataError, match=rf"split 'train' of {dataset}.*{dataset}/train.jsonl does not exist"):
        load_pool(spec, DemonstrationsConfig(splits=["train"]), 0)


def test_no_pool_and_items_without_a_key_are_refused(data_dir: Path) -> None:
    spec = spec_of("arc_challenge", data_dir)
    with pytest.raises(DataError, match="names no pool"):
        load_pool(spec, DemonstrationsConfig(), 0)
    with pytest.raises(DataError, match="without an answer key"):
        load_pool(replace(spec, answer_format="none", fields=replace(spec.fields, answer=None)),
                  POOLS["arc_challenge"], 0)


def test_a_pool_file_with_its_own_mapping(data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "shots.jsonl"
    path.write_text("".join(json.dumps({"q": f"Demonstration {i}?", "opts": ["w", "x", "y", "z"], "key": i % 4}) + "\n"
                            for i in range(6)), encoding="utf-8")
    spec = spec_of("mmlu", data_dir)
    cfg = DemonstrationsConfig(path=str(path), fields={"question": "q", "options": "opts", "answer": "key"})
    [(split, items, _)] = load_pool(spec, cfg, 0)
    assert split == "demonstrations" and [d.answer for d in items] == ["A", "B", "C", "D", "A", "B"]


def test_the_draw_is_frozen_beside_the_question_set_and_a_changed_file_is_refused(data_dir: Path,
                                                                                tmp_path: Path) -> None:
    spec = spec_of("arc_challenge", data_dir)
    frozen = freeze_question_set(spec, "test", 5, 0, cache_dir=tmp_path)
    first = freeze_demonstrations(spec, POOLS["arc_challenge"], frozen.questions, frozen.path, 0, 12)
    assert first.path.parent == frozen.path.parent and first.path.name.startswith(frozen.path.stem + ".demos12-")
    assert read_draw(first.path) == first.by_question
    again = freeze_demonstrations(spec, POOLS["arc_challenge"], frozen.questions, frozen.path, 0, 12)
    assert again.sha256 == first.sha256
    lines = first.path.read_text(encoding="utf-8").split("\n")
    record = json.loads(lines[0])
    record["demonstrations"][0]["answer"] = "A" if record["demonstrations"][0]["answer"] != "A" else "B"
    first.path.write_text("\n".join([json.dumps(record), *lines[1:]]), encoding="utf-8")
    with pytest.raises(DataError, match="drawing them again gives"):
        freeze_demonstrations(spec, POOLS["arc_challenge"], frozen.questions, frozen.path, 0, 12)


def test_the_demonstrations_stay_out_of_the_frozen_bytes_and_equality() -> None:
    q = Question("q", "Stem?", ("a", "b"), ("A", "B"), "A", "arc_challenge", "test")
    shot = Question("d", "Other?", ("c", "d"), ("A", "B"), "B", "arc_challenge", "train")
    with_shots = replace(q, demonstrations=(shot,))
    assert with_shots == q and hash(with_shots) == hash(q) and with_shots.to_dict() == q.to_dict()
    assert "demonstrations" not in q.to_dict()


def test_full_arc_train_and_mmlu_pools_cover_every_question(full_data_dir: Path, tmp_path: Path) -> None:
    """With the full data: ARC-Challenge's train split and every MMLU subject's dev + validation hold 12 each."""
    for name in ("arc_challenge", "mmlu"):
        spec = spec_of(name, full_data_dir)
        if name == "mmlu":
            spec = replace(spec, stratify="subject")
        frozen = freeze_question_set(spec, "test", 114 if name == "mmlu" else 100, 0, cache_dir=tmp_path)
        result = freeze_demonstrations(spec, POOLS[name], frozen.questions, frozen.path, 0, 12)
        assert all(len(v) == 12 for v in result.by_question.values())
    shutil.rmtree(tmp_path)
