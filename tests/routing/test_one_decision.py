"""One decision: every surface asks ``Router`` under one ``RoutingPolicy`` and shows what it says.

A seeded property test builds random ledgers (tasks, candidates, judges, replicated grades,
LLM judges with and without a passing calibration, the label sampler and people's labels)
and random policies, then asks every surface: ``Router.decide`` (stored), ``Router.evaluate``,
``route --json``, the report file's embedded decisions, the ``view`` page, and the settled set
``grade --until-decided`` stops on. Each must show the same decision.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any

import pytest

from llm_connect.cli._run import settled_check
from llm_connect.errors import ConfigurationError
from llm_connect.grading import GradingResult
from llm_connect.labels import HumanLabel, choose_for_labels
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.report import render_report
from llm_connect.report._page import render_view_page
from llm_connect.routing import PolicyError, Router, RoutingDecision, RoutingPolicy
from tests.cli._util import invoke

MakeResult = Callable[..., GradingResult]
LLM = "llm:openai:judge:rubric-v1"
PAIR = "pairwise:openai:judge:pairwise-v1"
"""A preference judge: its grades are win rates (a tie is 0.5), held to 0.45 when no threshold
is stated."""
BASE = "big"


def _fill(ledger: QualityLedger, make_result: MakeResult, rng: random.Random) -> dict[str, list[str]]:
    """Random grades; returns each task's candidates."""
    tasks: dict[str, list[str]] = {}
    for task in rng.sample(["support", "billing", "code"], rng.randint(1, 2)):
        cands = rng.sample(["small", "mid", "tiny"], rng.randint(1, 3))
        tasks[task] = cands
        judges = ["exact"] + ([LLM] if rng.random() < 0.6 else []) + ([PAIR] if rng.random() < 0.5 else [])
        for cand in cands:
            level = rng.choice([0.3, 0.8, 0.93, 0.99])
            n_cases = rng.choice([12, 40, 90])
            cost = rng.choice([None, 0.001, 0.004])
            latency = rng.choice([None, 120.0, 500.0])
            results = []
            for i in range(n_cases):
                for judge in judges:
                    for _ in range(rng.choice([1, 1, 2, 3])):  # replicates of one case
                        score = 1.0 if rng.random() < level else rng.choice([0.0, 0.5])
                        if judge == PAIR:  # a win, a tie or a loss
                            score = rng.choice([0.0, 0.5, 0.5, 1.0] if level > 0.5 else [0.0, 0.0, 0.5])
                        results.append(
                            RecordItem(
                                make_result(
                                    score,
                                    grader_id=judge,
                                    asks_llm=judge in (LLM, PAIR),
                                    baseline_model=BASE,
                                    candidate_model=cand,
                                    candidate_cost=cost,
                                    candidate_latency=latency,
                                    prompt=f"{task} case {i}",
                                    candidate_text=f"answer {i} {rng.random()}",
                                ),
                                task,
                                case_id=f"{task}-{i}",
                            )
                        )
            ledger.record_batch(results)
        if LLM in judges and rng.random() < 0.5:
            ledger.record_calibration(
                judge_grader_id=LLM,
                references=["exact"],
                task=task,
                figures={"spearman": 0.8},
                verdict="agrees",
                passed=rng.random() < 0.7,
            )
        if rng.random() < 0.8:  # the sampler and people
            for cand in cands:
                chosen = choose_for_labels(
                    ledger, task=task, candidate=cand, grader_id="exact", rate=0.5, seed=rng.randint(0, 99)
                )
                labelled = chosen[: rng.randint(len(chosen) // 2, len(chosen))]
                ledger.record_labels(
                    [
                        HumanLabel(
                            task,
                            case_id,
                            cand,
                            "ana",
                            preference=rng.choice(["tie", "baseline", "candidate"]),
                        )
                        for case_id in labelled
                    ]
                )
    return tasks


def _policy(rng: random.Random) -> RoutingPolicy:
    return RoutingPolicy(
        min_quality=rng.choice([None, None, 0.5, 0.7, 0.9]),
        confidence=rng.choice([0.8, 0.95]),
        min_samples=rng.choice([5, 10, 30]),
        target=rng.choice(["judge", "judge", "human"]),
        route_on=rng.choice([("exact",), ("exact", LLM), (LLM,), (PAIR,), ("exact", PAIR)]),
        allow_uncalibrated=rng.random() < 0.4,
        prefer=rng.choice(["cost", "latency"]),
    )


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two decisions as ``to_dict`` gives them agree on everything but when they were made (and
    so which decision began a candidate's streak: the first surface asked stores it, the next
    ones carry it; the streak's model and grade watermark are the same)."""
    for key in ("created_at", "decision_id"):
        a.pop(key, None)
        b.pop(key, None)
    for d in (a, b):
        if d.get("routed_since"):
            d["routed_since"] = {k: d["routed_since"][k] for k in ("model", "after_id")}
    assert a == b


def _embedded(html: str) -> list[dict[str, Any]]:
    """The decisions a report page embeds (``<script type="application/json" id="decisions">``)."""
    found = re.search(r'<script type="application/json" id="decisions">(.*?)</script>', html, re.S)
    assert found is not None
    data: list[dict[str, Any]] = json.loads(found.group(1))
    return data


def _cli_policy(policy: RoutingPolicy) -> list[str]:
    args = ["--min-quality", str(policy.min_quality)] if policy.stated else []
    args += ["--confidence", str(policy.confidence)]
    args += ["--min-samples", str(policy.min_samples), "--target", policy.target, "--prefer", policy.prefer]
    return args + (["--allow-uncalibrated"] if policy.allow_uncalibrated else [])


@pytest.mark.parametrize("seed", range(8))
def test_every_surface_shows_the_same_decision(sqlite_url: str, make_result: MakeResult, seed: int) -> None:
    rng = random.Random(seed)
    with QualityLedger(sqlite_url) as ledger:
        tasks = _fill(ledger, make_result, rng)
        decisions = []
        for task, cands in sorted(tasks.items()):
            # The report and grade narrow route_on to the task's judges; Router takes it as given.
            graded = [t.grader_id for t in ledger.grade_totals(task=task)]
            policy = _policy(rng).for_judges(graded)
            evaluated = Router(ledger).evaluate(task, baseline=BASE, candidates=cands, policy=policy)
            stored = Router(ledger).decide(task, baseline=BASE, candidates=cands, policy=policy)
            assert stored.decision_id is not None and evaluated.decision_id is None
            _same(evaluated.to_dict(), stored.to_dict())
            assert stored.policy == policy

            # The report and the view page decide each task under the same policy (a report
            # given the un-narrowed policy narrows it the same way).
            html = render_report(ledger, tasks=[task], policy=policy)
            (shown,) = _embedded(html)
            _same(shown, evaluated.to_dict())
            page = render_view_page(ledger, policy=policy)
            viewed = _embedded(page)
            _same(next(d for d in viewed if d["task"] == task), evaluated.to_dict())

            # --until-decided stops calling a candidate exactly when the decision settles it.
            settled = settled_check(ledger, [task], BASE, [(c, c) for c in cands], policy)()
            expected = {(task, c.model) for c in evaluated.candidates if c.settled}
            assert settled == (expected if evaluated.used_grader_ids else set())
            decisions.append((task, evaluated))

        # `route --json` (a new process's view of the same ledger) says the same.
        for task, decision in decisions:
            args = ["route", "-t", task, "-b", BASE, "--db", sqlite_url, "--json"]
            args += [a for c in tasks[task] for a in ("-c", c)]
            args += [a for g in decision.policy.route_on for a in ("-j", g)]
            result = invoke(*args, *_cli_policy(decision.policy))
            assert result.exit_code == 0, result.output
            _same(json.loads(result.stdout), decision.to_dict())


def test_the_report_decides_with_the_allowance_the_run_had(sqlite_url: str, make_result: MakeResult) -> None:
    """The issue's case: an uncalibrated LLM judge answering 1.0 on every case, routed with
    allow_uncalibrated: the report says what the router says, not "no routing judge is usable"."""
    with QualityLedger(sqlite_url) as ledger:
        ledger.record_many(
            [
                make_result(1.0, grader_id=LLM, asks_llm=True, baseline_model=BASE, candidate_model="small",
                            prompt=f"case {i}")
                for i in range(60)
            ],
            task="support",
        )  # fmt: skip
        policy = RoutingPolicy(min_quality=0.5, allow_uncalibrated=True)
        decision = Router(ledger).decide("support", baseline=BASE, candidates=["small"], policy=policy)
        html = render_report(ledger, policy=policy)
        strict = render_report(ledger, min_quality=0.5)
    assert decision.model == "small"
    (shown,) = _embedded(html)
    assert shown["model"] == "small" and "no routing judge is usable" not in html
    (kept,) = _embedded(strict)
    assert kept["model"] == BASE and "no routing judge is usable" in strict


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("min_quality", 1.5),
        ("min_quality", float("nan")),
        ("confidence", 1.0),
        ("confidence", 0.0),
        ("min_samples", 0),
        ("min_samples", 2.5),
        ("target", "people"),
        ("min_stability", "DO_NOT_SHIP"),
        ("prefer", "speed"),
        ("route_on", "exact"),
        ("allow_uncalibrated", "yes"),
    ],
)
def test_a_bad_policy_is_refused_when_built_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(PolicyError) as refused:
        RoutingPolicy(**{field: value})
    assert refused.value.field == field and f"RoutingPolicy.{field} " in str(refused.value)
    assert isinstance(refused.value, ConfigurationError)


def test_a_bad_setting_is_refused_before_anything_is_written(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    ledger.record(make_result(1.0), task="support")
    with pytest.raises(PolicyError, match="min_quality"):
        Router(ledger).decide("support", baseline="gpt-4o", candidates=["gpt-4o-mini"], min_quality=2.0)
    assert ledger.decisions() == []


def test_the_policy_round_trips_and_a_stored_decision_keeps_it(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    policy = RoutingPolicy(min_quality=0.8, min_samples=5, route_on=("exact",), prefer="latency")
    assert RoutingPolicy.from_dict(json.loads(json.dumps(policy.to_dict()))) == policy
    with pytest.raises(PolicyError, match="no_such"):
        RoutingPolicy.from_dict({"no_such": 1})
    ledger.record_many([make_result(1.0, prompt=f"c{i}") for i in range(10)], task="support")
    decision = Router(ledger).decide("support", baseline="gpt-4o", candidates=["gpt-4o-mini"], policy=policy)
    (stored,) = ledger.decisions()
    assert stored.policy == policy == decision.policy
    assert RoutingDecision.from_dict(decision.to_dict()).policy == policy
    # an unstated threshold stays unstated: a stored decision's policy holds a preference judge
    # to its own default again
    unstated = policy.replace(min_quality=None)
    again = RoutingDecision.from_dict(
        Router(ledger)
        .decide("support", baseline="gpt-4o", candidates=["gpt-4o-mini"], policy=unstated)
        .to_dict()
    ).policy
    assert not again.stated and again.threshold("pairwise:openai:j:v1") == 0.45


def test_without_judges_named_every_judge_of_the_task_decides(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    ledger.record_many(
        [make_result(1.0, grader_id=g, prompt=f"c{i}") for i in range(60) for g in ("exact", "tools")],
        task="support",
    )
    decision = Router(ledger).evaluate(
        "support", baseline="gpt-4o", candidates=["gpt-4o-mini"], min_quality=0.8
    )
    assert decision.used_grader_ids == ("exact", "tools") and decision.routed
    with pytest.raises(ConfigurationError, match="no judge has graded task 'other'"):
        Router(ledger).evaluate("other", baseline="gpt-4o", candidates=["gpt-4o-mini"])


def test_prefer_latency_routes_to_the_fastest_proven_candidate(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    for model, cost, latency in (("cheap", 0.001, 900.0), ("fast", 0.004, 100.0)):
        ledger.record_many(
            [
                make_result(1.0, candidate_model=model, candidate_cost=cost, candidate_latency=latency,
                            prompt=f"c{i}")
                for i in range(60)
            ],
            task="support",
        )  # fmt: skip
    router = Router(ledger)
    cheap = router.evaluate("support", baseline="gpt-4o", candidates=["cheap", "fast"], min_quality=0.8)
    fast = router.evaluate(
        "support",
        baseline="gpt-4o",
        candidates=["cheap", "fast"],
        policy=RoutingPolicy(min_quality=0.8, prefer="latency"),
    )
    assert cheap.model == "cheap" and "cheapest proven" in cheap.reason
    assert fast.model == "fast" and "fastest proven" in fast.reason and "mean latency" in fast.reason
