"""Routing on what people would say, through the real Router, sampler and ledger, on SQLite and
PostgreSQL (contracts/routing.md, H10-H16).

Seeded simulations: each run is a task of its own in one ledger; after every batch of 10 cases
the grades are written, the sampler decides the new cases (``choose_for_labels``), the chosen
cases get their label at once, and the Router decides. Seeded, so every count below is the same
on every run of the suite; the margins are those of ``scripts/bench/ppi_sim.py``'s 1,000-run
figures (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from llm_connect.grading import GradingResult
from llm_connect.labels import HumanLabel, choose_for_labels
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.routing import Router, RoutingDecision, decision_sentence
from llm_connect.values._decision import HUMAN_FIELDS, NO_HUMAN_LABELS

GRADER = "sim-judge"
BASE, CAND = "big", "small"


@dataclass
class Run:
    """One simulated run: the per-case human values and judge grades, and what happened."""

    task: str
    human: np.ndarray
    judge: np.ndarray
    routed_judge: int | None = None
    routed_human: int | None = None
    labels_at_proof: int | None = None
    last: dict[str, RoutingDecision] = field(default_factory=dict)


def simulate(
    ledger: QualityLedger,
    make_result: Callable[..., GradingResult],
    runs: list[Run],
    *,
    rate: float,
    strategy: str = "uniform",
    min_quality: float,
    targets: tuple[str, ...] = ("judge", "human"),
    stop_when_proven: bool = False,
) -> None:
    """Every run, batch by batch of 10 cases, with a decision per target after each batch."""
    router = Router(ledger)
    n = runs[0].human.size
    for start in range(0, n, 10):
        live = [r for r in runs if not (stop_when_proven and r.routed_human is not None)]
        if not live:
            return
        ledger.record_batch(
            [
                RecordItem(
                    make_result(
                        float(r.judge[i]), candidate_model=CAND, baseline_model=BASE, grader_id=GRADER
                    ),
                    r.task,
                    f"run-{r.task}",
                    f"c{i:04d}",
                )
                for r in live
                for i in range(start, start + 10)
            ]
        )
        labels = []
        for k, r in enumerate(live):
            queue = choose_for_labels(
                ledger, task=r.task, candidate=CAND, grader_id=GRADER, rate=rate, strategy=strategy, seed=k
            )
            labels += [HumanLabel(r.task, c, CAND, "ana", score=float(r.human[int(c[1:])])) for c in queue]
        if labels:
            ledger.record_labels(labels)
        for r in live:
            for target in targets:
                if target == "judge" and r.routed_judge is not None:
                    continue
                d = router.decide(
                    r.task, baseline=BASE, candidates=[CAND], grader_id=GRADER, min_quality=min_quality,
                    target=target,
                )  # fmt: skip
                r.last[target] = d
                if d.routed and target == "judge":
                    r.routed_judge = start + 10
                elif d.routed and r.routed_human is None:
                    r.routed_human = start + 10
                    g = d.candidates[0].graders[0]
                    r.labels_at_proof = g.labels_used


def _runs(
    count: int, n: int, make: Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]]
) -> list[Run]:
    out = []
    for seed in range(count):
        human, judge = make(np.random.default_rng(seed))
        out.append(Run(f"t{seed:02d}", np.round(human, 6), np.round(judge, 6)))
    return out


def _biased(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    human = np.clip(rng.normal(0.85, 0.05, 130), 0.0, 1.0)
    return human, np.clip(human + 0.1, 0.0, 1.0)


@pytest.mark.parametrize("strategy", ["uniform", "active"])
def test_a_judge_above_people_routes_on_the_judge_but_not_on_people(
    ledger: QualityLedger, make_result: Callable[..., GradingResult], strategy: str
) -> None:
    """H10: human mean 0.85 < 0.9, the judge 0.1 above; decide after every batch of 10."""
    count = 30 if strategy == "uniform" else 20
    runs = _runs(count, 130, _biased)
    simulate(ledger, make_result, runs, rate=0.2, strategy=strategy, min_quality=0.9)
    judge_routed = sum(r.routed_judge is not None for r in runs)
    human_routed = sum(r.routed_human is not None for r in runs)
    assert judge_routed >= count - count // 10, judge_routed  # nearly always (every run here)
    assert human_routed <= count // 10, human_routed  # nominal 5%; 0 of 1,000 in ppi_sim.py
    ev = runs[0].last["human"].candidates[0].graders[0]
    assert ev.target == "human" and ev.status != "proven"
    assert ev.judge_mean is not None and ev.human_estimate is not None
    assert ev.judge_mean - ev.human_estimate > 0.05 and ev.judge_bias is not None and ev.judge_bias > 0.05


def test_a_judge_without_bias_decides_as_the_judge_does(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    """H11: the judge grades as people do: same final decision, estimate = judge mean within noise."""

    def good(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        human = np.clip(rng.normal(0.97, 0.03, 150), 0.0, 1.0)
        return human, human

    def poor(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        human = np.clip(rng.normal(0.6, 0.05, 150), 0.0, 1.0)
        return human, human

    runs = _runs(6, 150, good) + [Run(f"p{r.task}", r.human, r.judge) for r in _runs(6, 150, poor)]
    simulate(ledger, make_result, runs, rate=0.3, min_quality=0.8)
    for r in runs:
        judge, human = r.last["judge"], r.last["human"]
        assert judge.routed == human.routed == r.task.startswith("t"), r.task
        ev = human.candidates[0].graders[0]
        assert ev.human_estimate == pytest.approx(ev.judge_mean, abs=0.03)  # the labels' noise
        assert ev.judge_bias == pytest.approx(0.0, abs=1e-9)


def test_a_judge_with_no_signal_needs_about_as_many_labels_as_people_alone(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    """H12: grades unrelated to people's values save no labels, and cost not many more."""

    def noise(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return (rng.random(400) < 0.93).astype(float), rng.random(400)

    alone = _runs(6, 400, noise)
    judged = [Run(f"j{r.task}", r.human, r.judge) for r in alone]
    simulate(
        ledger, make_result, alone, rate=1.0, min_quality=0.75, targets=("human",), stop_when_proven=True
    )
    simulate(
        ledger, make_result, judged, rate=0.3, min_quality=0.75, targets=("human",), stop_when_proven=True
    )
    people = [r.labels_at_proof for r in alone]
    both = [r.labels_at_proof for r in judged]
    assert sum(v is None for v in people + both) <= 1, (people, both)  # None: not proven in 400 cases
    ratio = float(
        np.median([np.inf if v is None else v for v in both])
        / np.median([np.inf if v is None else v for v in people])
    )
    assert 0.5 <= ratio <= 2.0, (people, both, ratio)


def test_no_labels_is_a_verdict_and_labels_the_sampler_did_not_choose_are_left_out(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    """H13, H14: "no human labels yet" is a status with its sentence, not an error; a label of a
    case the sampler did not choose never enters the bound and the evidence counts it."""
    runs = _runs(1, 40, _biased)
    simulate(ledger, make_result, runs, rate=0.2, min_quality=0.9, targets=())
    task = runs[0].task
    router = Router(ledger)
    ledger.engine.dispose()
    # Labels removed: every chosen case pending.
    with ledger.engine.begin() as conn:
        from sqlalchemy import text

        conn.execute(text("DELETE FROM human_labels"))
        unchosen = (
            conn.execute(
                text("SELECT case_id FROM label_sampling WHERE task = :t AND NOT chosen ORDER BY position"),
                {"t": task},
            )
            .scalars()
            .first()
        )
        first_chosen = (
            conn.execute(
                text("SELECT position FROM label_sampling WHERE task = :t AND chosen ORDER BY position"),
                {"t": task},
            )
            .scalars()
            .first()
        )
    d = router.decide(
        task, baseline=BASE, candidates=[CAND], grader_id=GRADER, min_quality=0.9, target="human"
    )
    ev = d.candidates[0].graders[0]
    assert (d.routed, ev.status, ev.labels_used, ev.mean) == (False, NO_HUMAN_LABELS, 0, None)
    assert ev.labels_pending and ev.labels_pending > 0 and ev.cases_used == first_chosen
    assert f"has no human labels yet (llm-connect labels queue -t {task} -c {CAND})" in decision_sentence(d)
    # A label on a case the sampler did not choose: stored (agreement may use it), left out here.
    ledger.record_labels([HumanLabel(task, unchosen, CAND, "bo", preference="candidate")])
    d = router.decide(
        task, baseline=BASE, candidates=[CAND], grader_id=GRADER, min_quality=0.9, target="human"
    )
    ev = d.candidates[0].graders[0]
    assert (ev.labels_used, ev.labels_left_out) == (0, 1)
    assert "1 label of cases the sampler did not choose left out" in ev.why
    # Graded cases the sampler has not seen wait for it.
    ledger.record_batch(
        [
            RecordItem(
                make_result(0.9, candidate_model=CAND, baseline_model=BASE, grader_id=GRADER),
                task,
                "run",
                "new",
            )
        ]
    )
    d = router.decide(
        task, baseline=BASE, candidates=[CAND], grader_id=GRADER, min_quality=0.9, target="human"
    )
    assert d.candidates[0].graders[0].cases_unsampled == 1


def test_a_human_decision_round_trips_and_a_judge_decision_is_unchanged(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    """H15: the stored form of target="human" loads back whole; target="judge" stores no human field."""
    runs = _runs(1, 60, _biased)
    simulate(ledger, make_result, runs, rate=0.5, min_quality=0.9)
    human, judge = runs[0].last["human"], runs[0].last["judge"]
    assert human.target == "human" and judge.target == "judge"
    assert RoutingDecision.from_dict(human.to_dict(), decision_id=human.decision_id) == human
    assert human.to_dict()["parameters"]["target"] == "human"
    assert "target" not in judge.to_dict()["parameters"]
    stored = judge.to_dict()["candidates"][0]["graders"][0]
    assert not set(HUMAN_FIELDS) & set(stored)
    assert "human quality" in human.reason and "by what people would say" in decision_sentence(human)


def test_route_target_human_prints_the_judge_and_the_people_side_by_side(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    """H16: `llm-connect route --target human`: the decision, then each judge's estimate beside people's."""
    from typer.testing import CliRunner

    from llm_connect.cli import app

    runs = _runs(1, 60, _biased)
    simulate(ledger, make_result, runs, rate=0.5, min_quality=0.9, targets=())
    args = ["route", "-t", runs[0].task, "-b", BASE, "-c", CAND, "--judge", GRADER, "--db", ledger.url]
    args += ["--min-quality", "0.9"]  # people's labels here are scores, on the judge's scale
    out = CliRunner().invoke(app, [*args, "--target", "human"])
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[0] == BASE
    assert f"{CAND}  {GRADER}: judge alone 0.9" in out.stdout and "| people 0.8" in out.stdout
    assert "labels used" in out.stdout and "judge bias +0.09" in out.stdout
    bad = CliRunner().invoke(app, [*args, "--target", "people"])
    assert bad.exit_code != 0 and "target" in bad.output


def test_an_uncalibrated_llm_judge_routes_on_peoples_labels_but_not_on_its_own(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    """H10b: an LLM judge's grades route on the judge only after a passing calibration, but
    routing on what people would say needs none: people's labels of the sampled cases correct
    whatever bias the judge has (a judge that disagrees with people costs labels, not validity)."""
    task, n = "llm", 200
    rng = np.random.default_rng(5)
    human = (rng.random(n) < 0.97).astype(float)
    judge = np.where(rng.random(n) < 0.95, human, 1.0 - human)
    ledger.record_batch(
        [
            RecordItem(
                make_result(
                    float(judge[i]),
                    candidate_model=CAND,
                    baseline_model=BASE,
                    grader_id="pairwise:x",
                    asks_llm=True,
                ),
                task,
                "run",
                f"c{i:04d}",
            )
            for i in range(n)
        ]
    )
    queue = choose_for_labels(ledger, task=task, candidate=CAND, grader_id="pairwise:x", rate=0.5, seed=3)
    ledger.record_labels([HumanLabel(task, c, CAND, "ana", score=float(human[int(c[1:])])) for c in queue])
    kwargs = {"baseline": BASE, "candidates": [CAND], "grader_id": "pairwise:x", "min_quality": 0.8}
    on_judge = Router(ledger).decide(task, **kwargs)
    assert [g.grader_id for g in on_judge.ignored_graders] == ["pairwise:x"] and not on_judge.routed
    assert "no stored calibration" in on_judge.ignored_graders[0].why
    on_people = Router(ledger).decide(task, target="human", **kwargs)
    assert on_people.ignored_graders == () and on_people.used_grader_ids == ("pairwise:x",)
    ev = on_people.candidates[0].graders[0]
    assert ev.grader_id == "pairwise:x" and ev.labels_used == len(queue) and ev.status == "proven"
    assert on_people.routed and on_people.model == CAND
