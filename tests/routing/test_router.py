"""Router.decide: cheapest candidate with a proven lower confidence bound, else the baseline (both backends)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from llm_connect.errors import ConfigurationError
from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger
from llm_connect.routing import Router, RoutingDecision

MakeResult = Callable[..., GradingResult]
LLM = "llm:openai:gpt-4o-mini:rubric-v1"


def _grades(
    ledger: QualityLedger,
    make_result: MakeResult,
    model: str,
    scores: list[float],
    *,
    task: str = "support",
    grader_id: str = "exact",
    cost: float | None = 0.001,
    latency: float | None = 300.0,
    baseline: str = "gpt-4o",
    asks_llm: bool | None = None,
) -> None:
    ledger.record_many(
        [
            make_result(
                s,
                candidate_model=model,
                grader_id=grader_id,
                asks_llm=asks_llm if asks_llm is not None else grader_id.startswith("llm:"),
                candidate_cost=cost,
                candidate_latency=latency,
                baseline_model=baseline,
                prompt=f"case {i}",
            )
            for i, s in enumerate(scores)
        ],
        task=task,
    )


def _good(n: int = 120) -> list[float]:
    return [0.97, 0.99, 1.0, 0.98] * (n // 4)


def test_routes_to_a_cheaper_candidate_with_proven_quality(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    _grades(ledger, make_result, "gpt-4o-mini", _good())
    decision = Router(ledger).decide(
        "support", baseline="gpt-4o", candidates=["gpt-4o-mini"], grader_id="exact"
    )
    assert decision.model == "gpt-4o-mini" and decision.routed
    ev = decision.evidence_for("gpt-4o-mini")
    assert ev.passed and ev.n == 120 and ev.mean == pytest.approx(0.985)
    assert ev.lower_bound is not None and 0.9 <= ev.lower_bound < 0.985
    assert ev.cost_ratio == pytest.approx(0.1) and ev.latency_ratio == pytest.approx(300 / 800)
    assert decision.baseline_mean_cost_usd == pytest.approx(0.01)
    assert "Routed to gpt-4o-mini" in decision.reason and "lower bound" in decision.reason
    assert "0.10x" in decision.reason


def test_every_decision_is_stored_for_audit(ledger: QualityLedger, make_result: MakeResult) -> None:
    _grades(ledger, make_result, "gpt-4o-mini", _good())
    router = Router(ledger)
    first = router.decide("support", baseline="gpt-4o", candidates=["gpt-4o-mini"], grader_id="exact")
    second = router.decide(
        "support", baseline="gpt-4o", candidates=["gpt-4o-mini"], grader_id="exact", min_quality=0.999
    )
    stored = ledger.decisions()
    assert [d.decision_id for d in stored] == [first.decision_id, second.decision_id]
    assert stored[0] == first and stored[1] == second
    assert [d.model for d in ledger.decisions(task="support")] == ["gpt-4o-mini", "gpt-4o"]
    assert ledger.decisions(task="other") == []
    assert RoutingDecision.from_dict(first.to_dict(), decision_id=first.decision_id) == first


def test_too_few_grades_keep_the_baseline(ledger: QualityLedger, make_result: MakeResult) -> None:
    _grades(ledger, make_result, "gpt-4o-mini", [1.0] * 29)
    decision = Router(ledger).decide(
        "support", baseline="gpt-4o", candidates=["gpt-4o-mini"], grader_id="exact"
    )
    assert decision.model == "gpt-4o" and not decision.routed
    assert "insufficient evidence (29 of 30 cases)" in decision.reason
    assert decision.evidence_for("gpt-4o-mini").graders[0].status == "insufficient"


def test_a_high_mean_with_a_low_lower_bound_is_not_enough(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    # mean 0.92 but spread out: the 95% lower bound falls under 0.9
    _grades(ledger, make_result, "gpt-4o-mini", [1.0, 0.84] * 15 + [0.92] * 2)
    decision = Router(ledger).decide(
        "support", baseline="gpt-4o", candidates=["gpt-4o-mini"], grader_id="exact"
    )
    ev = decision.evidence_for("gpt-4o-mini")
    assert ev.mean is not None and ev.mean > 0.9
    assert ev.lower_bound is not None and ev.lower_bound < 0.9
    assert decision.model == "gpt-4o" and "lower bound" in decision.reason


def test_cheapest_qualifying_candidate_wins(ledger: QualityLedger, make_result: MakeResult) -> None:
    _grades(ledger, make_result, "mid", _good(), cost=0.004)
    _grades(ledger, make_result, "cheap", _good(), cost=0.002)
    _grades(ledger, make_result, "cheapest-but-bad", [0.5] * 40, cost=0.0001)
    _grades(ledger, make_result, "unknown-cost", _good(), cost=None)
    decision = Router(ledger).decide(
        "support",
        baseline="gpt-4o",
        candidates=["unknown-cost", "mid", "cheapest-but-bad", "cheap"],
        grader_id="exact",
    )
    assert decision.model == "cheap"
    assert [c.model for c in decision.candidates] == ["unknown-cost", "mid", "cheapest-but-bad", "cheap"]
    assert "Also qualified: unknown-cost, mid" in decision.reason
    assert decision.evidence_for("unknown-cost").cost_ratio is None


def test_unknown_costs_follow_the_order_given(ledger: QualityLedger, make_result: MakeResult) -> None:
    _grades(ledger, make_result, "a", _good(), cost=None)
    _grades(ledger, make_result, "b", _good(), cost=None)
    router = Router(ledger)
    assert router.decide("support", baseline="gpt-4o", candidates=["b", "a"], grader_id="exact").model == "b"
    assert router.decide("support", baseline="gpt-4o", candidates=["a", "b"], grader_id="exact").model == "a"


def test_with_several_graders_a_candidate_must_pass_each(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    _grades(ledger, make_result, "m", _good(), grader_id="exact")
    _grades(ledger, make_result, "m", [0.6] * 40, grader_id="embedding")
    router = Router(ledger)
    decision = router.decide("support", baseline="gpt-4o", candidates=["m"], grader_id=["exact", "embedding"])
    assert decision.model == "gpt-4o"
    assert [g.passed for g in decision.evidence_for("m").graders] == [True, False]
    assert "embedding: ruled out" in decision.reason
    assert decision.evidence_for("m").status == "ruled out"
    assert router.decide("support", baseline="gpt-4o", candidates=["m"], grader_id="exact").model == "m"


def test_grades_of_other_tasks_and_baselines_do_not_count(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    _grades(ledger, make_result, "m", _good(), task="other")
    _grades(ledger, make_result, "m", _good(), baseline="claude")
    decision = Router(ledger).decide("support", baseline="gpt-4o", candidates=["m"], grader_id="exact")
    assert decision.model == "gpt-4o" and decision.evidence_for("m").n == 0


def test_uncalibrated_llm_judge_is_ignored_and_the_reason_says_so(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    _grades(ledger, make_result, "m", _good(), grader_id=LLM)
    decision = Router(ledger).decide("support", baseline="gpt-4o", candidates=["m"], grader_id=LLM)
    assert decision.model == "gpt-4o"
    assert decision.used_grader_ids == () and decision.ignored_graders[0].grader_id == LLM
    assert "no stored calibration" in decision.reason and "llm-connect calibrate" in decision.reason
    overridden = Router(ledger).decide(
        "support", baseline="gpt-4o", candidates=["m"], grader_id=LLM, allow_uncalibrated=True
    )
    assert overridden.model == "m"


def test_uncalibrated_llm_judge_falls_back_to_the_other_graders(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    _grades(ledger, make_result, "m", _good(), grader_id="exact")
    _grades(ledger, make_result, "m", [0.1] * 40, grader_id=LLM)
    decision = Router(ledger).decide("support", baseline="gpt-4o", candidates=["m"], grader_id=["exact", LLM])
    assert decision.model == "m" and decision.used_grader_ids == ("exact",)
    assert f"Ignored {LLM}" in decision.reason


def test_a_passing_calibration_lets_the_llm_judge_count(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    _grades(ledger, make_result, "m", _good(), grader_id=LLM)
    router = Router(ledger)
    ledger.record_calibration(
        judge_grader_id=LLM,
        references=["embedding"],
        task=None,
        figures={"spearman": 0.2},
        verdict="spearman 0.20 < 0.5",
        passed=False,
    )
    failed = router.decide("support", baseline="gpt-4o", candidates=["m"], grader_id=LLM)
    assert failed.model == "gpt-4o" and "failed: spearman 0.20 < 0.5" in failed.reason
    ledger.record_calibration(
        judge_grader_id=LLM,
        references=["embedding"],
        task=None,
        figures={"spearman": 0.8},
        verdict="agrees",
        passed=True,
    )
    assert router.decide("support", baseline="gpt-4o", candidates=["m"], grader_id=LLM).model == "m"
    # A calibration for this very task takes precedence over the task-less one.
    ledger.record_calibration(
        judge_grader_id=LLM,
        references=["embedding"],
        task="support",
        figures={"spearman": 0.1},
        verdict="disagrees on support",
        passed=False,
    )
    assert router.decide("support", baseline="gpt-4o", candidates=["m"], grader_id=LLM).model == "gpt-4o"


def test_no_candidates_keeps_the_baseline(ledger: QualityLedger) -> None:
    decision = Router(ledger).decide("support", baseline="gpt-4o", candidates=[], grader_id="exact")
    assert decision.model == "gpt-4o" and "no candidates" in decision.reason


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_quality": 1.5}, "min_quality"),
        ({"confidence": 1.0}, "confidence"),
        ({"min_samples": 1}, "min_samples"),
        ({"grader_id": []}, "grader_id"),
        ({"candidates": "gpt-4o-mini"}, "candidates"),
    ],
)
def test_invalid_arguments_are_configuration_errors(ledger: QualityLedger, kwargs: dict, match: str) -> None:
    args = {"baseline": "gpt-4o", "candidates": ["m"], "grader_id": "exact", **kwargs}
    with pytest.raises(ConfigurationError, match=match):
        Router(ledger).decide("support", **args)
    assert ledger.decisions() == []


def test_the_gate_follows_what_the_judge_declared_not_its_name(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    # A plugin judge that asks an LLM under a name without "llm:" is gated...
    _grades(ledger, make_result, "m", _good(), grader_id="acme-grader", asks_llm=True)
    gated = Router(ledger).decide("support", baseline="gpt-4o", candidates=["m"], grader_id="acme-grader")
    assert gated.model == "gpt-4o" and gated.ignored_graders[0].grader_id == "acme-grader"
    assert "no stored calibration" in gated.reason
    # ...and a judge whose grades say it asks no LLM is used whatever its name.
    _grades(ledger, make_result, "m", _good(), grader_id="llm-free:rules", asks_llm=False)
    used = Router(ledger).decide("support", baseline="gpt-4o", candidates=["m"], grader_id="llm-free:rules")
    assert used.model == "m" and used.used_grader_ids == ("llm-free:rules",)
