"""calibrate() over a real ledger (SQLite and PostgreSQL) with the real LLMJudge on the loopback server."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from llm_connect.calibration import CalibrationThresholds, calibrate, fill_missing_grades, resolve_grader
from llm_connect.errors import CalibrationError, ConfigurationError
from llm_connect.ledger import QualityLedger
from tests.calibration import _world as w

PROBES = ["position", "length", "self_preference"]


def _world(ledger: QualityLedger, server: Any, mode: str, n: int = 60) -> Any:
    pairs = w.make_pairs(n)
    w.record_oracle(ledger, pairs)
    server.responder = w.judge_responder(mode)
    judge = w.llm_judge(server.base_url)
    filled = fill_missing_grades(ledger, [judge])
    assert filled.graded == {judge.grader_id: n} and not filled.errors
    return judge


def test_fair_judge_passes_and_the_report_is_stored(ledger: QualityLedger, openai_server: Any) -> None:
    judge = _world(ledger, openai_server, "fair")
    report = calibrate(ledger, judge=judge.grader_id, against=["oracle"], judge_adapter=judge, probes=PROBES)
    assert report.verdict == "pass" and report.passed
    ref = report.reference("oracle:v1")
    assert ref.agreement.n == 60
    assert ref.agreement.spearman.value == pytest.approx(1.0)
    assert ref.agreement.cohen_kappa.value == pytest.approx(1.0)
    assert ref.agreement.mean_abs_diff.value == pytest.approx(0.0, abs=1e-4)
    assert report.position is not None and not report.position.flagged
    assert report.position.consistency_rate.value == 1.0 and report.position.n == 50
    assert report.length is not None and not report.length.flagged
    assert report.self_preference is not None and not report.self_preference.flagged

    stored = ledger.latest_calibration(judge.grader_id)
    assert stored is not None and stored.id == report.calibration_id
    assert stored.passed and stored.verdict == "pass"
    assert stored.references == ("oracle:v1",)
    figures = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert figures.pop("calibration_id") == stored.id
    assert dict(stored.figures) == figures


def test_swapped_calls_put_the_candidate_in_the_baseline_slot(
    ledger: QualityLedger, openai_server: Any
) -> None:
    judge = _world(ledger, openai_server, "fair", n=12)
    before = len(openai_server.requests_to("/chat/completions"))
    calibrate(
        ledger,
        judge=judge.grader_id,
        against=["oracle"],
        judge_adapter=judge,
        probes=["position"],
        sample=5,
        min_pairs=5,
    )
    swapped = openai_server.requests_to("/chat/completions")[before:]
    assert len(swapped) == 5
    for req in swapped:
        base_slot, cand_slot = w.slots(req.body)
        assert base_slot.startswith("Candidate answer") and cand_slot.startswith("Baseline answer")
        assert req.body["temperature"] == 0.0


def test_too_few_pairs_gives_insufficient_data_not_numbers(ledger: QualityLedger, openai_server: Any) -> None:
    judge = _world(ledger, openai_server, "fair", n=8)
    report = calibrate(ledger, judge=judge.grader_id, against=["oracle"])
    ref = report.reference("oracle:v1")
    assert ref.agreement.status == "insufficient data" and ref.agreement.spearman.value is None
    assert report.verdict.startswith("insufficient data") and not report.passed
    stored = ledger.latest_calibration(judge.grader_id)
    assert stored is not None and stored.figures["references"][0]["spearman"]["value"] is None


def test_below_min_n_the_figures_are_shown_but_the_verdict_waits(
    ledger: QualityLedger, openai_server: Any
) -> None:
    judge = _world(ledger, openai_server, "fair", n=20)
    report = calibrate(ledger, judge=judge.grader_id, against=["oracle"])
    assert report.reference("oracle:v1").agreement.spearman.value == pytest.approx(1.0)
    assert report.verdict == "insufficient data: oracle:v1: n=20 < min_n=50"
    lenient = calibrate(
        ledger, judge=judge.grader_id, against=["oracle"], thresholds=CalibrationThresholds(min_n=20)
    )
    assert lenient.passed


def test_the_report_is_reproducible(ledger: QualityLedger, openai_server: Any) -> None:
    judge = _world(ledger, openai_server, "self", n=30)
    first = calibrate(ledger, judge=judge.grader_id, against=["oracle"]).to_dict()
    second = calibrate(ledger, judge=judge.grader_id, against=["oracle"]).to_dict()
    assert first.pop("calibration_id") != second.pop("calibration_id")
    assert first == second


def test_judge_and_references_resolve_from_specs(ledger: QualityLedger, openai_server: Any) -> None:
    judge = _world(ledger, openai_server, "fair", n=10)
    assert resolve_grader(ledger, "oracle") == ("oracle:v1", {"name": "oracle", "args": {}})
    gid, spec = resolve_grader(ledger, f"llm:openai:{w.JUDGE_MODEL}")
    assert gid == judge.grader_id and spec == {
        "name": "llm",
        "args": {"model": f"openai:{w.JUDGE_MODEL}", "rubric": "rubric-v1"},
    }
    report = calibrate(ledger, judge=f"llm:openai:{w.JUDGE_MODEL}", against=["oracle"], record=False)
    assert report.judge == judge.grader_id and report.calibration_id is None


def test_errors_name_the_problem(ledger: QualityLedger, openai_server: Any) -> None:
    judge = _world(ledger, openai_server, "fair", n=10)
    with pytest.raises(CalibrationError, match="at least one reference"):
        calibrate(ledger, judge=judge.grader_id, against=[])
    with pytest.raises(CalibrationError, match="no grades by 'embedding'"):
        calibrate(ledger, judge=judge.grader_id, against=["embedding"])
    with pytest.raises(CalibrationError, match="is the judge under test"):
        calibrate(ledger, judge=judge.grader_id, against=[judge.grader_id])
    other_llm = dataclasses.replace(
        next(iter(ledger.results(grader_id=judge.grader_id))).to_result(),
        grader_id="llm:openai:other:rubric-v1",
    )
    ledger.record(other_llm, task=w.TASK)
    with pytest.raises(CalibrationError, match="at least one non-LLM judge"):
        calibrate(ledger, judge=judge.grader_id, against=["llm:openai:other:rubric-v1"])
    with pytest.raises(CalibrationError, match="position probe needs the judge"):
        calibrate(ledger, judge=judge.grader_id, against=["oracle"], probes=["position"])
    with pytest.raises(ConfigurationError, match="unknown probe"):
        calibrate(ledger, judge=judge.grader_id, against=["oracle"], probes=["verbosity"])
    with pytest.raises(ConfigurationError, match="threshold"):
        calibrate(ledger, judge=judge.grader_id, against=["oracle"], threshold=1.5)
    assert ledger.calibrations() == []


def test_fill_missing_grades_makes_no_model_calls_for_the_pair_and_is_idempotent(
    ledger: QualityLedger, openai_server: Any
) -> None:
    judge = _world(ledger, openai_server, "fair", n=12)
    calls = openai_server.requests_to("/chat/completions")
    assert len(calls) == 12  # one judge call per pair, nothing else
    again = fill_missing_grades(ledger, [judge])
    assert again.graded == {judge.grader_id: 0} and again.already == {judge.grader_id: 12}
    assert len(openai_server.requests_to("/chat/completions")) == 12
    rows = list(ledger.results(grader_id=judge.grader_id))
    assert {(r.run_id, r.case_id, r.task) for r in rows} == {("run-1", f"c{i}", w.TASK) for i in range(12)}


def test_a_regraded_pair_counts_once_with_its_latest_grade(ledger: QualityLedger, openai_server: Any) -> None:
    judge = _world(ledger, openai_server, "fair", n=12)
    first = next(iter(ledger.results(grader_id=judge.grader_id)))
    regraded = dataclasses.replace(first.to_result(), quality_score=0.0)
    ledger.record(regraded, task=w.TASK)  # no run/case id: a second grade of the same pair
    report = calibrate(ledger, judge=judge.grader_id, against=["oracle"], record=False)
    assert report.reference("oracle:v1").agreement.n == 12
    oracle = next(r for r in ledger.results(grader_id="oracle:v1") if r.case_id == first.case_id)
    assert (0.0, oracle.quality_score) in report.scores["oracle:v1"]


# -- which graders ask an LLM: what the judges declared, not their names ----------------


@dataclasses.dataclass
class _HouseScorer:
    """A plugin's scorer grading through a model of its own, under a name without ``llm:``."""

    asks_llm: bool
    name: str = "house:v1"
    spec: Any = dataclasses.field(default_factory=lambda: {"name": "house", "args": {}})

    def score(self, text: str, *, prompt: str, case: Any = None) -> Any:
        from llm_connect.scoring import Score

        return Score(w.QUALITY[text])


