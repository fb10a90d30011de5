"""The journal: answers received but not recorded, kept until the ledger takes them.

When the ledger fails under a run (a full disk, a read-only file, a database gone past the
patience), what the finished cases produced (their grades, with both answers, the responses to
cache, failures and not-applicable pairs) is appended to a small file instead, one JSON line per
case, flushed and ``fsync``-ed; the run's resume (or, for a shared run, the same command again)
records it first (:meth:`~llm_connect.ledger.QualityLedger.replay_journal`) and asks no model
for those cases again.

Where: beside a SQLite ledger (``<ledger file>.journal-<run>.jsonl``); for PostgreSQL under the
user's state directory (``$XDG_STATE_HOME``, else ``~/.local/state``:
``llm-connect/journal/<database>-<run>.jsonl``). When that place cannot be written either (the
same full disk), the system's temporary directory (``llm-connect-journal/``) is tried; where
nothing can be written, :class:`JournalError` says where it tried. Lines hold no credentials
(masked as every message is).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL

from llm_connect._secrets import mask_secrets
from llm_connect.ledger._rows import RecordItem
from llm_connect.types import LLMResponse
from llm_connect.values import GradingResult, NotApplicable

__all__ = ["JOURNAL_VERSION", "Journal", "JournalEntry", "JournalError"]

JOURNAL_VERSION = 1
"""Bump when a line's keys change meaning (the reader refuses a newer version)."""


class JournalError(OSError):
    """Neither the journal's place nor the fallback could be written; ``tried`` names both."""

    def __init__(self, message: str, tried: Sequence[str]) -> None:
        super().__init__(message)
        self.tried = list(tried)


@dataclass
class JournalEntry:
    """What one finished case would have written (the arguments of ``record_outcomes``)."""

    case_id: str | None
    records: list[RecordItem] = field(default_factory=list)
    cache: list[tuple[str, str, LLMResponse]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    skips: list[NotApplicable] = field(default_factory=list)
    worker_id: str | None = None
    """The shared run's worker that held the case (its claim may be taken over on replay)."""

    def to_json(self, run_id: str) -> str:
        """One line of the journal."""
        data = {
            "version": JOURNAL_VERSION,
            "run_id": run_id,
            "case_id": self.case_id,
            "worker_id": self.worker_id,
            "records": [_record(r) for r in self.records],
            "cache": [[key, adapter, response.to_dict()] for key, adapter, response in self.cache],
            "failures": self.failures,
            "skips": [_skip(s) for s in self.skips],
        }
        return mask_secrets(json.dumps(data, ensure_ascii=False, default=str))

    @classmethod
    def from_json(cls, line: str) -> JournalEntry:
        """Read a line written by :meth:`to_json`."""
        data = json.loads(line)
        if data.get("version") != JOURNAL_VERSION:
            raise ValueError(f"journal line of version {data.get('version')!r}, not {JOURNAL_VERSION}")
        return cls(
            case_id=data["case_id"],
            worker_id=data.get("worker_id"),
            records=[_unrecord(r) for r in data["records"]],
            cache=[(k, a, LLMResponse.from_dict(r)) for k, a, r in data["cache"]],
            failures=list(data["failures"]),
            skips=[NotApplicable(**s) for s in data["skips"]],
        )


def _record(item: RecordItem) -> dict[str, Any]:
    return {
        "result": item.result.to_dict(),
        "task": item.task,
        "run_id": item.run_id,
        "case_id": item.case_id,
        "tags": list(item.tags),
        "baseline_adapter_id": item.baseline_adapter_id,
        "candidate_adapter_id": item.candidate_adapter_id,
        "metadata": None if item.metadata is None else dict(item.metadata),
    }


def _unrecord(data: Mapping[str, Any]) -> RecordItem:
    return RecordItem(
        result=GradingResult.from_dict(data["result"]),
        task=data["task"],
        run_id=data["run_id"],
        case_id=data["case_id"],
        tags=tuple(data["tags"]),
        baseline_adapter_id=data["baseline_adapter_id"],
        candidate_adapter_id=data["candidate_adapter_id"],
        metadata=data["metadata"],
    )


def _skip(na: NotApplicable) -> dict[str, Any]:
    keys = ("case_id", "task", "grader_id", "candidate", "field", "reason", "line", "candidate_model")
    return {k: getattr(na, k) for k in keys}


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "llm-connect" / "journal"


class Journal:
    """The journal of one run of one ledger: :meth:`append` keeps, :meth:`take` hands back."""

    def __init__(self, url: URL, run_id: str) -> None:
        self.run_id = run_id
        ledger = url.render_as_string(hide_password=True)
        digest = hashlib.sha256(f"{ledger}\n{run_id}".encode()).hexdigest()[:10]
        name = f"{_UNSAFE.sub('_', run_id)[:80]}-{digest}.jsonl"
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            db = Path(str(url.database)).resolve()
            self.primary = db.with_name(f"{db.name}.journal-{name}")
            label = db.name
        else:
            label = _UNSAFE.sub("_", f"{url.host or 'local'}-{url.database or ''}")[:60]
            self.primary = _state_dir() / f"{label}-{name}"
        self.fallback = Path(tempfile.gettempdir()) / "llm-connect-journal" / f"{label}-{name}"
        self.passed_over: str | None = None
        """Why the last :meth:`append` went to the fallback (``"<primary>: <OS error>"``)."""

    def append(self, entries: Sequence[JournalEntry]) -> Path:
        """Append ``entries`` (flushed and fsync-ed) where they can be written; returns the file.

        Raises:
            JournalError: neither :attr:`primary` nor :attr:`fallback` could be written.
        """
        text = "".join(e.to_json(self.run_id) + "\n" for e in entries).encode("utf-8")
        problems: list[str] = []
        for path in (self.primary, self.fallback):
            try:
                _append(path, text)
                self.passed_over = problems[0] if problems else None
                return path
            except OSError as exc:
                problems.append(f"{path}: {exc.strerror or exc}")
        raise JournalError("the journal could not be written (" + "; ".join(problems) + ")", problems)

    def files(self) -> list[Path]:
        """The journal files of this run that exist (the place, the fallback, and any left half
        replayed by a process that stopped)."""
        found: list[Path] = []
        for path in (self.primary, self.fallback):
            if path.parent.is_dir():
                found += sorted(p for p in path.parent.glob(path.name + "*") if p.is_file())
        return found

    def take(self, path: Path) -> tuple[Path, list[JournalEntry]]:
        """Move ``path`` aside (so that new lines go to a new file) and read its entries; a line
        cut short by a crash is left out. Remove the returned file once they are recorded."""
        taken = path
        if not path.name.endswith(".replaying"):
            taken = path.with_name(f"{path.name}.{os.getpid()}.replaying")
            os.replace(path, taken)
        entries = []
        for line in taken.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    entries.append(JournalEntry.from_json(line))
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short when its writer stopped mid-write
        return taken, entries


def _append(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):  # no half line left for the next append to join
                os.ftruncate(fd, size)
                if size == 0:
                    os.unlink(path)
            raise
    finally:
        os.close(fd)
