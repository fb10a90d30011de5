"""The decision sentence's "about N more cases" is the deciding judge's own figure (issue 34, item 5)."""

from __future__ import annotations

from typing import Any

from llm_connect.routing import CandidateEvidence, GraderEvidence, RoutingDecision, decision_sentence
from llm_connect.routing._gate import deciding_judge, more_cases


def _judge(grader_id: str, mean: float, n: int, needed: int | None, **human: Any) -> GraderEvidence:
    status = "undecided"
    return GraderEvidence(
        grader_id=grader_id, n=n, mean=mean, lower_bound=mean - 0.2, passed=False, why="",
        upper_bound=min(1.0, mean + 0.2), status=status, cases_needed=needed, **human,
    )  # fmt: skip


def _decision(*graders: GraderEvidence, target: str = "judge") -> RoutingDecision:
    candidate = CandidateEvidence(
        model="llama", graders=graders, passed=False, mean_cost_usd=None, mean_latency_ms=None,
        cost_ratio=None, latency_ratio=None,
    )  # fmt: skip
    ids = tuple(g.grader_id for g in graders)
    return RoutingDecision(
        model="gpt-4o", reason="", task="t", baseline="gpt-4o", candidates=(candidate,), grader_ids=ids,
        used_grader_ids=ids, ignored_graders=(), min_quality=0.9, confidence=0.95, min_samples=30,
        allow_uncalibrated=False, baseline_mean_cost_usd=None, baseline_mean_latency_ms=None, target=target,
    )  # fmt: skip


def test_a_rule_out_settles_first_and_is_named() -> None:
    low, near = _judge("a", 0.6, 30, 39), _judge("b", 0.93, 30, 2206)
    d = _decision(near, low)
    assert deciding_judge(d.candidates[0], 0.9) == (low, "ruled out")
    assert decision_sentence(d).endswith("llama needs about 9 more cases (likely to be ruled out).")
    # of several judges projected to rule it out, the first to do so
    assert decision_sentence(_decision(_judge("c", 0.7, 30, 80), low, near)).endswith(
        "about 9 more cases (likely to be ruled out)."
    )
    # a judge too close to call does not hide a rule-out another judge projects
    assert decision_sentence(_decision(_judge("c", 0.9, 30, None), low)).endswith(
        "about 9 more cases (likely to be ruled out)."
    )


def test_proof_takes_every_judge_so_the_slowest_counts() -> None:
    d = _decision(_judge("a", 0.99, 30, 34), _judge("b", 0.95, 30, 120))
    assert decision_sentence(d).endswith("llama needs about 90 more cases.")
    assert decision_sentence(_decision(_judge("a", 0.99, 30, 34), _judge("b", 0.9, 30, None))).endswith(
        "llama is too close to call."
    )


def test_routing_on_people_the_labels_are_the_deciding_judges_too() -> None:
    def people(grader_id: str, mean: float, labels: int, cases: int) -> GraderEvidence:
        return _judge(grader_id, mean, 40, 40 + cases, target="human", more_labels=labels, more_cases=cases)

    low, near = people("a", 0.7, 5, 12), people("b", 0.95, 300, 900)
    d = _decision(near, low, target="human")
    g, outcome = deciding_judge(d.candidates[0], 0.9) or (None, None)
    assert (g, outcome, more_cases(low)) == (low, "ruled out", 12)
    assert decision_sentence(d).endswith(
        "llama needs about 5 more labels (and 12 more cases) (likely to be ruled out)."
    )
    up = _decision(people("a", 0.97, 5, 12), near, target="human")
    assert decision_sentence(up).endswith("llama needs about 300 more labels (and 900 more cases).")
