"""Calibration against people (issue 22, item 3): ``calibrate(..., against=["human"])``.

The judge is the real pairwise judge behind the tests' loopback OpenAI-compatible
server, scripted per case (:mod:`tests.calibration._people`); the labels are made
here. Every ledger test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

from llm_connect.calibration import HUMAN, CalibrationThresholds, calibrate
from llm_connect.labels import HumanLabel, cohen_kappa_rows
from llm_connect.ledger import QualityLedger
from llm_connect.routing import Router
from llm_connect.routing._calibration_gate import HUMAN as ROUTING_HUMAN
from tests.calibration import _people as p


def _position_world(ledger: QualityLedger, server: Any) -> Any:
    kinds = ["first"] * 6 + ["second"] * 2 + ["quality"] * 12 + ["tie"] * 4
    better = ["candidate"] * 6 + ["baseline"] * 2 + ["candidate"] * 8 + ["baseline"] * 4 + ["tie"] * 4
    cases = p.make_cases(kinds, better)
    server.responder = p.responder
    judge = p.pairwise_judge(server.base_url)
    p.grade(ledger, judge, cases)
    people = {c.case_id: c.better for c in cases}
    people[cases[6 + 2].case_id] = "baseline"  # people disagree with the judge on one case
    p.label(ledger, people)
    return judge


def test_a_judge_whose_verdict_follows_the_order_gives_the_position_figures_computed_by_hand(
    ledger: QualityLedger, openai_server: Any
) -> None:
    judge = _position_world(ledger, openai_server)
    report = calibrate(ledger, judge=judge.grader_id, against=["human"], record=False)
    a = report.human.agreement if report.human else None
    assert a is not None and a.n == 24 and a.annotators == 2

    # By hand. 6 cases always "A" and 2 always "B": the verdict flips with the order (8 inconsistent);
    # 12 judged on quality and 4 ties are consistent.
    assert a.position_consistency is not None
    assert a.position_consistency.value == pytest.approx(16 / 24)
    # Order-verdicts that are not ties: "A" cases 12 of 12 won by the first shown, "B" cases 0 of 4,
    # quality cases one of their two orders each (12 of 24), ties none: 24 of 40.
    assert a.first_shown_rate is not None and a.n_first_shown == 40
    assert a.first_shown_rate.value == pytest.approx(24 / 40)
    # Judge verdicts: tie x8 (flips), candidate x8, baseline x4, tie x4. People: candidate x6 (on
    # the "A" cases), baseline x2, candidate x7 + baseline x1 (the disagreement), baseline x4, tie x4.
    assert a.agreement.value == pytest.approx(15 / 24)
    assert a.n_non_tie == 12 and a.agreement_non_tie.value == pytest.approx(11 / 12)
    p_o = Fraction(15, 24)
    p_e = Fraction(8 * 13 + 4 * 7 + 12 * 4, 24 * 24)
    assert a.cohen_kappa.value == pytest.approx(float((p_o - p_e) / (1 - p_e)))
    assert a.confusion == ((7, 1, 0), (0, 4, 0), (6, 2, 4))
    for est in (a.agreement, a.agreement_non_tie, a.cohen_kappa, a.position_consistency, a.first_shown_rate):
        assert est.value is not None and est.ci_low is not None and est.ci_high is not None
        assert est.ci_low <= est.value <= est.ci_high

    data = report.to_dict()
    json.dumps(data, allow_nan=False)
    entry = data["references"][-1]
    assert entry["reference"] == "human" and entry["status"] == "pass"  # kappa 0.45, 11/12 without ties
    for key in ("agreement", "agreement_non_tie", "cohen_kappa", "position_consistency", "first_shown_rate"):
        assert entry[key]["value"] == pytest.approx(getattr(a, key).value)
    assert entry["length_preference"]["status"] == "ok"


def test_bootstrap_intervals_are_seeded_and_reproducible(ledger: QualityLedger, openai_server: Any) -> None:
    judge = _position_world(ledger, openai_server)
    first = calibrate(ledger, judge=judge.grader_id, against=["human"], record=False, seed=7)
    again = calibrate(ledger, judge=judge.grader_id, against=["human"], record=False, seed=7)
    other = calibrate(ledger, judge=judge.grader_id, against=["human"], record=False, seed=8)
    assert first.to_dict() == again.to_dict()
    h1, h3 = first.to_dict()["references"][-1], other.to_dict()["references"][-1]
    assert h1["agreement"]["value"] == h3["agreement"]["value"]
    keys = ("agreement", "cohen_kappa", "position_consistency", "first_shown_rate")
    assert any(h1[k]["ci_low"] != h3[k]["ci_low"] or h1[k]["ci_high"] != h3[k]["ci_high"] for k in keys)


def test_a_judge_that_always_picks_the_longer_answer_is_flagged_on_length(
    ledger: QualityLedger, openai_server: Any
) -> None:
    n = 30
    better = ["baseline" if i % 3 == 0 else "candidate" for i in range(n)]
    cases = p.make_cases(["longer"] * n, better)  # the candidate's answer is longer in even cases
    openai_server.responder = p.responder
    judge = p.pairwise_judge(openai_server.base_url)
    p.grade(ledger, judge, cases)
    p.grade_truth(ledger, cases)
    p.label(ledger, {c.case_id: c.better for c in cases})

    report = calibrate(ledger, judge=judge.grader_id, against=["human"], record=False)
    assert report.human is not None
    length = report.human.agreement.length_preference
    # By hand: the judge picks the longer answer in all 30 cases; people pick the better one,
    # which is the longer one where (even and not a multiple of 3) or (odd and a multiple of 3).
    people_longer = sum((i % 2 == 0) == (i % 3 != 0) for i in range(n))
    assert length.n_judge == n and length.n_human == n
    assert length.judge_rate.value == 1.0
    assert length.human_rate.value == pytest.approx(people_longer / n)
    assert length.difference.value == pytest.approx(1.0 - people_longer / n)
    assert length.flagged and (length.difference.value or 0.0) > 0.10
    assert not report.passed and "longer answer" in report.verdict
    position = report.human.agreement.position_consistency
    assert position is not None and position.value == 1.0  # length bias, not order bias

    # Any judge, LLM or not: the truth reference agrees with people, lengths from the stored texts.
    truth = calibrate(ledger, judge=p.TRUTH_ID, against=["human"], record=False)
    assert truth.human is not None and truth.passed, truth.verdict
    tl = truth.human.agreement.length_preference
    assert tl.judge_rate.value == tl.human_rate.value and not tl.flagged
    assert truth.human.agreement.position_consistency is None  # not a pairwise judge
    assert truth.human.agreement.agreement.value == 1.0


def _routing_world(ledger: QualityLedger, server: Any) -> tuple[Any, list[p.PeopleCase]]:
    better = ["baseline" if i % 7 == 3 else "candidate" for i in range(70)]
    cases = p.make_cases(["quality"] * 70, better, start=500)
    server.responder = p.responder
    judge = p.pairwise_judge(server.base_url)
    p.grade(ledger, judge, cases)
    p.grade_truth(ledger, cases)
    return judge, cases


def _decide(ledger: QualityLedger, grader_id: str, **kwargs: Any) -> Any:
    return Router(ledger).decide(
        p.TASK, baseline=p.BASELINE, candidates=[p.CANDIDATE], grader_id=grader_id, min_quality=0.5,
        min_samples=30, **kwargs,
    )  # fmt: skip


def test_a_judge_that_fails_against_people_does_not_route_whatever_the_other_references_say(
    ledger: QualityLedger, openai_server: Any
) -> None:
    judge, cases = _routing_world(ledger, openai_server)
    assert _decide(ledger, judge.grader_id, allow_uncalibrated=True).model == p.CANDIDATE
    flipped = {"candidate": "baseline", "baseline": "candidate", "tie": "tie"}
    p.label(ledger, {c.case_id: flipped[c.better] for c in cases[:40]})

    both = calibrate(ledger, judge=judge.grader_id, against=[p.TRUTH_ID, "human"])
    assert both.reference(p.TRUTH_ID).status == "pass"
    assert both.human is not None and both.human.status == "fail"
    assert not both.passed and both.verdict.startswith("fail: human:")
    assert any("without them the verdict would be: pass" in note for note in both.notes)
    stored = ledger.latest_calibration(judge.grader_id, task=p.TASK)
    assert stored is not None and stored.references == (p.TRUTH_ID, HUMAN) and not stored.passed
    refused = _decide(ledger, judge.grader_id)
    assert refused.model == p.BASELINE and both.verdict in refused.reason

    # a newer calibration against the non-LLM reference alone passes, but people still decide
    alone = calibrate(ledger, judge=judge.grader_id, against=[p.TRUTH_ID])
    assert alone.passed
    still = _decide(ledger, judge.grader_id)
    assert still.model == p.BASELINE and both.verdict in still.reason

    # people who agree with the judge let it route
    p.label(ledger, {c.case_id: c.better for c in cases[:40]}, replace=True)
    agreed = calibrate(ledger, judge=judge.grader_id, against=["human"])
    assert agreed.passed, agreed.verdict
    assert _decide(ledger, judge.grader_id).model == p.CANDIDATE
    assert HUMAN == ROUTING_HUMAN == "human"


def test_too_few_labels_decide_nothing(ledger: QualityLedger, openai_server: Any) -> None:
    judge, cases = _routing_world(ledger, openai_server)
    p.label(ledger, {c.case_id: "tie" for c in cases[:12]})  # far from the judge, but only 12 cases
    few = calibrate(ledger, judge=judge.grader_id, against=[p.TRUTH_ID, "human"])
    assert few.human is not None and few.human.status == "insufficient data"
    assert few.human.agreement.agreement.value is not None  # 12 >= min_pairs: figures, no verdict
    assert few.verdict.startswith("insufficient data: human: n=12") and not few.passed
    relaxed = calibrate(
        ledger, judge=judge.grader_id, against=[p.TRUTH_ID, "human"],
        thresholds=CalibrationThresholds(require_all_references=False), record=False,
    )  # fmt: skip
    assert relaxed.passed  # one passing reference is enough when told so
    assert calibrate(ledger, judge=judge.grader_id, against=[p.TRUTH_ID]).passed
    assert _decide(ledger, judge.grader_id).model == p.CANDIDATE  # no verdict from people: the latest decides
    tiny = calibrate(ledger, judge=judge.grader_id, against=["human"], min_pairs=20, record=False)
    assert tiny.human is not None and tiny.human.agreement.agreement.value is None
    assert "insufficient data" in (tiny.human.agreement.agreement.reason or "")


def test_scored_labels_give_the_correlations_mad_and_kappa_of_the_other_references(
    ledger: QualityLedger, openai_server: Any
) -> None:
    _, cases = _routing_world(ledger, openai_server)
    rng = np.random.default_rng(3)
    people = {c.case_id: float(np.round(rng.uniform(0.0, 1.0), 2)) for c in cases[:30]}
    ledger.record_labels(
        [HumanLabel(p.TASK, cid, p.CANDIDATE, "ana", score=s) for cid, s in people.items()]
        + [HumanLabel(p.TASK, cid, p.CANDIDATE, "bo", score=min(1.0, s + 0.1)) for cid, s in people.items()]
    )
    report = calibrate(ledger, judge=p.TRUTH_ID, against=["human"], record=False)
    assert report.human is not None
    scores = report.human.agreement.scores
    assert scores is not None and scores.n == 30
    order = sorted(people)  # the figures sort cases by (task, candidate, case id)
    by_id = {c.case_id: c for c in cases}
    x = np.array([{"candidate": 1.0, "baseline": 0.0, "tie": 0.5}[by_id[cid].better] for cid in order])
    y = np.array([(people[cid] + min(1.0, people[cid] + 0.1)) / 2 for cid in order])
    assert scores.spearman.value == pytest.approx(stats.spearmanr(x, y).statistic)
    assert scores.kendall_tau.value == pytest.approx(stats.kendalltau(x, y).statistic)
    assert scores.mean_abs_diff.value == pytest.approx(float(np.mean(np.abs(x - y))))
    assert scores.confusion is not None and scores.confusion.threshold == 0.5
    assert scores.spearman.ci_low is not None and scores.kendall_tau.ci_high is not None
    # verdicts from the scores split at 0.5 (the mean of two labels' verdicts by majority)
    assert report.human.agreement.n == 30


def test_vectorised_kappa_equals_cohens_kappa_on_every_resample() -> None:
    rng = np.random.default_rng(11)
    judge = rng.integers(0, 3, size=40)
    people = np.where(rng.uniform(size=40) < 0.6, judge, rng.integers(0, 3, size=40))
    idx = rng.integers(0, 40, size=(200, 40))
    rows = cohen_kappa_rows(judge[idx], people[idx], 3)
    for b in range(200):
        a, p = judge[idx[b]], people[idx[b]]
        p_o = float(np.mean(a == p))
        p_e = sum(float(np.mean(a == c)) * float(np.mean(p == c)) for c in range(3))
        assert rows[b] == pytest.approx((p_o - p_e) / (1 - p_e))
    same = np.zeros((1, 5), dtype=np.intp)
    assert np.isnan(cohen_kappa_rows(same, same, 3)[0])  # one class on both sides: undefined


def test_the_command_calibrates_against_people_from_stored_grades(
    ledger_url: str, openai_server: Any
) -> None:
    from typer.testing import CliRunner

    from llm_connect.cli import app

    with QualityLedger(ledger_url) as ledger:
        judge = _position_world(ledger, openai_server)
    before = len(openai_server.requests_to("/chat/completions"))
    base = ["calibrate", "--db", ledger_url, "--base-url", openai_server.base_url, "--api-key", "sk-test-x"]
    result = CliRunner().invoke(app, [*base, "--judge", judge.grader_id, "--against", "human", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    human = out["references"][-1]
    assert human["reference"] == "human" and human["status"] == "pass" and out["verdict"] == "pass"
    assert human["position_consistency"]["value"] == pytest.approx(16 / 24)
    assert human["first_shown_rate"]["value"] == pytest.approx(0.6)
    assert out["grading"]["graded"] == {judge.grader_id: 0}  # every case graded before: no judge call
    assert len(openai_server.requests_to("/chat/completions")) == before

    strict = CliRunner().invoke(
        app,
        [*base, "--judge", judge.grader_id, "--against", "human", "--no-grade", "--min-human-kappa", "0.6"],
    )
    assert strict.exit_code == 1, strict.output
    text = strict.stdout
    assert "Against people (human labels)" in text and "position consistency" in text
    assert "answer shown first wins" in text and "0.60 [" in text
    assert "human: kappa 0.455 < 0.6" in text and "verdict: fail: human: kappa" in text
    with QualityLedger(ledger_url) as ledger:
        stored = [c for c in ledger.calibrations(judge.grader_id)]
    assert [c.passed for c in stored] == [True, False]
    assert all(c.references == (HUMAN,) for c in stored)
