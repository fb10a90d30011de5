"""A Router that decided before reads only the cases that arrived since, and decides exactly as a
fresh full read would (both backends)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from llm_connect.grading import GradingResult
from llm_connect.ledger import CaseSeries, QualityLedger
from llm_connect.routing import Router, RoutingDecision
from llm_connect.routing._series import CachedSeries, _extended

MakeResult = Callable[..., GradingResult]
CANDIDATES = ["mini", "nano"]
GRADERS = ["exact", "embedding"]


def _decide(router: Router) -> RoutingDecision:
    return router.decide(
        "support", baseline="gpt-4o", candidates=CANDIDATES, grader_id=GRADERS, min_samples=10
    )


def _fresh(ledger: QualityLedger) -> RoutingDecision:
    """What a new process computes from every case row."""
    return _decide(Router(ledger))


def test_a_routing_loop_decides_as_a_fresh_full_read_would(
    ledger: QualityLedger, make_result: MakeResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(20261124)
    reads: list[tuple[str, object, int]] = []  # (method, after, case rows returned)
    real, real_together = ledger.case_series, ledger.routing_read

    def counted(**kwargs: Any) -> list[CaseSeries]:
        got = real(**kwargs)
        reads.append(("case_series", kwargs.get("after"), sum(s.n_cases for s in got)))
        return got

    def counted_together(**kwargs: Any) -> tuple[Any, list[CaseSeries]]:
        totals, got = real_together(**kwargs)
        reads.append(("routing_read", kwargs.get("after"), sum(s.n_cases for s in got)))
        return totals, got

    monkeypatch.setattr(ledger, "case_series", counted)
    monkeypatch.setattr(ledger, "routing_read", counted_together)
    router = Router(ledger)
    next_case = 0
    incremental_steps = 0
    for step in range(12):
        # Mostly new cases (a fleet grading a suite); every third batch also replicates old cases
        # (a second run of the same suite), which a cached series cannot absorb.
        replicate = step % 3 == 2 and next_case > 0
        cases = list(range(next_case, next_case + 6))
        next_case += 6
        if replicate:
            cases += rng.sample(range(next_case - 6), 3)
        ledger.record_many(
            [
                make_result(
                    rng.betavariate(9 if model == "mini" else 4, 1),
                    candidate_model=model,
                    grader_id=grader,
                    prompt=f"case {case}",
                )
                for case in cases
                for model in CANDIDATES
                for grader in GRADERS
            ],
            task="support",
        )
        reads.clear()
        looped = _decide(router)
        if step > 0 and not replicate:
            # one read with the totals, of each group's rows past its last known case: the 6
            # new cases of each of the 4 groups
            assert len(reads) == 1 and reads[0][:2] == ("routing_read", reads[0][1]) and reads[0][1]
            assert reads[0][2] == 24
            incremental_steps += 1
        elif step > 0:
            # the new rows do not account for the replicated grades: a full read follows
            assert [r[0] for r in reads] == ["routing_read", "case_series"]
            assert reads[1][1] is None and reads[1][2] == 4 * next_case
        else:  # nothing known yet: the totals, then every case
            assert reads == [("routing_read", None, 0), ("case_series", None, 24)]
        monkeypatch.setattr(ledger, "case_series", real)
        monkeypatch.setattr(ledger, "routing_read", real_together)
        fresh = _fresh(ledger)
        monkeypatch.setattr(ledger, "case_series", counted)
        monkeypatch.setattr(ledger, "routing_read", counted_together)
        assert looped.candidates == fresh.candidates, f"step {step}"
        assert looped.reason == fresh.reason
    assert incremental_steps == 7


def _series(first_ids: tuple[int, ...], grades: tuple[int, ...], sums: tuple[float, ...]) -> CaseSeries:
    return CaseSeries(
        task="t",
        baseline_model="b",
        grader_id="exact",
        candidate_model="m",
        grades=grades,
        sum_quality=sums,
        delta_n=(0,) * len(grades),
        delta_sum=(0.0,) * len(grades),
        first_ids=first_ids,
    )


def test_a_case_that_arrives_out_of_order_forces_a_full_read() -> None:
    old = CachedSeries(_series((1, 2, 5), (1, 1, 1), (1.0, 0.5, 1.0)), 3, 2.5)
    # Case 4 committed after case 5 was read (concurrent writers): a read past id 5 misses it,
    # and the totals (4 grades, Σ 3.25) say so.
    assert _extended(old, None, (4, 3.25)) is None
    # Cases past the cached series' last one that account for every new grade extend it.
    new = _series((5, 7, 9), (1, 1, 2), (1.0, 0.25, 1.5))
    got = _extended(old, new, (6, 4.25))
    assert got is not None
    series, total = got.series, got.sum_quality
    assert series.first_ids == (1, 2, 5, 7, 9) and series.grades == (1, 1, 1, 1, 2)
    assert series.sum_quality == (1.0, 0.5, 1.0, 0.25, 1.5) and total == 4.25 and got.n_grades == 6
    # A replicate of a known case changes the totals beyond what the new rows add.
    assert _extended(old, new, (7, 5.0)) is None
    # Same count, different sum (a grade replaced): not absorbed either.
    assert _extended(old, new, (6, 4.0)) is None
    # Nothing new and the totals unchanged: the cached series stands.
    unchanged = _extended(old, None, (3, 2.5))
    assert unchanged is not None and (unchanged.series, unchanged.sum_quality) == (old.series, 2.5)


def test_a_quiet_task_reads_its_totals_alone(
    ledger: QualityLedger, make_result: MakeResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New cases are read with the totals only while grades are arriving for the task; after a
    decision that found nothing new, the next one reads the totals alone, and a change then costs
    one read of the new cases."""

    def grade(first: int) -> None:
        ledger.record_many(
            [
                make_result(0.97, candidate_model=m, grader_id=g, prompt=f"case {i}")
                for i in range(first, first + 5)
                for m in CANDIDATES
                for g in GRADERS
            ],
            task="support",
        )

    calls: list[tuple[str, bool]] = []  # (method, whether it asked for new cases only)
    real, real_together = ledger.case_series, ledger.routing_read

    def counted(**kwargs: Any) -> list[CaseSeries]:
        calls.append(("case_series", kwargs.get("after") is not None))
        return real(**kwargs)

    def counted_together(**kwargs: Any) -> tuple[Any, list[CaseSeries]]:
        calls.append(("routing_read", kwargs.get("after") is not None))
        return real_together(**kwargs)

    monkeypatch.setattr(ledger, "case_series", counted)
    monkeypatch.setattr(ledger, "routing_read", counted_together)
    router = Router(ledger)
    grade(0)
    _decide(router)  # first look: totals, then every case
    grade(5)
    calls.clear()
    _decide(router)  # grades arriving: the new cases come with the totals
    assert calls == [("routing_read", True)]
    calls.clear()
    _decide(router)  # nothing new (still speculating once), then quiet
    _decide(router)
    assert calls == [("routing_read", True), ("routing_read", False)]
    grade(10)
    calls.clear()
    changed = _decide(router)  # after a quiet spell: the totals, then the new cases only
    assert calls == [("routing_read", False), ("case_series", True)]
    fresh = _fresh(ledger)
    assert changed.candidates == fresh.candidates


