"""People's scale reads right (issue 34, item 4): a tie is 0.5 there, so the default threshold on
people's target is a win rate, a judge's bias is given only against labels on its own scale, and
a pairwise judge's threshold is explained."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_connect.labels import HumanLabel, choose_for_labels
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.report import render_report
from llm_connect.routing import Router, RoutingPolicy, decision_sentence, scale_note
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


PAIR = "pairwise:openai:judge:pairwise-v1"


def _wins_and_ties(ledger: QualityLedger, make_result: Callable[..., Any]) -> None:
    """200 cases: the exact judge says "as good" on each; the pairwise judge calls 70% ties and
    30% wins for the candidate (a win rate of 0.65: a candidate no worse than the baseline)."""
    items = []
    for i in range(200):
        for gid, score in (("exact", 1.0), (PAIR, 1.0 if i % 10 < 3 else 0.5)):
            result = make_result(score, grader_id=gid, prompt=f"case {i}", asks_llm=gid == PAIR)
            items.append(RecordItem(result, "qa", case_id=f"c{i}"))
    ledger.record_batch(items)


def test_a_pairwise_judge_is_held_to_a_win_rate_unless_a_threshold_is_stated(
    ledger: QualityLedger, make_result: Callable[..., Any]
) -> None:
    _wins_and_ties(ledger, make_result)
    router = Router(ledger)
    ask = {"baseline": "gpt-4o", "candidates": ["gpt-4o-mini"], "allow_uncalibrated": True}
    # unstated: the exact judge at 0.9, the pairwise judge at 0.45 ("no worse by more than a little")
    d = router.evaluate("qa", **ask)
    assert d.thresholds() == {"exact": 0.9, PAIR: 0.45} and not d.min_quality_stated
    (exact, pair) = d.candidates[0].graders
    assert (exact.min_quality, pair.min_quality) == (0.9, 0.45) and pair.status == "proven"
    assert d.routed and f">= 0.9 (0.45 on {PAIR})" in d.reason
    assert f"proven at 0.9 (0.45 on {PAIR})" in decision_sentence(d)
    note = scale_note(d)
    assert note is not None and "held to 0.45" in note and "the other judges to 0.9" in note
    # a stored decision keeps each judge's threshold
    assert RoutingDecision.from_dict(d.to_dict()).thresholds() == d.thresholds()

    # stated: one threshold for every judge; 0.9 asks the pairwise judge for nine wins in ten
    stated = router.evaluate("qa", **ask, min_quality=0.9)
    pair = stated.candidates[0].graders[1]
    assert pair.min_quality == 0.9 and pair.status == "ruled out" and not stated.routed
    note = scale_note(stated)
    assert note is not None and "--min-quality 0.9 asks the candidate to be preferred 90%" in note
    assert scale_note(router.evaluate("qa", **ask, min_quality=0.45)) is None
    # on people's target every judge is on people's scale already
    assert scale_note(router.evaluate("qa", **ask, target="human")) is None


def test_the_cli_and_report_state_a_pairwise_judges_own_threshold(
    sqlite_url: str, make_result: Callable[..., Any]
) -> None:
    with QualityLedger(sqlite_url) as ledger:
        _wins_and_ties(ledger, make_result)
    base = ["-t", "qa", "-b", "gpt-4o", "-c", "gpt-4o-mini", "--allow-uncalibrated", "--db", sqlite_url]
    out = invoke("route", *base, "-j", "exact", "-j", PAIR)
    assert out.exit_code == 0, out.output
    assert "Routed to gpt-4o-mini" in out.stdout and "held to 0.45" in out.stdout, out.stdout
    summary = invoke("ledger", "summary", "--db", sqlite_url, "--json")
    assert summary.exit_code == 0, summary.output
    rows = {r["grader_id"]: r for r in json.loads(summary.stdout)}
    assert (rows["exact"]["min_quality"], rows[PAIR]["min_quality"]) == (0.9, 0.45)
    with QualityLedger(sqlite_url) as ledger:
        html = render_report(ledger, tasks=["qa"], policy=RoutingPolicy(allow_uncalibrated=True))
    assert f'<span class="own-threshold">0.45 on {PAIR}' in html
    cases = json.loads(
        re.search(r'<script type="application/json" id="case-data">(.*?)</script>', html, re.S)[1]
    )
    rows = cases["rows"] if isinstance(cases, dict) else cases
    # a tie (0.5) is no failure on the pairwise judge's win rate
    assert any(r["judge"] == PAIR and r["score"] == 0.5 and not r["fail"] for r in rows)


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
