"""Shared runs: many workers, on many hosts, grade one run through PostgreSQL.

Each worker registers the run's cases (idempotently: every worker given the
same run id and suite agrees on the case list), then claims small batches of
unclaimed cases with a lease (``SELECT ... FOR UPDATE SKIP LOCKED`` in the
ledger), renews the leases of the cases it holds while it grades them, and
commits each finished case in the transaction that marks it done, only while it
still holds it: a worker killed or cut off loses its lease after ``lease_s`` and
another takes the case over; its late write then changes nothing.

A database restart pauses a worker rather than stopping it: every ledger call waits for the
server (up to the ledger's patience, ``--db-patience``), and leases are renewed every
``lease_s / 3``, so a pause shorter than two thirds of the lease lets no lease lapse. After a
longer one a case may be claimed again by another worker; the first worker's commit then
writes nothing for it (it no longer holds it), so the case is still graded once.

:class:`FleetSource` is what the batch engine pulls cases from instead of the
suite's list.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError, LedgerError
from llm_connect.grading._protocols import Case

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = ["DEFAULT_LEASE_S", "FleetSource", "case_digest", "new_worker_id", "suite_digest"]

DEFAULT_LEASE_S = 60.0
"""Seconds a claimed case stays a worker's without a renewal."""


def case_digest(case: Case) -> str:
    """SHA-256 of what a case asks (id, task, request, system prompt, expected): the same
    case in every worker's copy of the suite has the same digest."""
    data = {
        "id": case.id,
        "task": case.task,
        "prompt": case.prompt,
        "conversation": None if case.conversation is None else case.conversation.digest,
        "system_prompt": case.system_prompt,
        "expected": case.expected,
    }
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def suite_digest(cases: Sequence[Case]) -> str:
    """SHA-256 over the cases' digests in suite order."""
    h = hashlib.sha256()
    for case in cases:
        h.update(case_digest(case).encode("ascii"))
    return h.hexdigest()


