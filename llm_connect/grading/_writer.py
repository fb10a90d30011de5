"""The batch engine's writer thread: commits finished cases off the event loop.

Every finished case (grades, cache entries, failures, not-applicable pairs) is queued; the thread
commits whatever is queued in one transaction, lingering briefly so cases
finishing meanwhile share the commit. A write error is kept and re-raised by
the next :meth:`LedgerWriter.submit` or by :meth:`LedgerWriter.close`.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from llm_connect.errors import LedgerError
from llm_connect.grading._report import CaseFailure, NotApplicable
from llm_connect.types import LLMResponse

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger, RecordItem

__all__ = ["CaseWork", "LedgerWriter"]


@dataclass
class CaseWork:
    """What one finished case writes: grades, cache entries, failures, not-applicable pairs."""

    records: list[RecordItem] = field(default_factory=list)
    cache: list[tuple[str, str, LLMResponse]] = field(default_factory=list)
    failures: list[CaseFailure] = field(default_factory=list)
    skips: list[NotApplicable] = field(default_factory=list)


class LedgerWriter:
    """Commits finished cases from a thread, batching whatever is queued."""

    def __init__(
        self, ledger: QualityLedger, run_id: str | None, max_batch: int = 512, linger_s: float = 0.05
    ) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.max_batch = max_batch
        self.linger_s = linger_s
        self.error: BaseException | None = None
        self._queue: queue.Queue[CaseWork | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="llm-connect-ledger-writer", daemon=True)
        self._thread.start()

    def submit(self, work: CaseWork) -> None:
        if self.error is not None:
            raise LedgerError(f"the ledger writer failed: {self.error}") from self.error
        self._queue.put(work)

    def close(self) -> None:
        """Commit everything queued and stop the thread; re-raise a write error."""
        self._queue.put(None)
        self._thread.join()
        if self.error is not None:
            err = self.error
            raise err if isinstance(err, LedgerError) else LedgerError(f"ledger write failed: {err}")

    def _loop(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            batch: list[CaseWork] = []
            if item is None:
                stop = True
            else:
                batch.append(item)
                # Let cases finishing meanwhile join this transaction: one commit per
                # ~50 ms instead of one per case, and the GIL stays with the event loop.
                time.sleep(self.linger_s)
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            if batch and self.error is None:
                try:
                    self._write(batch)
                except BaseException as exc:  # kept and re-raised by close()/submit()
                    self.error = exc

    def _write(self, batch: list[CaseWork]) -> None:
        records = [r for w in batch for r in w.records]
        if records:
            self.ledger.record_batch(records)
        cache = [c for w in batch for c in w.cache]
        if cache:
            self.ledger.cache_put_many(cache)
        if self.run_id is not None:
            skips = [na for w in batch for na in w.skips]
            if skips:  # a resumed run counts these pairs as done
                self.ledger.record_not_applicable(self.run_id, skips)
            for f in (f for w in batch for f in w.failures):
                self.ledger.record_failure(
                    run_id=self.run_id,
                    case_id=f.case_id,
                    task=f.task,
                    stage=f.stage,
                    error_type=f.error_type,
                    message=f.message,
                    adapter_id=f.adapter_id,
                )
