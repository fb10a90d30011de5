"""Shared (fleet) runs on PostgreSQL: case registration, claims with leases, workers, a shared rate limit.

Several processes (multiprocessing, spawn) act as workers on one run through the real
PostgreSQL server; SQLite refuses every fleet method with the reason.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text

from llm_connect.errors import LedgerError, RunMismatchError
from llm_connect.grading import GradingResult
from llm_connect.ledger import FleetStatus, QualityLedger, RecordItem
from llm_connect.values import NotApplicable
from tests.fixtures.databases import _make_result

pg = pytest.mark.postgres

RUN = "fleet-run"
DIGEST = "d" * 64


def _cases(n: int, task: str = "qa") -> list[tuple[str, str, str]]:
    return [(f"c{i:04d}", task, f"digest-{i}") for i in range(n)]


def _spawn(target: Callable[..., None], args_list: list[tuple[Any, ...]], timeout: float = 120) -> list[Any]:
    """Run ``target(*args, start, results)`` in one spawned process per args; their results.

    ``start`` is a barrier: each process waits on it once it is ready, so they all begin together.
    """
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(len(args_list))
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, start, results)) for args in args_list]
    for p in procs:
        p.start()
    out = []
    deadline = time.monotonic() + timeout
    for _ in procs:
        out.append(results.get(timeout=max(1.0, deadline - time.monotonic())))
    for p in procs:
        p.join(30)
    problems = [r[1] for r in out if r[0] == "error"]
    assert not problems, "\n".join(problems)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    return [r[1] for r in out]


def _register_proc(url: str, n: int, start: Any, results: Any) -> None:
    try:
        with QualityLedger(url) as ledger:
            start.wait(60)
            results.put(("ok", ledger.register_run_cases(RUN, _cases(n), suite_digest=DIGEST)))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def _claim_proc(url: str, worker: str, start: Any, results: Any) -> None:
    try:
        got: list[str] = []
        with QualityLedger(url) as ledger:
            ledger.register_run_cases(RUN, _cases(300), suite_digest=DIGEST)
            start.wait(60)
            while batch := ledger.claim_cases(RUN, worker, limit=7, lease_s=60):
                got += batch
                items = [RecordItem(_make_result(1.0), "qa", run_id=RUN, case_id=c) for c in batch]
                written = ledger.record_outcomes(RUN, records=items, worker_id=worker)
                assert len(written) == len(batch)
        results.put(("ok", (worker, got)))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def _rate_proc(url: str, seconds: float, start: Any, results: Any) -> None:
    try:
        with QualityLedger(url) as ledger:
            start.wait(60)
            granted = 0
            first = time.time()  # the database runs on this host: its now() of every grant lies
            end = time.monotonic() + seconds  # between the first call sent and the last answer
            while time.monotonic() < end:
                wait = ledger.acquire_rate("rpm:test", rate_per_s=20.0, burst=5.0)
                if wait == 0.0:
                    granted += 1
                else:
                    assert wait > 0
                    time.sleep(min(wait, 0.05))
            last = time.time()
        results.put(("ok", (granted, first, last)))
    except BaseException:
        results.put(("error", traceback.format_exc()))


@pytest.fixture
def fleet(postgres_url: str) -> Any:
    with QualityLedger(postgres_url) as ledger:
        yield ledger


def _case_rows(ledger: QualityLedger) -> dict[str, tuple[Any, ...]]:
    with ledger.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT case_id, status, worker_id, attempts, lease_until FROM run_cases WHERE run_id = :r"),
            {"r": RUN},
        ).all()
    return {r[0]: tuple(r[1:]) for r in rows}


@pg
def test_registration_from_several_processes_at_once_agrees(postgres_url: str) -> None:
    QualityLedger(postgres_url).close()  # migrated once, so the processes race on registration only
    counts = _spawn(_register_proc, [(postgres_url, 50)] * 4)
    assert counts == [50] * 4
    with QualityLedger(postgres_url) as ledger:
        rows = _case_rows(ledger)
        assert len(rows) == 50 and {r[0] for r in rows.values()} == {"pending"}
        with ledger.engine.connect() as conn:
            order = conn.execute(
                text("SELECT case_id FROM run_cases WHERE run_id = :r ORDER BY position"), {"r": RUN}
            ).scalars()
            assert list(order) == [c[0] for c in _cases(50)]
        # again from this process: idempotent
        assert ledger.register_run_cases(RUN, _cases(50), suite_digest=DIGEST) == 50


@pg
def test_another_suite_under_the_same_run_id_is_refused(fleet: QualityLedger) -> None:
    fleet.register_run_cases(RUN, _cases(3), suite_digest=DIGEST)
    with pytest.raises(RunMismatchError, match=RUN) as info:
        fleet.register_run_cases(RUN, _cases(4), suite_digest="e" * 64)
    assert info.value.run_id == RUN
    assert isinstance(info.value, LedgerError)
    with pytest.raises(LedgerError, match="more than once"):
        fleet.register_run_cases("other", [("a", "qa", "x"), ("a", "qa", "x")], suite_digest=DIGEST)


@pg
def test_three_processes_claim_every_case_exactly_once(postgres_url: str) -> None:
    QualityLedger(postgres_url).close()
    claimed = _spawn(_claim_proc, [(postgres_url, f"w{i}") for i in range(3)])
    everything = [c for _, got in claimed for c in got]
    assert sorted(everything) == [c[0] for c in _cases(300)]  # each exactly once
    with QualityLedger(postgres_url) as ledger:
        rows = _case_rows(ledger)
        assert {r[0] for r in rows.values()} == {"done"}
        assert {r[2] for r in rows.values()} == {1}  # one attempt each
        assert ledger.count(run_id=RUN) == 300
        for worker, got in claimed:  # the worker that claimed a case is the one that finished it
            assert all(rows[c][1] == worker for c in got)
    assert sum(1 for _, got in claimed if got) >= 2  # they did claim side by side


@pg
def test_claims_come_in_suite_order_and_mark_the_case(fleet: QualityLedger) -> None:
    fleet.register_run_cases(RUN, _cases(10), suite_digest=DIGEST)
    assert fleet.claim_cases(RUN, "a", limit=3, lease_s=30) == ["c0000", "c0001", "c0002"]
    assert fleet.claim_cases(RUN, "b", limit=2, lease_s=30) == ["c0003", "c0004"]
    rows = _case_rows(fleet)
    assert rows["c0000"][:3] == ("claimed", "a", 1)
    assert rows["c0009"][:3] == ("pending", None, 0)
    assert fleet.claim_cases(RUN, "a", limit=0, lease_s=30) == []


@pg
def test_an_expired_lease_is_claimed_by_another_worker_and_the_late_write_changes_nothing(
    fleet: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    fleet.register_run_cases(RUN, _cases(4), suite_digest=DIGEST)
    assert fleet.claim_cases(RUN, "old", limit=2, lease_s=0.2) == ["c0000", "c0001"]
    assert fleet.claim_cases(RUN, "new", limit=1, lease_s=30) == ["c0002"]  # leases still valid
    time.sleep(0.4)
    assert fleet.claim_cases(RUN, "new", limit=2, lease_s=30) == ["c0000", "c0001"]
    rows = _case_rows(fleet)
    assert rows["c0000"][:3] == ("claimed", "new", 2)
    assert fleet.renew_leases(RUN, "old", ["c0000", "c0001"], lease_s=30) == []

    # the old owner's late write: nothing of it lands, and it returns no grade ids
    late = [RecordItem(make_result(0.1), "qa", run_id=RUN, case_id=c) for c in ("c0000", "c0001")]
    failure = {"case_id": "c0001", "task": "qa", "stage": "judge", "error_type": "E", "message": "late"}
    skip = NotApplicable(
        case_id="c0000", task="qa", grader_id="g", candidate="x", field=None, reason="r", candidate_model="m"
    )
    out = fleet.record_outcomes(
        RUN,
        records=late,
        failures=[failure],
        not_applicable=[skip],
        worker_id="old",
        finished_case_ids=["c0000"],
    )
    assert out == []
    assert fleet.count(run_id=RUN) == 0 and fleet.failures(RUN) == [] and fleet.not_applicable(RUN) == []
    assert _case_rows(fleet)["c0000"][:2] == ("claimed", "new")

    # the new owner's write lands and finishes the cases
    mine = [RecordItem(make_result(0.9), "qa", run_id=RUN, case_id=c) for c in ("c0000", "c0001")]
    assert len(fleet.record_outcomes(RUN, records=mine, worker_id="new")) == 2
    rows = _case_rows(fleet)
    assert rows["c0000"][0] == rows["c0001"][0] == "done" and rows["c0000"][3] is None
    assert {g.quality_score for g in fleet.results(run_id=RUN)} == {0.9}
    # a repeated write of finished cases is dropped as well
    assert fleet.record_outcomes(RUN, records=mine, worker_id="new") == []


@pg
def test_failures_and_finished_cases_close_their_cases(fleet: QualityLedger) -> None:
    fleet.register_run_cases(RUN, _cases(3), suite_digest=DIGEST)
    assert fleet.claim_cases(RUN, "w", limit=3, lease_s=30) == ["c0000", "c0001", "c0002"]
    failure = {"case_id": "c0000", "task": "qa", "stage": "baseline", "error_type": "E", "message": "boom"}
    assert fleet.record_outcomes(RUN, failures=[failure], finished_case_ids=["c0001"], worker_id="w") == []
    rows = _case_rows(fleet)
    assert (rows["c0000"][0], rows["c0001"][0], rows["c0002"][0]) == ("failed", "done", "claimed")
    assert [f.case_id for f in fleet.failures(RUN)] == ["c0000"]
    with pytest.raises(LedgerError, match="case_id"):
        fleet.record_outcomes(RUN, records=[RecordItem(_make_result(), "qa", run_id=RUN)], worker_id="w")


@pg
def test_renew_keeps_a_lease_and_release_returns_cases(fleet: QualityLedger) -> None:
    fleet.register_run_cases(RUN, _cases(3), suite_digest=DIGEST)
    assert fleet.claim_cases(RUN, "a", limit=2, lease_s=0.3) == ["c0000", "c0001"]
    for _ in range(3):
        time.sleep(0.15)
        assert fleet.renew_leases(RUN, "a", ["c0001", "c0000", "c0009"], lease_s=0.3) == ["c0001", "c0000"]
    assert fleet.claim_cases(RUN, "b", limit=5, lease_s=30) == ["c0002"]  # a's leases held
    assert fleet.renew_leases(RUN, "b", ["c0000"], lease_s=30) == []  # not b's
    fleet.release_cases(RUN, "b", ["c0000"])  # not b's: nothing happens
    assert _case_rows(fleet)["c0000"][:2] == ("claimed", "a")
    fleet.release_cases(RUN, "a", ["c0000", "c0001"])
    rows = _case_rows(fleet)
    assert rows["c0000"][:2] == ("pending", None) and rows["c0000"][3] is None
    assert fleet.claim_cases(RUN, "b", limit=5, lease_s=30) == ["c0000", "c0001"]


@pg
def test_run_status_counts_cases_workers_and_rate(fleet: QualityLedger) -> None:
    with pytest.raises(LedgerError, match="no shared run 'nope'"):
        fleet.run_status("nope")
    fleet.register_run_cases(RUN, _cases(10), suite_digest=DIGEST)
    fleet.register_worker(RUN, "w1", host="h1", pid=11)
    fleet.register_worker(RUN, "w2", host="h2", pid=22)
    got = fleet.claim_cases(RUN, "w1", limit=4, lease_s=30)
    fleet.claim_cases(RUN, "w2", limit=2, lease_s=0.05)
    time.sleep(0.2)
    failure = {"case_id": got[3], "task": "qa", "stage": "judge", "error_type": "E", "message": "x"}
    items = [RecordItem(_make_result(), "qa", run_id=RUN, case_id=c) for c in got[:3]]
    fleet.record_outcomes(RUN, records=items, failures=[failure], worker_id="w1")
    fleet.heartbeat(RUN, "w1", calls=8, failures=1, cases_done=4)
    fleet.heartbeat(RUN, "w2", calls=3, failures=0, cases_done=0)
    fleet.stop_worker(RUN, "w2")

    status = fleet.run_status(RUN)
    assert isinstance(status, FleetStatus)
    assert (status.total, status.pending, status.claimed, status.done, status.failed, status.expired) == (
        10,
        4,
        2,
        3,
        1,
        2,
    )
    assert status.left == 6 and status.calls == 11 and status.failures == 1
    assert [(w.worker_id, w.host, w.pid, w.alive, w.cases_done) for w in status.workers] == [
        ("w1", "h1", 11, True, 4),
        ("w2", "h2", 22, False, 0),
    ]
    assert status.workers[1].stopped_at is not None and status.workers_alive == 1
    assert status.rate_per_min >= 4 * 60 / 60  # 4 cases finished within the last minute
    data = status.to_dict()
    assert data["done"] == 3 and data["workers"][0]["worker_id"] == "w1" and data["left"] == 6
    assert fleet.run_status(RUN, alive_s=0.0).workers_alive == 0
    with pytest.raises(LedgerError, match="not registered"):
        fleet.heartbeat(RUN, "ghost", calls=0, failures=0, cases_done=0)


@pg
def test_acquire_rate_from_four_processes_never_grants_more_than_the_bucket(postgres_url: str) -> None:
    QualityLedger(postgres_url).close()
    out = _spawn(_rate_proc, [(postgres_url, 2.0)] * 4)
    granted = sum(g for g, _, _ in out)
    span = max(last for _, _, last in out) - min(first for _, first, _ in out)
    # burst 5 + 20/s over the span of every grant (+1 for the clocks' resolution)
    assert granted <= 5 + 20.0 * span + 1, (granted, span)
    assert granted >= 5 + 20.0 * 1.0  # at least a second of refill was handed out (not stuck)
    assert all(g > 0 for g, _, _ in out)  # every process got some


@pg
def test_acquire_rate_waits_and_return_rate_gives_back(fleet: QualityLedger) -> None:
    assert fleet.acquire_rate("k", rate_per_s=1.0, burst=2.0) == 0.0
    assert fleet.acquire_rate("k", rate_per_s=1.0, burst=2.0) == 0.0
    wait = fleet.acquire_rate("k", rate_per_s=1.0, burst=2.0)
    assert 0.5 < wait <= 1.0
    fleet.return_rate("k", amount=1.5)
    assert fleet.acquire_rate("k", rate_per_s=1.0, burst=2.0, cost=1.5) == 0.0
    with pytest.raises(ValueError, match="cost"):
        fleet.acquire_rate("k", rate_per_s=1.0, burst=2.0, cost=3.0)


@pytest.mark.parametrize(
    "call",
    [
        lambda ledger: ledger.register_run_cases(RUN, _cases(1), suite_digest=DIGEST),
        lambda ledger: ledger.claim_cases(RUN, "w", limit=1, lease_s=1),
        lambda ledger: ledger.renew_leases(RUN, "w", ["c"], lease_s=1),
        lambda ledger: ledger.release_cases(RUN, "w", ["c"]),
        lambda ledger: ledger.register_worker(RUN, "w", host="h", pid=1),
        lambda ledger: ledger.heartbeat(RUN, "w", calls=0, failures=0, cases_done=0),
        lambda ledger: ledger.stop_worker(RUN, "w"),
        lambda ledger: ledger.run_status(RUN),
        lambda ledger: ledger.acquire_rate("k", rate_per_s=1, burst=1),
        lambda ledger: ledger.return_rate("k", amount=1),
        lambda ledger: ledger.record_outcomes(RUN, finished_case_ids=["c"], worker_id="w"),
    ],
)
def test_sqlite_refuses_shared_runs_with_the_reason(
    sqlite_url: str, call: Callable[[QualityLedger], Any]
) -> None:
    with QualityLedger(sqlite_url) as ledger, pytest.raises(LedgerError, match="need PostgreSQL") as info:
        call(ledger)
    assert "one writer at a time" in str(info.value) and "row locks" in str(info.value)