def _record_house(ledger: QualityLedger, *, asks_llm: bool, n: int) -> str:
    from llm_connect.grading.judges import RelativeJudge

    judge = RelativeJudge(_HouseScorer(asks_llm))
    assert judge.asks_llm is asks_llm
    for p in w.make_pairs(n):
        result = w.as_result(judge, p)
        assert result.asks_llm is asks_llm and result.details["judge_spec"]["asks_llm"] is asks_llm
        ledger.record(result, task=w.TASK, run_id="run-1", case_id=f"c{p.index}")
    return judge.grader_id


@pytest.mark.parametrize("asks_llm", [True, False])
def test_a_reference_that_declares_it_asks_an_llm_cannot_stand_alone(
    ledger: QualityLedger, openai_server: Any, asks_llm: bool
) -> None:
    judge = _world(ledger, openai_server, "fair", n=10)
    house = _record_house(ledger, asks_llm=asks_llm, n=10)
    if asks_llm:
        with pytest.raises(CalibrationError, match=r"at least one non-LLM judge.*house:v1 all ask an LLM"):
            calibrate(ledger, judge=judge.grader_id, against=[house], record=False)
    else:
        report = calibrate(ledger, judge=judge.grader_id, against=[house], record=False)
        assert report.reference(house).agreement.n == 10


