"""The routing gate end to end: an LLM judge's grades drive routing only after a passing calibration."""

from __future__ import annotations

from typing import Any

from llm_connect.calibration import calibrate, fill_missing_grades
from llm_connect.ledger import QualityLedger
from llm_connect.routing import Router
from tests.calibration import _world as w


def _ledger_with_llm_grades(ledger: QualityLedger, server: Any, mode: str) -> Any:
    # "support": candidates really are as good (routing material); "mixed": varied quality (calibration material)
    # 80 cases per candidate: enough for the anytime-valid bound to prove 0.9 (30 are not).
    w.record_oracle(ledger, w.make_pairs(160, low=0.88, seed=1), run_id="run-support")
    w.record_oracle(ledger, w.make_pairs(60, seed=2, start=1000), run_id="run-mixed", task="mixed")
    server.responder = w.judge_responder(mode)
    judge = w.llm_judge(server.base_url)
    fill_missing_grades(ledger, [judge])
    return judge


def _decide(ledger: QualityLedger, grader_id: str, **kwargs: Any) -> Any:
    return Router(ledger).decide(
        w.TASK,
        baseline=w.BASELINE_MODEL,
        candidates=["gpt-4o-mini", "claude-3-haiku"],
        grader_id=grader_id,
        min_quality=0.9,
        min_samples=30,
        **kwargs,
    )


def test_uncalibrated_llm_judge_is_refused_then_used_after_a_passing_calibration(
    ledger: QualityLedger, openai_server: Any
) -> None:
    judge = _ledger_with_llm_grades(ledger, openai_server, "fair")

    refused = _decide(ledger, judge.grader_id)
    assert refused.model == w.BASELINE_MODEL
    assert "no stored calibration" in refused.reason and judge.grader_id in refused.reason

    overridden = _decide(ledger, judge.grader_id, allow_uncalibrated=True)
    assert overridden.model != w.BASELINE_MODEL

    report = calibrate(ledger, judge=judge.grader_id, against=["oracle"], judge_adapter=judge)
    assert report.passed, report.verdict
    used = _decide(ledger, judge.grader_id)
    assert used.model == overridden.model != w.BASELINE_MODEL
    assert "no stored calibration" not in used.reason


def test_a_failed_calibration_keeps_the_router_on_the_baseline_and_says_why(
    ledger: QualityLedger, openai_server: Any
) -> None:
    judge = _ledger_with_llm_grades(ledger, openai_server, "length")
    report = calibrate(ledger, judge=judge.grader_id, against=["oracle"])
    assert not report.passed
    decision = _decide(ledger, judge.grader_id)
    assert decision.model == w.BASELINE_MODEL
    assert "failed" in decision.reason and report.verdict in decision.reason


def test_a_task_calibration_gates_that_task(ledger: QualityLedger, openai_server: Any) -> None:
    judge = _ledger_with_llm_grades(ledger, openai_server, "fair")
    mixed = calibrate(ledger, judge=judge.grader_id, against=["oracle"], task="mixed")
    assert mixed.passed and mixed.task == "mixed"
    # a passing calibration on another task does not vouch for "support"
    assert _decide(ledger, judge.grader_id).model == w.BASELINE_MODEL
    stored = ledger.latest_calibration(judge.grader_id, task="mixed")
    assert stored is not None and stored.task == "mixed" and stored.passed
