"""The batch engine's writer thread: commits finished cases off the event loop.

Every finished case (grades, cache entries, failures, not-applicable pairs) is queued; the thread
commits whatever is queued in ONE transaction (:meth:`QualityLedger.record_outcomes`),
lingering briefly so cases finishing meanwhile share the commit: a case is
either wholly in the ledger or not at all. When the ledger refuses a grade
because its key already holds a *different* grade
(:class:`~llm_connect.errors.GradeConflictError`), the batch is written again
case by case and each refused grade becomes a failure of its case (stage
``ledger``), so nothing is dropped silently and the rest is kept. Any other
write error is kept and re-raised by the next :meth:`LedgerWriter.submit` or
by :meth:`LedgerWriter.close`. A fault of the database
(:class:`~llm_connect.errors.LedgerFaultError`: a full disk, a read-only ledger, a server
gone longer than the patience) loses nothing paid for: the batch, and every case finished
after it, goes to the run's journal (:meth:`QualityLedger.keep_outcomes`), :attr:`LedgerWriter.fault`
tells the engine to start no new case, and :meth:`LedgerWriter.close` raises the fault saying
where the journal is. :meth:`LedgerWriter.flush` waits for everything
submitted so far to be committed: :class:`SettledCheck` (stopping early) flushes
before it asks which candidates are settled, so the answer sees every finished case.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from llm_connect.errors import (
    ConfigurationError,
    GradeConflictError,
    LedgerError,
    LedgerFaultError,
    whole_message,
)
from llm_connect.grading._report import BatchReport, CaseFailure
from llm_connect.types import LLMResponse
from llm_connect.values import NotApplicable

if TYPE_CHECKING:
    from llm_connect.grading._sides import Side
    from llm_connect.ledger import QualityLedger, RecordItem

__all__ = ["CaseWork", "LedgerWriter", "SettledCheck", "merge_conflicts", "unsettled_sides"]


@dataclass
class CaseWork:
    """What one finished case writes: grades, cache entries, failures, not-applicable pairs."""

    records: list[RecordItem] = field(default_factory=list)
    cache: list[tuple[str, str, LLMResponse]] = field(default_factory=list)
    failures: list[CaseFailure] = field(default_factory=list)
    skips: list[NotApplicable] = field(default_factory=list)
    case_id: str | None = None
    """The case (a shared run marks it done in the commit that writes it)."""


class LedgerWriter:
    """Commits finished cases from a thread, batching whatever is queued."""

    def __init__(
        self,
        ledger: QualityLedger,
        run_id: str | None,
        max_batch: int = 512,
        linger_s: float = 0.05,
        worker_id: str | None = None,
        on_committed: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.worker_id = worker_id
        self.on_committed = on_committed
        """Called (in the writer thread) with the case ids of each committed batch."""
        """A shared run's worker: each commit writes only the cases it still holds and marks them done."""
        self.max_batch = max_batch
        self.linger_s = linger_s
        self.error: BaseException | None = None
        self.conflicts: list[CaseFailure] = []
        """Grades the ledger refused (their key holds a different grade), as failures of their case."""
        self.refused: set[tuple[str, str, str]] = set()
        """``(case_id, grader_id, candidate_model)`` of each refused grade."""
        self.fault: LedgerFaultError | None = None
        """The database fault that stopped the commits (what follows goes to the journal)."""
        self.journaled: list[str] = []
        """The cases kept in the journal instead of the ledger."""
        self._queue: queue.Queue[CaseWork | threading.Event | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="llm-connect-ledger-writer", daemon=True)
        self._thread.start()

    def submit(self, work: CaseWork) -> None:
        """Queue ``work`` for the next commit (for the journal after a fault); raise if an
        earlier write failed otherwise."""
        if self.error is not None and self.fault is None:
            raise LedgerError(f"the ledger writer failed: {self.error}") from self.error
        self._queue.put(work)

    def flush(self) -> None:
        """Block until everything submitted so far is committed (or the writer failed)."""
        if self.error is not None or not self._thread.is_alive():
            return
        done = threading.Event()
        self._queue.put(done)
        while not done.wait(0.1):
            if not self._thread.is_alive():
                return

    def close(self) -> None:
        """Commit everything queued and stop the thread; re-raise a write error."""
        self._queue.put(None)
        self._thread.join()
        if self.fault is not None:
            raise self.fault
        if self.error is not None:
            err = self.error
            raise err if isinstance(err, LedgerError) else LedgerError(f"ledger write failed: {err}")

    def _loop(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            batch: list[CaseWork] = []
            flushed: list[threading.Event] = []
            if item is None:
                stop = True
            elif isinstance(item, threading.Event):
                flushed.append(item)
            else:
                batch.append(item)
                # Let cases finishing meanwhile join this transaction: one commit per
                # ~50 ms instead of one per case, and the GIL stays with the event loop.
                time.sleep(self.linger_s)
            while len(batch) < self.max_batch and not flushed:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                if isinstance(nxt, threading.Event):  # commit what came before it, then signal
                    flushed.append(nxt)
                    break
                batch.append(nxt)
            if batch and self.fault is not None:
                self._keep(batch)
            elif batch and self.error is None:
                try:
                    self._write(batch)
                    if self.on_committed is not None:
                        self.on_committed([w.case_id for w in batch if w.case_id is not None])
                except LedgerFaultError as exc:  # the database failed: keep what was paid for
                    self.error = self.fault = exc
                    self._keep(batch)
                except BaseException as exc:  # kept and re-raised by close()/submit()
                    self.error = exc
            for event in flushed:
                event.set()

    def with_journal(self, error: BaseException | None) -> BaseException | None:
        """The error a run ends with, once the writer is closed: ``error`` (a fault raised elsewhere,
        a claim, say, now saying where the journal is), else the writer's own fault, if any."""
        fault = self.fault
        if fault is None or error is fault:
            return error
        if isinstance(error, LedgerFaultError):
            error.journal, error.journaled, error.journal_error = (
                fault.journal, fault.journaled, fault.journal_error,
            )  # fmt: skip
            return error
        return fault if error is None else error

    def _keep(self, batch: list[CaseWork]) -> None:
        """Append ``batch`` to the run's journal; the fault says where (or that it could not)."""
        fault = self.fault
        assert fault is not None
        if self.run_id is None:
            fault.journal_error = fault.journal_error or "no run id: nothing can be resumed"
            return
        entries = [  # the fields of the ledger's JournalEntry
            {
                "case_id": w.case_id,
                "records": list(w.records),
                "cache": list(w.cache),
                "failures": self._failure_rows([w]),
                "skips": list(w.skips),
                "worker_id": self.worker_id,
            }
            for w in batch
        ]
        try:
            path, passed_over = self.ledger.keep_outcomes(self.run_id, entries)
        except OSError as exc:  # JournalError: neither place could be written
            fault.journal_error = str(exc)
            return
        fault.journal = str(path) if passed_over is None else f"{path} (not beside the ledger: {passed_over})"
        self.journaled.extend(w.case_id or "" for w in batch)
        fault.journaled = len(self.journaled)

    def _write(self, batch: list[CaseWork]) -> None:
        try:
            self._commit(batch)
        except GradeConflictError as exc:
            if len(batch) == 1:  # the case without its refused grades, which become its failures
                self._commit([self._without_conflicts(batch[0], exc)])
            else:  # find the refusing cases: each case in its own transaction
                for work in batch:
                    self._write([work])

    def _commit(self, batch: list[CaseWork]) -> None:
        shared: dict[str, Any] = {}
        if self.worker_id is not None:
            shared = {
                "worker_id": self.worker_id,
                "finished_case_ids": [w.case_id for w in batch if w.case_id is not None],
            }
        self.ledger.record_outcomes(
            self.run_id,
            **shared,
            records=[r for w in batch for r in w.records],
            cache=[c for w in batch for c in w.cache],
            not_applicable=[na for w in batch for na in w.skips] if self.run_id is not None else [],
            failures=self._failure_rows(batch) if self.run_id is not None else [],
        )

    @staticmethod
    def _failure_rows(batch: list[CaseWork]) -> list[dict[str, Any]]:
        fields = ("case_id", "task", "stage", "error_type", "message", "adapter_id")
        return [{k: getattr(f, k) for k in fields} for w in batch for f in w.failures]

    def _without_conflicts(self, work: CaseWork, exc: GradeConflictError) -> CaseWork:
        """``work`` minus the refused grades, which become failures of the case."""
        refused = set(exc.keys)
        kept: list[RecordItem] = []
        added: list[CaseFailure] = []
        for item in work.records:
            result = item.result
            key = (item.run_id, item.case_id, result.grader_id, result.candidate_response.asked_model)
            if key not in refused:
                kept.append(item)
                continue
            self.refused.add((key[1], key[2], key[3]))
            added.append(
                CaseFailure(
                    case_id=item.case_id or "",
                    task=item.task,
                    stage="ledger",
                    error_type=type(exc).__name__,
                    message=whole_message(
                        f"the ledger holds a different grade of {item.result.grader_id} for candidate "
                        f"{key[3]!r} under this run and case: {exc}"
                    ),
                    adapter_id=item.result.grader_id,
                )
            )
        self.conflicts.extend(added)
        return CaseWork(records=kept, cache=work.cache, failures=[*work.failures, *added], skips=work.skips)


def merge_conflicts(report: BatchReport, writer: LedgerWriter, suite: Any) -> None:
    """Grades the ledger refused become failures of the run (and leave its results)."""
    if not writer.conflicts:
        return
    lines = {c.id: c.line for c in suite.cases}
    report.failures.extend(replace(f, line=lines.get(f.case_id)) for f in writer.conflicts)
    report.results = [
        r
        for r in report.results
        if (r.case_id, r.result.grader_id, r.result.candidate_response.asked_model) not in writer.refused
    ]


class SettledCheck:
    """Stopping early: a run's ``settled`` check and its last answer.

    :meth:`refresh` flushes the writer and then calls the check, both in a thread, so the
    check sees every case finished so far; cases wait (:meth:`wait`) while it runs. An
    exception from the check is kept in :attr:`error`, never swallowed: the engine starts no
    case once it is set and raises it (:meth:`failure`) after committing what finished.
    """

    def __init__(
        self,
        check: Callable[[], Collection[tuple[str, str]]],
        writer: LedgerWriter,
        every: int,
        candidates: Sequence[Side],
    ) -> None:
        self.check = check
        self.writer = writer
        self.every = every
        self.pairs: frozenset[tuple[str, str]] = frozenset()
        self.error: Exception | None = None
        """What the check raised (no case starts once it is set)."""
        self.checks = 0
        self._specs = {c.spec for c in candidates}
        self._by_model = {c.model: c.spec for c in candidates}
        self._lock = asyncio.Lock()
        self._since = 0

    def committed(self) -> bool:
        """Count one case handed to the writer; whether a check is due."""
        self._since += 1
        if self._since < self.every:
            return False
        self._since = 0
        return True

    async def wait(self) -> None:
        """Return once no check is under way."""
        if self._lock.locked():
            async with self._lock:
                pass

    async def refresh(self) -> None:
        """Flush the writer, then ask the check (both in a thread); keep its error."""
        async with self._lock:
            if self.error is not None:
                return
            try:
                await asyncio.to_thread(self.writer.flush)  # the check must see every finished case
                found = await asyncio.to_thread(self.check)
                self.checks += 1
                self.pairs = frozenset(self._validated(found))
            except Exception as exc:  # raised from arun once the cases in flight are recorded
                self.error = exc

    def _validated(self, found: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
        pairs = {(str(task), str(cand)) for task, cand in found}
        for _, cand in pairs:
            if cand not in self._specs and cand in self._by_model:
                raise ConfigurationError(
                    f"settled named candidate {cand!r} by its model; name it by its spec "
                    f"{self._by_model[cand]!r}"
                )
        return pairs

    def failure(self, report: BatchReport) -> Exception:
        """The check's error, noting what the run kept."""
        assert self.error is not None
        self.error.add_note(
            f"raised by the settled check of run {report.run_id}: no case started after it; "
            f"{report.cases_done - report.cases_skipped} case(s) finished in this process are "
            "committed (resume the run to continue)"
        )
        return self.error


def unsettled_sides(
    grader: Any,
    case: Any,
    settled: frozenset[tuple[str, str]],
    cached: Any,
    done: set[tuple[str | None, str, str]],
    report: BatchReport,
) -> list[Side] | None:
    """Stopping early: the candidates of ``grader`` (a BatchGrader) ``case`` is graded with,
    ``None`` to skip it whole.

    Counts what settling spares in ``report``: ``stopped`` per settled candidate that
    still lacked a grade of the case, ``calls_saved`` per response not requested that
    would have been a model call.
    """
    skipped = [c for c in grader.candidates if (case.task, c.spec) in settled]
    if not skipped:
        return list(grader.candidates)
    for cand in skipped:
        if grader._needs(cand, case, done):
            per_task = report.stopped.setdefault(cand.spec, {})
            per_task[case.task] = per_task.get(case.task, 0) + 1
    active = [c for c in grader.candidates if c not in skipped]
    if not any(grader._needs(c, case, done) for c in active):  # nothing left to grade
        sides = (grader.baseline, *grader.candidates)
        report.calls_saved += sum(grader._would_call(s, case, cached) for s in sides)
        return None
    report.calls_saved += sum(grader._would_call(c, case, cached) for c in skipped)
    return active