def new_worker_id() -> str:
    """``HOST-PID-xxxxxx``: unique per process, readable in ``llm-connect run status``."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class FleetSource:
    """Hands the engine the cases this worker claimed, renewing their leases meanwhile.

    Args:
        ledger: a PostgreSQL ledger (the coordinator).
        run_id: the shared run.
        cases: the suite's cases (every worker has the same suite).
        batch: cases claimed at a time.
        lease_s: the lease; renewed every ``lease_s / 3`` for the cases held.
        on_claim: called in a worker thread with each batch claimed (the engine reads their
            cached responses).
        poll_s: wait between claims while other workers still hold the last cases.
    """

    def __init__(
        self,
        ledger: QualityLedger,
        run_id: str,
        cases: Sequence[Case],
        *,
        batch: int = 8,
        lease_s: float = DEFAULT_LEASE_S,
        worker_id: str | None = None,
        on_claim: Callable[[list[Case]], None] | None = None,
        poll_s: float | None = None,
    ) -> None:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConfigurationError(f"batch must be an integer >= 1, not {batch!r}")
        if isinstance(lease_s, bool) or not isinstance(lease_s, (int, float)) or lease_s <= 0:
            raise ConfigurationError(f"lease_s must be a number > 0, not {lease_s!r}")
        self.ledger = ledger
        self.run_id = run_id
        self.by_id = {c.id: c for c in cases}
        self.batch = batch
        self.lease_s = float(lease_s)
        self.worker_id = worker_id or new_worker_id()
        self.on_claim = on_claim
        self.poll_s = poll_s if poll_s is not None else min(1.0, self.lease_s / 4)
        self.held: set[str] = set()
        """Cases claimed and not yet committed (their leases are renewed until the commit)."""
        self._held_lock = threading.Lock()  # the writer thread reports commits
        self._buffer: list[Case] = []
        self._lock = asyncio.Lock()
        self._renewer: asyncio.Task[None] | None = None
        self.claimed_total = 0
        self.lost: set[str] = set()
        """Cases whose lease this worker lost (another worker took them over)."""

    def register(self) -> int:
        """Register the run's cases and this worker (blocking); returns the run's case count."""
        cases = list(self.by_id.values())
        rows = [(c.id, c.task, case_digest(c)) for c in cases]
        total = int(self.ledger.register_run_cases(self.run_id, rows, suite_digest=suite_digest(cases)))
        self.ledger.register_worker(self.run_id, self.worker_id, host=socket.gethostname(), pid=os.getpid())
        return total

    def replay_journal(self) -> int:
        """Record the cases a stopped worker of this run kept in its journal on this host when the
        ledger failed (blocking; after :meth:`register`); returns how many there were."""
        return int(self.ledger.replay_journal(self.run_id, worker_id=self.worker_id))

    def start(self) -> None:
        """Start renewing leases (call on the running event loop)."""
        if self._renewer is None:
            self._renewer = asyncio.create_task(self._renew_loop())

    async def next(self) -> Case | None:
        """The next claimed case, claiming a batch when none is buffered; ``None`` when the run
        has nothing left that this worker could take (every case done or failed)."""
        async with self._lock:
            if self.lost:  # queued cases whose lease another worker took over: not ours to grade
                self._buffer = [c for c in self._buffer if c.id not in self.lost]
            while not self._buffer:
                claimed = await asyncio.to_thread(
                    self.ledger.claim_cases,
                    self.run_id,
                    self.worker_id,
                    limit=self.batch,
                    lease_s=self.lease_s,
                )
                if claimed:
                    batch = [self.by_id[cid] for cid in claimed if cid in self.by_id]
                    with self._held_lock:
                        self.held.update(claimed)
                    self.lost.difference_update(claimed)
                    self.claimed_total += len(claimed)
                    if self.on_claim is not None:
                        await asyncio.to_thread(self.on_claim, batch)
                    self._buffer.extend(batch)
                    break
                status = await asyncio.to_thread(self.ledger.run_status, self.run_id)
                if status.left == 0:  # every case done or failed
                    return None
                await asyncio.sleep(self.poll_s)  # others hold the rest: take over any whose lease lapses
            return self._buffer.pop(0)

    def committed(self, case_ids: list[str]) -> None:
        """The writer committed these cases (marking them done): stop renewing their leases."""
        with self._held_lock:
            self.held.difference_update(case_ids)

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            with self._held_lock:
                held = sorted(self.held)
            if not held:
                continue
            try:  # a database away waits in the call (up to the patience), then the next round tries
                kept = await asyncio.to_thread(
                    self.ledger.renew_leases, self.run_id, self.worker_id, held, lease_s=self.lease_s
                )
            except LedgerError:
                continue
            lost = set(held) - set(kept)
            self.lost.update(lost)

    async def heartbeat(self, *, calls: int, failures: int, cases_done: int) -> None:
        """Report this worker's counts (absolute) to the run's status."""
        await asyncio.to_thread(
            self.ledger.heartbeat,
            self.run_id,
            self.worker_id,
            calls=calls,
            failures=failures,
            cases_done=cases_done,
        )

    async def heartbeats(self, report: Any, every_s: float = 5.0) -> None:
        """Tell the run's status what this worker has done (``report``: the engine's
        BatchReport), every ``every_s`` seconds, until cancelled."""
        while True:
            with contextlib.suppress(LedgerError):  # the status is advice: a missed beat stops nothing
                await self.heartbeat(
                    calls=report.model_calls, failures=len(report.failures), cases_done=report.cases_done
                )
            await asyncio.sleep(every_s)

    async def close(self) -> None:
        """Stop renewing; give back cases claimed but never started; mark the worker stopped."""
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
            self._renewer = None
        unstarted = [c.id for c in self._buffer]
        self._buffer.clear()
        if unstarted:
            await asyncio.to_thread(self.ledger.release_cases, self.run_id, self.worker_id, unstarted)
            with self._held_lock:
                self.held.difference_update(unstarted)
        await asyncio.to_thread(self.ledger.stop_worker, self.run_id, self.worker_id)

    def all_done(self) -> bool:
        """Whether every case of the run is done or failed (blocking)."""
        status = self.ledger.run_status(self.run_id)
        return bool(status.left == 0)

    def describe(self) -> dict[str, Any]:
        """What the run report says about this worker."""
        return {"worker_id": self.worker_id, "claimed": self.claimed_total, "lost": sorted(self.lost)}
