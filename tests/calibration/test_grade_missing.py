"""Calibration never grades outside what it was asked to measure (issue 34, item 6).

``llm-connect calibrate`` grades only the pairs it compares: against people the labelled cases
(of the task asked), against a reference judge the pairs the judge graded. When a verdict needs
more, it says how many pairs and LLM calls (and about what cost, where the judge's grades recorded
one) grading them would take and exits 2; ``--grade-missing`` grades every missing pair.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from llm_connect.adapters import OpenAIAdapter
from llm_connect.calibration import plan_fill
from llm_connect.cli import app
from llm_connect.grading import JudgeContext, LLMJudge, build_judge
from llm_connect.labels import HumanLabel
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.types import RunConfig
from tests.calibration import _world as w
from tests.fixtures.databases import _make_result


def _calibrate(url: str, *args: str) -> Any:
    return CliRunner().invoke(app, ["calibrate", "--db", url, *args])


def _two_tasks(url: str) -> None:
    """Task ``labelled``: 25 cases graded by ``exact``, each labelled by a person; task ``other``:
    40 cases graded by ``exact``, no labels."""
    items = []
    for task, n in (("labelled", 25), ("other", 40)):
        for i in range(n):
            good = i % 3 != 0
            result = _make_result(
                1.0 if good else 0.0, grader_id="exact", candidate_model="small", prompt=f"{task} q{i}",
                baseline_text=f"answer {i}", candidate_text=f"answer {i}" if good else f"wrong {i}",
            )  # fmt: skip
            items.append(RecordItem(result, task=task, run_id=f"r-{task}", case_id=f"c{i}"))
    labels = [
        HumanLabel("labelled", f"c{i}", "small", "ann", preference="candidate" if i % 3 else "baseline")
        for i in range(25)
    ]
    with QualityLedger(url) as ledger:
        ledger.record_batch(items)
        ledger.record_labels(labels)


def _counts(url: str, grader_prefix: str) -> dict[str, int]:
    with QualityLedger(url) as ledger:
        rows = [r for r in ledger.results() if r.grader_id.startswith(grader_prefix)]
    return {task: sum(1 for r in rows if r.task == task) for task in ("labelled", "other")}


def test_against_people_only_the_labelled_cases_are_graded(ledger_url: str) -> None:
    # The case: `--judge vrty --against human` graded 40 pairs of a task nobody labelled.
    _two_tasks(ledger_url)
    result = _calibrate(ledger_url, "--judge", "vrty", "--against", "human", "--json")
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    (vrty,) = out["grading"]["graded"]
    assert out["grading"]["graded"][vrty] == 25 and out["grading"]["left_out"] == {vrty: 40}
    assert out["references"][-1]["n"] == 25 and out["references"][-1]["unmatched"] == 0
    # the task nobody labelled keeps its evidence
    assert _counts(ledger_url, "vrty") == {"labelled": 25, "other": 0}

    text = _calibrate(ledger_url, "--judge", vrty, "--against", "human", "--no-store")
    assert "graded 0 missing pair(s)" in text.stdout
    assert f"left ungraded, outside what this calibration compares: 40 pair(s) for {vrty}" in text.stdout

    # asked to, it grades the rest
    every = _calibrate(ledger_url, "--judge", vrty, "--against", "human", "--grade-missing", "--json")
    assert json.loads(every.stdout)["grading"]["graded"] == {vrty: 40}
    assert _counts(ledger_url, "vrty") == {"labelled": 25, "other": 40}


def test_a_task_asked_restricts_the_labelled_cases_too(sqlite_url: str) -> None:
    _two_tasks(sqlite_url)
    with QualityLedger(sqlite_url) as ledger:
        ledger.record_labels([HumanLabel("other", "c1", "small", "ann", preference="candidate")])
    result = _calibrate(sqlite_url, "--judge", "vrty", "--against", "human", "--task", "other", "--json")
    out = json.loads(result.stdout)
    assert list(out["grading"]["graded"].values()) == [1]  # the one labelled case of the task asked
    assert _counts(sqlite_url, "vrty") == {"labelled": 0, "other": 1}


def test_a_reference_grades_only_the_pairs_the_judge_graded(sqlite_url: str) -> None:
    _two_tasks(sqlite_url)
    judge = build_judge("exact:normalize=true", JudgeContext())
    with QualityLedger(sqlite_url) as ledger:
        rows = [r for r in ledger.results(grader_id="exact")][:55]
        for r in rows:
            result = judge.judge(
                r.baseline_response, r.candidate_response, prompt=r.prompt or "", run_config=RunConfig()
            )
            ledger.record(result, task=r.task, run_id=r.run_id, case_id=r.case_id)
    out = json.loads(
        _calibrate(sqlite_url, "--judge", judge.grader_id, "--against", "length:max_words=3", "--json").stdout
    )
    reference = next(g for g in out["grading"]["graded"] if g.startswith("length"))
    assert out["grading"]["graded"] == {judge.grader_id: 0, reference: 55}
    assert out["grading"]["left_out"] == {judge.grader_id: 10, reference: 10}
    assert out["references"][0]["n"] == 55


def test_too_few_pairs_for_a_verdict_stops_with_the_calls_and_cost_it_would_take(
    sqlite_url: str, openai_server: Any
) -> None:
    openai_server.responder = w.judge_responder("fair")
    pairs = w.make_pairs(60)
    with QualityLedger(sqlite_url) as ledger:
        w.record_oracle(ledger, pairs)
        priced = LLMJudge(
            OpenAIAdapter(
                w.JUDGE_MODEL, base_url=openai_server.base_url, api_key="sk-test-x",
                pricing={"input": 2.0, "output": 8.0},
            )
        )  # fmt: skip
        for p in pairs[:10]:  # the judge graded 10 pairs before, its cost recorded on each grade
            ledger.record(w.as_result(priced, p), task=w.TASK, run_id="run-1", case_id=f"c{p.index}")
        costs = [r.details["judge_cost_usd"] for r in ledger.results(grader_id=priced.grader_id)]
        before = ledger.count()
    assert len(costs) == 10 and all(c > 0 for c in costs)
    calls = len(openai_server.requests_to("/chat/completions"))
    base = ["--base-url", openai_server.base_url, "--api-key", "sk-test-x", "--against", "oracle"]

    stopped = _calibrate(sqlite_url, "--judge", priced.grader_id, *base)
    assert stopped.exit_code == 2, stopped.output
    estimate = f"{50 * sum(costs) / 10:.6f}".rstrip("0").rstrip(".")
    assert (
        f"error: more grading needed: {priced.grader_id} has 10 pair(s) to compare with oracle:v1, fewer than "
        "the 50 a verdict needs (--min-n)." in stopped.stderr
    )
    assert (
        f"--grade-missing would grade the stored pairs each has not graded: 50 with {priced.grader_id} "
        f"(50 LLM call(s), about ${estimate} at the mean cost recorded on its grades), 0 with oracle:v1."
    ) in stopped.stderr
    assert "Run again with --grade-missing" in stopped.stderr
    # nothing was called or written, and no calibration stored
    assert len(openai_server.requests_to("/chat/completions")) == calls
    with QualityLedger(sqlite_url) as ledger:
        assert ledger.count() == before and ledger.calibrations() == []

    # a judge that recorded no cost: the count alone
    fresh = _calibrate(sqlite_url, "--judge", "llm:openai:gpt-4.1-mini", *base)
    assert fresh.exit_code == 2
    assert "(60 LLM call(s), cost unknown: no cost recorded on its grades)" in fresh.stderr

    graded = _calibrate(sqlite_url, "--judge", priced.grader_id, *base, "--grade-missing", "--json")
    assert graded.exit_code == 0, graded.output
    assert json.loads(graded.stdout)["grading"]["graded"] == {priced.grader_id: 50, "oracle:v1": 0}
    assert len(openai_server.requests_to("/chat/completions")) == calls + 50


def test_grade_missing_and_no_grade_contradict(sqlite_url: str) -> None:
    _two_tasks(sqlite_url)
    result = _calibrate(sqlite_url, "--judge", "exact", "--against", "human", "--grade-missing", "--no-grade")
    assert result.exit_code == 2 and "--grade-missing" in result.stderr


def test_without_labels_to_compare_it_grades_nothing_and_says_so(sqlite_url: str) -> None:
    _two_tasks(sqlite_url)
    result = _calibrate(sqlite_url, "--judge", "vrty", "--against", "human", "--task", "other")
    assert result.exit_code == 2, result.output
    assert "no labelled case of task other asks it for one" in result.stderr
    assert "--grade-missing would grade the stored pairs each has not graded: 40 with vrty" in result.stderr
    assert _counts(sqlite_url, "vrty") == {"labelled": 0, "other": 0}


def test_the_plan_names_the_pairs_compared(sqlite_url: str) -> None:
    _two_tasks(sqlite_url)
    with QualityLedger(sqlite_url) as ledger:
        people = plan_fill(ledger, "vrty:1", ["human"])
        assert people.missing == {"vrty:1": 25} and people.extra == {"vrty:1": 40} and not people.needs_more
        judge = plan_fill(ledger, "exact", ["vrty:1"], min_n=50)
        assert judge.missing == {"exact": 0, "vrty:1": 65} and not judge.needs_more
        short = plan_fill(ledger, "vrty:1", ["exact"], min_n=50)
        assert short.needs_more and short.missing == {"vrty:1": 0, "exact": 0}
        assert short.extra == {"vrty:1": 65, "exact": 0}


@pytest.mark.postgres
def test_a_shared_fill_grades_only_the_pairs_asked(postgres_url: str) -> None:
    from llm_connect.calibration import fill_missing_grades

    _two_tasks(postgres_url)
    judge = build_judge("length:max_words=3", JudgeContext())
    with QualityLedger(postgres_url) as ledger:
        plan = plan_fill(ledger, judge.grader_id, ["human"])
        report = fill_missing_grades(ledger, [judge], shared_run="fill-1", pairs=plan.compare, lease_s=5)
        grades = list(ledger.results(grader_id=judge.grader_id))
    assert report.graded == {judge.grader_id: 25} and report.left_out == {judge.grader_id: 40}
    assert {g.task for g in grades} == {"labelled"}
