"""Riding out the database: which errors are faults, and how long to wait for a server that went away.

A write (or a read on the run's path) that fails because the server went away (connection
refused, terminated by a restart, reset, a server starting up or read-only during recovery) is
tried again with exponential backoff and jitter for up to the ledger's patience
(``--db-patience``, default :data:`DEFAULT_PATIENCE_S`; 0: no retry). That is safe because
every write can be run twice: grades have idempotency keys (the identical grade again is a
no-op), cache entries and not-applicable pairs are inserted ``ON CONFLICT DO NOTHING``, and a
shared run's case is marked done only by the worker that still holds its claim (a second try
of a commit that did land changes nothing).

A fault that waiting cannot mend (a full disk, a read-only file or file system, a permission
lost) is raised at once as :class:`~llm_connect.errors.LedgerFaultError`, and so is a server
that stays away past the patience. Errors are classified by PostgreSQL's SQLSTATE and SQLite's
result code where the driver gives one (:func:`fault_of`), by the message only where it does
not (a refused connection has no SQLSTATE).
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from llm_connect.errors import LedgerFaultError

__all__ = [
    "DEFAULT_PATIENCE_S",
    "PATIENCE_ENV",
    "Patience",
    "fault_message",
    "fault_of",
    "sqlite_fault",
    "when_writable",
]

#: Seconds a command waits for an unreachable database before it stops (``--db-patience``).
DEFAULT_PATIENCE_S = 60.0
#: The environment variable that sets the patience of every command (``--db-patience`` wins).
PATIENCE_ENV = "LLM_CONNECT_DB_PATIENCE"
#: The first wait after a failure; each later one doubles, up to :data:`BACKOFF_CAP_S`.
BACKOFF_FIRST_S = 0.1
BACKOFF_CAP_S = 5.0

UNREACHABLE, DISK_FULL, READ_ONLY, PERMISSION = "unreachable", "disk_full", "read_only", "permission"

# PostgreSQL SQLSTATEs (Appendix A of its manual) of a server that went away or cannot serve yet.
_PG_TRANSIENT = {
    "57P01",  # admin_shutdown: terminated by a restart or pg_terminate_backend
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now: starting up, shutting down, in recovery
    "53300",  # too_many_connections
    "25006",  # read_only_sql_transaction: a server in recovery, a standby being promoted
}
_PG_FAULTS = {"53100": DISK_FULL, "42501": PERMISSION}  # disk_full, insufficient_privilege
# SQLite primary result codes (sqlite3.Error.sqlite_errorcode & 0xFF).
_SQLITE_FAULTS = {
    13: DISK_FULL,
    8: READ_ONLY,
    14: PERMISSION,
    3: PERMISSION,
}  # FULL, READONLY, CANTOPEN, PERM
_OS_FAULTS = {errno.ENOSPC: DISK_FULL, errno.EDQUOT: DISK_FULL, errno.EROFS: READ_ONLY}
_OS_FAULTS.update({errno.EACCES: PERMISSION, errno.EPERM: PERMISSION})


def fault_of(exc: BaseException) -> str | None:
    """What kind of database fault ``exc`` (SQLAlchemy's, the driver's or the OS's) is:
    ``unreachable`` (worth waiting for), ``disk_full``, ``read_only``, ``permission``, or
    ``None`` (not a fault of the database: a bad statement, a lock, a constraint)."""
    orig: Any = getattr(exc, "orig", None) or exc
    if getattr(exc, "connection_invalidated", False):
        return UNREACHABLE  # SQLAlchemy's dialect said: the connection is gone
    if isinstance(orig, OSError) and orig.errno in _OS_FAULTS:
        return _OS_FAULTS[orig.errno]
    module = type(orig).__module__.split(".")[0]
    if module == "psycopg":
        return _postgres_fault(orig)
    if module == "sqlite3":
        code = getattr(orig, "sqlite_errorcode", None)
        if isinstance(code, int):
            return _SQLITE_FAULTS.get(code & 0xFF)
        text = str(orig).lower()  # an older sqlite3 module without result codes
        if "database or disk is full" in text:
            return DISK_FULL
        return READ_ONLY if "readonly database" in text else None
    return None


_WHEN = {
    UNREACHABLE: "once the database is back",
    DISK_FULL: "once the ledger's disk has room again",
    READ_ONLY: "once the ledger can be written again",
    PERMISSION: "once the ledger may be written again",
}


def when_writable(cause: str) -> str:
    """When work a fault of ``cause`` stopped can go on ("once the ledger's disk has room again")."""
    return _WHEN.get(cause, "once the ledger works again")


def sqlite_fault(cause: str, database: str | None) -> str:
    """``cause`` for a SQLite ledger at ``database``, told apart by its file system: a file that
    cannot be opened or written on a read-only file system is ``read_only``, not ``permission``
    (root writes a 0444 file; only a read-only mount stops it)."""
    if cause not in (READ_ONLY, PERMISSION) or not database:
        return cause
    try:
        flags = os.statvfs(os.path.dirname(os.path.abspath(database))).f_flag
    except OSError:
        return cause
    return READ_ONLY if flags & os.ST_RDONLY else cause


def _postgres_fault(orig: Any) -> str | None:
    import psycopg

    state = getattr(orig, "sqlstate", None)
    if state in _PG_FAULTS:
        return _PG_FAULTS[state]
    if state in _PG_TRANSIENT or (isinstance(state, str) and state.startswith("08")):
        return UNREACHABLE  # 08xxx: connection_exception and its subclasses
    if state is None and isinstance(orig, psycopg.OperationalError):
        return UNREACHABLE  # no SQLSTATE: no server answered (refused, reset, timed out, gone)
    if isinstance(orig, psycopg.InterfaceError) and "closed" in str(orig).lower():
        return UNREACHABLE  # "the connection is closed": lost under a statement
    return None


def fault_message(cause: str, url: str, detail: str, *, waited_s: float = 0.0, sqlite: bool) -> str:
    """The plain sentence for a fault of the ledger at ``url`` (``detail``: the driver's words)."""
    if cause == UNREACHABLE:
        if waited_s > 0:
            return f"the database at {url} was unreachable for {waited_s:.0f} s ({detail})"
        return f"the database at {url} is unreachable ({detail})"
    what = "the ledger's disk" if cause == DISK_FULL else ("the ledger file" if sqlite else "the ledger")
    said = {
        DISK_FULL: f"{what} is full",
        READ_ONLY: f"{what} is read-only" if sqlite else "the ledger's database is read-only",
        PERMISSION: f"{what} may no longer be written (permission denied)",
    }[cause]
    return f"{said} ({url}: {detail})"


class Patience:
    """How long one engine waits for its database, and the outages it rode out.

    Threads of one process share it: the first that finds the server gone announces the pause
    (``on_pause``), the last that gets through again announces its end, and :attr:`outages`
    holds each pause's length. Once a wait ran out, later calls fail at once (no second wait
    for the same outage) until a call gets through again.
    """

    def __init__(self, seconds: float = DEFAULT_PATIENCE_S) -> None:
        self.seconds = float(seconds)
        self.on_pause: Callable[[str], None] | None = None
        """Called with one line when a pause begins and when it ends (the CLI prints it)."""
        self.outages: list[float] = []
        """Seconds of each pause ridden out (or given up on), oldest first."""
        self._lock = threading.Lock()
        self._waiting = 0
        self._since: float | None = None
        self._gave_up = False

    @property
    def unreachable_s(self) -> float:
        """Seconds the database was unreachable in all (the pause under way included)."""
        with self._lock:
            now = time.monotonic()
            return sum(self.outages) + (now - self._since if self._since is not None else 0.0)

    def wait(self, attempt: int, first_failure: float, *, url: str, detail: str, sqlite: bool) -> None:
        """Sleep before try ``attempt + 1`` (backoff with jitter), or raise
        :class:`LedgerFaultError` when the patience is spent (``first_failure``: monotonic time)."""
        now = time.monotonic()
        with self._lock:
            if self._gave_up and attempt == 1:  # this outage already outlasted the patience
                msg = fault_message(UNREACHABLE, url, detail, sqlite=sqlite)
                raise LedgerFaultError(msg, cause=UNREACHABLE, url=url)
            if attempt == 1:
                self._waiting += 1
                if self._since is None:
                    self._since = first_failure
                    self._say(
                        f"the database at {url} is unreachable ({detail}); waiting up to "
                        f"{self.seconds:g} s for it (--db-patience)"
                    )
            waited = now - first_failure
            if self._gave_up or waited >= self.seconds:
                self._gave_up = True
                self._leave(now)
                msg = fault_message(UNREACHABLE, url, detail, waited_s=waited, sqlite=sqlite)
                raise LedgerFaultError(msg, cause=UNREACHABLE, url=url, waited_s=waited)
        delay = min(BACKOFF_CAP_S, BACKOFF_FIRST_S * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
        time.sleep(max(0.0, min(delay, self.seconds - waited)))

    def through(self, attempts: int) -> None:
        """A call got through after ``attempts`` tries (1: no pause)."""
        with self._lock:
            self._gave_up = False
            if attempts > 1:
                self._leave(time.monotonic())

    def _leave(self, now: float) -> None:
        self._waiting = max(0, self._waiting - 1)
        if self._waiting == 0 and self._since is not None:
            took = now - self._since
            self.outages.append(took)
            self._since = None
            if not self._gave_up:
                self._say(f"the database is reachable again after {took:.1f} s; going on")

    def _say(self, line: str) -> None:
        if self.on_pause is not None:
            with contextlib.suppress(Exception):  # a printer must not break a write
                self.on_pause(line)
