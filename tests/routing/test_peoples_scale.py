"""People's scale reads right (issue 34, item 4): a tie is 0.5 there, so the default threshold on
people's target is a win rate, a judge's bias is given only against labels on its own scale, and
a pairwise judge's threshold is explained."""

from __future__ import annotations

from pathlib import Path

from llm_connect.labels import HumanLabel, choose_for_labels
from llm_connect.ledger import QualityLedger
from llm_connect.routing import Router, RoutingPolicy, scale_note
from llm_connect.values import RoutingDecision
from llm_connect.values._policy import DEFAULT_MIN_QUALITY, DEFAULT_WIN_RATE
from tests.cli._util import invoke, pair_suite


def test_the_default_threshold_follows_the_target_unless_stated() -> None:
    assert RoutingPolicy().min_quality == DEFAULT_MIN_QUALITY == 0.9
    people = RoutingPolicy(target="human")
    assert people.min_quality == DEFAULT_WIN_RATE == 0.45 and not people.stated
    assert RoutingPolicy().replace(target="human").min_quality == 0.45
    stated = RoutingPolicy(min_quality=0.8)
    assert stated.stated and stated.replace(target="human").min_quality == 0.8
    # a stored decision's policy keeps the threshold it was made under
    assert RoutingPolicy.from_dict(people.to_dict()) == people


def _ties(tmp_path: Path) -> str:
    """40 cases, the exact judge says 0.9; people call 8 of 10 labelled cases a tie."""
    db = f"sqlite:///{tmp_path / 'l.db'}"
    assert invoke("grade", str(pair_suite(tmp_path / "s.jsonl", 40, same=36)), "--db", db).exit_code == 0
    with QualityLedger(db) as ledger:
        chosen = choose_for_labels(ledger, task="qa", candidate="small", grader_id="exact", rate=0.5, seed=1)
        ledger.record_labels(
            HumanLabel("qa", c, "small", "ana", preference="tie" if i < 8 else "candidate")
            for i, c in enumerate(chosen[:10])
        )
    return db


def test_routing_on_people_states_its_win_rate_and_gives_no_bias_across_scales(tmp_path: Path) -> None:
    db = _ties(tmp_path)
    out = invoke(
        "route", "-t", "qa", "-b", "big", "-c", "small", "-j", "exact", "--target", "human", "--db", db
    )
    assert out.exit_code == 0, out.output
    assert ">= 0.45" in out.stdout and "min_quality 0.9" not in out.stdout
    # exact grades 1.0 for "as good"; people's 0.5 is a tie: their difference is no bias
    assert "judge bias" not in out.stdout and "on another scale than people's" in out.stdout
    assert "calibrate --judge exact --against human" in out.stdout
    assert "agreement with people: Spearman" in out.stdout or "(judge on another scale)" in out.stdout
    with QualityLedger(db) as ledger:
        decision = Router(ledger).evaluate("qa", baseline="big", candidates=["small"], target="human")
    (ev,) = decision.candidates[0].graders
    assert ev.judge_bias is None and ev.human_estimate is not None and decision.min_quality == 0.45


def test_agreement_is_a_rank_correlation_on_the_labelled_cases() -> None:
    import numpy as np

    from llm_connect.routing._human import rank_agreement

    nan = float("nan")
    judge = np.array([0.1, 0.9, 0.5, 0.3, 0.7, 0.2, 0.8])
    assert rank_agreement(judge, np.array([0.0, 1.0, 0.5, 0.0, 1.0, nan, nan])) > 0.8
    assert rank_agreement(judge, np.array([1.0, 0.0, 0.5, 1.0, 0.0, nan, nan])) < -0.8
    assert rank_agreement(judge, np.array([0.5, 0.5, 0.5, 0.5, 0.5, nan, nan])) is None  # no spread
    assert rank_agreement(judge, np.array([0.0, 1.0, nan, nan, nan, nan, nan])) is None  # under 5 labels


def test_a_pairwise_judge_at_the_judges_default_is_explained() -> None:
    decision = RoutingDecision(
        model="big", reason="", task="qa", baseline="big", candidates=(), grader_ids=("pairwise:openai:j:v1",),
        used_grader_ids=("pairwise:openai:j:v1",), ignored_graders=(), min_quality=0.9, confidence=0.95,
        min_samples=30, allow_uncalibrated=False, baseline_mean_cost_usd=None, baseline_mean_latency_ms=None,
    )  # fmt: skip
    note = scale_note(decision)
    assert note is not None and "win rates (a tie is 0.5)" in note and "--min-quality 0.45" in note
    assert scale_note(RoutingDecision.from_dict({**decision.to_dict(), "grader_ids": ["exact"],
                                                  "used_grader_ids": ["exact"]})) is None  # fmt: skip


def test_a_candidate_ruled_out_on_one_judge_shows_that_judges_figures() -> None:
    """Never 'ruled out · 0 cases · -': the row beside the status is the ruling judge's."""
    from llm_connect.values import CandidateEvidence, GraderEvidence

    ruled = GraderEvidence(
        grader_id="a", n=40, mean=0.5, lower_bound=0.3, passed=False, why="", status="ruled out"
    )
    empty = GraderEvidence(
        grader_id="b", n=0, mean=None, lower_bound=None, passed=False, why="", status="no grades"
    )
    cand = CandidateEvidence(model="small", graders=(empty, ruled), passed=False, mean_cost_usd=None,
                             mean_latency_ms=None, cost_ratio=None, latency_ratio=None)  # fmt: skip
    assert cand.status == "ruled out" and (cand.n, cand.mean, cand.lower_bound) == (40, 0.5, 0.3)


def test_the_reports_people_line_uses_peoples_default_on_the_judges_target(tmp_path: Path) -> None:
    """On the judges' target the report still shows what people would say beside each judge: at
    people's default (0.45) when no threshold was stated, not at the judges' 0.9."""
    from llm_connect.report._decide import decide_task

    db = _ties(tmp_path)
    with QualityLedger(db) as ledger:
        found = decide_task(
            ledger, "qa", baseline="big", candidates=["small"], grader_ids=["exact"], policy=RoutingPolicy()
        )
        stated = decide_task(
            ledger, "qa", baseline="big", candidates=["small"], grader_ids=["exact"],
            policy=RoutingPolicy(min_quality=0.9),
        )  # fmt: skip
    (group,) = found.groups
    assert group.people is not None and group.people.status != "ruled out" and "0.45" in group.people.why
    assert stated.groups[0].people is not None and stated.groups[0].people.status == "ruled out"
