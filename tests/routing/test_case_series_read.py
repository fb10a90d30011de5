"""``case_series`` reads filtered key columns as small integers: every filter shape names its groups
right (both backends)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger

MakeResult = Callable[..., GradingResult]

TASKS = ["t1", "t2"]
BASELINES = ["base-a", "base-b"]
GRADERS = ["exact", "embedding", "vrty"]
MODELS = ["m1", "m2", "m3"]


def _score(task: str, baseline: str, grader: str, model: str, case: int) -> float:
    return round(
        0.5
        + 0.01 * (TASKS.index(task) + 2 * BASELINES.index(baseline) + 3 * GRADERS.index(grader))
        + 0.07 * MODELS.index(model)
        + 0.003 * case,
        6,
    )


@pytest.fixture
def filled(ledger: QualityLedger, make_result: MakeResult) -> QualityLedger:
    for task in TASKS:
        items = [
            make_result(
                _score(task, baseline, grader, model, case),
                candidate_model=model,
                baseline_model=baseline,
                grader_id=grader,
                prompt=f"{task} case {case}",
            )
            for baseline in BASELINES
            for grader in GRADERS
            for model in MODELS
            for case in range(4 if model == "m1" else 3)
        ]
        ledger.record_many(items, task=task, run_id="r1")
    return ledger


def _key(s: object) -> tuple[str, str, str, str]:
    return (s.task, s.baseline_model, s.grader_id, s.candidate_model)  # type: ignore[attr-defined]


def test_every_filter_shape_names_its_groups(filled: QualityLedger) -> None:
    everything = {_key(s): s for s in filled.case_series()}
    assert len(everything) == len(TASKS) * len(BASELINES) * len(GRADERS) * len(MODELS)
    for (task, baseline, grader, model), s in everything.items():
        cases = 4 if model == "m1" else 3
        assert s.grades == (1,) * cases
        assert s.sum_quality == pytest.approx(
            [_score(task, baseline, grader, model, c) for c in range(cases)]
        )
    shapes = [
        {"task": "t2"},
        {
            "task": "t1",
            "baseline_model": "base-b",
            "grader_id": ["vrty", "exact"],
            "candidate_model": ["m3", "m1"],
        },
        {"grader_id": ["embedding", "embedding", "vrty"], "candidate_model": "m2"},
        {"task": ["t2", "t1"], "candidate_model": ["m2", "m1", "m3"]},
        {"baseline_model": ["base-a"], "grader_id": GRADERS, "candidate_model": ["m1", "missing"]},
    ]
    for shape in shapes:
        got = filled.case_series(**shape)  # type: ignore[arg-type]
        want = [
            k
            for k in everything
            if all(
                k[i] in ([v] if isinstance(v, str) else v)
                for i, name in enumerate(("task", "baseline_model", "grader_id", "candidate_model"))
                if (v := shape.get(name)) is not None
            )
        ]
        assert sorted(_key(s) for s in got) == sorted(want), shape
        for s in got:
            assert s == everything[_key(s)], shape
    assert filled.case_series(task=[]) == []


def test_after_reads_only_the_named_groups_past_their_ids(filled: QualityLedger) -> None:
    full = {_key(s): s for s in filled.case_series(task="t1", baseline_model="base-a")}
    m1, m2 = full[("t1", "base-a", "exact", "m1")], full[("t1", "base-a", "vrty", "m2")]
    got = filled.case_series(
        task="t1",
        baseline_model="base-a",
        after={("m1", "exact"): m1.first_ids[1], ("m2", "vrty"): m2.first_ids[-1]},
    )
    # m1/exact: its cases past the second; m2/vrty: none left, so the group is absent
    assert [_key(s) for s in got] == [("t1", "base-a", "exact", "m1")]
    assert got[0].first_ids == m1.first_ids[2:] and got[0].sum_quality == m1.sum_quality[2:]
    assert filled.case_series(task="t1", after={}) == []


def test_routing_read_is_the_totals_and_the_new_cases_together(filled: QualityLedger) -> None:
    series = {_key(s): s for s in filled.case_series(task="t2", baseline_model="base-b")}
    after = {("m1", "exact"): series[("t2", "base-b", "exact", "m1")].first_ids[0]}
    totals, cases = filled.routing_read(
        task="t2", baseline_model="base-b", grader_id=["exact", "vrty"], candidate_model=MODELS, after=after
    )
    assert totals == filled.grade_totals(
        task="t2", baseline_model="base-b", grader_id=["exact", "vrty"], candidate_model=MODELS
    )
    assert len(totals) == 2 * len(MODELS)
    assert cases == filled.case_series(task="t2", baseline_model="base-b", after=after)
    assert [s.n_cases for s in cases] == [3]  # m1/exact's 4 cases past its first
    assert filled.routing_read(
        task="t2", baseline_model="base-b", grader_id=["exact"], candidate_model=["m1"]
    ) == (
        filled.grade_totals(task="t2", baseline_model="base-b", grader_id="exact", candidate_model="m1"),
        [],
    )
    assert filled.routing_read(task="t2", baseline_model="base-b", grader_id=[], candidate_model=MODELS) == (
        [],
        [],
    )