def test_a_router_shared_by_threads_stays_exact(ledger: QualityLedger, make_result: MakeResult) -> None:
    """Threads deciding on one Router while grades arrive: every cached bound belongs to its own
    series, so once the grades stop, the shared Router decides as a fresh one does."""
    import threading

    stop = threading.Event()
    errors: list[BaseException] = []
    router = Router(ledger)
    rng = random.Random(7)

    def writer() -> None:
        try:
            for batch in range(40):
                ledger.record_many(
                    [
                        make_result(
                            rng.betavariate(9, 1), candidate_model=m, grader_id=g, prompt=f"case {batch}-{i}"
                        )
                        for i in range(3)
                        for m in CANDIDATES
                        for g in GRADERS
                    ],
                    task="support",
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            stop.set()

    def decider() -> None:
        try:
            while not stop.is_set():
                _decide(router)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=decider) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    shared = _decide(router)
    assert shared.candidates == _fresh(ledger).candidates
    # and after more grades, still exact (the cached bounds extend correctly)
    ledger.record_many(
        [
            make_result(0.95, candidate_model=m, grader_id=g, prompt=f"late {i}")
            for i in range(4)
            for m in CANDIDATES
            for g in GRADERS
        ],
        task="support",
    )
    assert _decide(router).candidates == _fresh(ledger).candidates