@pytest.mark.parametrize("asks_llm", [True, False])
def test_a_judge_that_declares_it_asks_an_llm_gets_the_self_preference_probe(
    ledger: QualityLedger, asks_llm: bool
) -> None:
    w.record_oracle(ledger, w.make_pairs(10))
    house = _record_house(ledger, asks_llm=asks_llm, n=10)
    report = calibrate(ledger, judge=house, against=["oracle"], record=False)
    if asks_llm:
        assert report.self_preference is not None
        assert not any("self-preference probe skipped" in note for note in report.notes)
    else:
        assert report.self_preference is None
        assert "self-preference probe skipped: 'house:v1' is not an LLM judge" in report.notes


def test_grades_stored_before_the_flag_fall_back_to_the_grader_id() -> None:
    from types import SimpleNamespace

    from llm_connect.calibration._calibrate import grades_ask_llm

    def rows(spec: dict[str, Any] | None, **extra: Any) -> list[Any]:
        return [SimpleNamespace(details={} if spec is None else {"judge_spec": spec}, **extra)]

    old = {"name": "llm", "args": {}}
    assert grades_ask_llm("llm:openai:gpt-4o:rubric-v1", rows(old)) is True
    assert grades_ask_llm("safety:default+llm:openai:g", rows(None)) is True
    assert grades_ask_llm("embedding:all-MiniLM-L6-v2", rows(None)) is False
    # a declared flag wins over the name, either way
    assert grades_ask_llm("house:v1", rows({**old, "asks_llm": True})) is True
    assert grades_ask_llm("llm-free-name:llm:x", rows({**old, "asks_llm": False})) is False
    # and the grade's own flag (set from the judge's attribute) counts too
    assert grades_ask_llm("house:v1", rows({**old, "asks_llm": False}, asks_llm=True)) is True
