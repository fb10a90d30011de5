"""Engines for the ledger: URL resolution, SQLite pragmas, write transactions, error mapping.

Every engine checks a pooled connection before handing it out (``pool_pre_ping``: a connection
a server restart cut is replaced without an error) and carries a :class:`~llm_connect.ledger.
_patience.Patience`: :func:`write` and :func:`read` run their work again while the server is
away, up to the patience, and a fault (a full disk, a read-only ledger) becomes
:class:`~llm_connect.errors.LedgerFaultError` (``_patience.py``).
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from llm_connect._json import strict_dumps
from llm_connect.errors import LedgerError, LedgerFaultError
from llm_connect.ledger._patience import (
    DEFAULT_PATIENCE_S,
    UNREACHABLE,
    Patience,
    fault_message,
    fault_of,
    sqlite_fault,
)

ENV_VAR = "LLM_CONNECT_DATABASE_URL"
DEFAULT_URL = "sqlite:///llm_connect.db"

#: Milliseconds a SQLite connection waits for another writer before giving up.
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: Bytes of a SQLite ledger file mapped into memory for reading.
SQLITE_MMAP_BYTES = 256 * 1024 * 1024
#: Attempts of one write transaction that meets "database is locked".
WRITE_ATTEMPTS = 8

_WRITE_OPTION = "llm_connect_write"
_PATIENCE_OPTION = "llm_connect_patience"
T = TypeVar("T")


def resolve_url(url: str | URL | None) -> URL:
    """The ledger URL: ``url``, else ``$LLM_CONNECT_DATABASE_URL``, else ``sqlite:///llm_connect.db``."""
    from_env = url is None and bool(os.environ.get(ENV_VAR))
    raw = url if url is not None else (os.environ.get(ENV_VAR) or DEFAULT_URL)
    try:
        parsed = make_url(raw)
    except ArgumentError:
        raise LedgerError(_not_a_url(str(raw), from_env=from_env)) from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise LedgerError(
            f"unsupported database {parsed.get_backend_name()!r} in {display_url(parsed)}: "
            "the ledger runs on SQLite (sqlite:///path.db) or PostgreSQL (postgresql+psycopg://...)"
        )
    if parsed.get_backend_name() == "sqlite" and parsed.host:
        # sqlite://ledger.db parses as host "ledger.db" and no database: an in-memory ledger
        path = parsed.host + (f"/{parsed.database}" if parsed.database else "")
        raise LedgerError(
            f"{display_url(parsed)} names no file (two slashes make {parsed.host!r} a host): "
            f"for a SQLite file use sqlite:///{path} (three slashes; four for an absolute path)"
        )
    return parsed


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def _not_a_url(raw: str, *, from_env: bool) -> str:
    """The message for a ledger URL that does not parse, with the URL that was probably meant."""
    what = f"${ENV_VAR} {raw!r}" if from_env else repr(raw)
    postgres = "PostgreSQL: postgresql+psycopg://user@host/db"
    scheme = _SCHEME.match(raw)
    meant_url = raw.lower().startswith(("sqlite", "postgres")) or "://" in raw
    if raw.strip() and not meant_url and (scheme is None or len(scheme.group()) == 2):  # a path, or C:\...
        return f"{what} is not a database URL; for a SQLite file use sqlite:///{raw.strip()} ({postgres})"
    return (
        f"{what} is not a database URL; a SQLite file is sqlite:///path/to/ledger.db "
        f"(four slashes for an absolute path; {postgres})"
    )


def display_url(url: URL) -> str:
    """``url`` as text with any password masked."""
    return url.render_as_string(hide_password=True)


def _is_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


# Every PostgreSQL session (unless the URL's options set them): a client that vanishes mid-transaction
# (killed, or cut off by a partition) has its session and row locks ended within ~10-30 s, not hours.
PG_SESSION_SETTINGS = {"idle_in_transaction_session_timeout": "30000", "tcp_keepalives_idle": "5"}
PG_SESSION_SETTINGS.update(tcp_keepalives_interval="2", tcp_keepalives_count="3", tcp_user_timeout="10000")
# libpq: the client notices a dead server the same way.
PG_CLIENT_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}
PG_CLIENT_KEEPALIVES["connect_timeout"] = 10


def _postgres_options(url: URL) -> str:
    """The URL's ``options`` with :data:`PG_SESSION_SETTINGS` added (the URL's own win)."""
    given = url.query.get("options")
    text = " ".join(given) if isinstance(given, tuple) else (given or "")
    extra = " ".join(f"-c {k}={v}" for k, v in PG_SESSION_SETTINGS.items() if k not in text)
    return f"{text} {extra}".strip()


def make_engine(url: URL, *, patience_s: float = DEFAULT_PATIENCE_S) -> Engine:
    """An engine for ``url`` with the ledger's connection settings; it waits up to ``patience_s``
    seconds for a database that went away (:func:`patience_of`)."""
    # pool_pre_ping: SQLAlchemy's pessimistic disconnect handling ("Dealing with Disconnects"):
    # a pooled connection that a server restart cut is found on checkout and replaced.
    kwargs: dict[str, Any] = {"json_serializer": strict_dumps, "pool_pre_ping": True}
    if url.get_backend_name() == "postgresql":
        keepalives = {k: v for k, v in PG_CLIENT_KEEPALIVES.items() if k not in url.query}
        kwargs["connect_args"] = {**keepalives, "options": _postgres_options(url)}
    if url.get_backend_name() == "sqlite":
        if _is_memory(url):
            kwargs["poolclass"] = StaticPool
            kwargs["connect_args"] = {"check_same_thread": False}
        else:
            kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
            if url.database:
                parent = os.path.dirname(os.path.abspath(url.database))
                if not os.path.isdir(parent):
                    raise LedgerError(f"cannot open {display_url(url)}: directory {parent!r} does not exist")
    try:
        engine = create_engine(url, **kwargs)
    except ImportError as exc:
        if url.get_backend_name() != "postgresql":
            raise LedgerError(f"cannot create an engine for {display_url(url)}: {exc}") from None
        driver = exc.name or url.get_driver_name()
        extra = "pip install 'llm-connect[postgres]'"
        how = extra if driver == "psycopg" else f"pip install {driver}, or postgresql+psycopg:// and {extra}"
        raise LedgerError(
            f"PostgreSQL needs the {driver} driver: {how} ({display_url(url)}: {exc})"
        ) from None
    except ArgumentError as exc:
        raise LedgerError(f"cannot create an engine for {display_url(url)}: {exc}") from None
    if url.get_backend_name() == "sqlite":
        _configure_sqlite(engine, memory=_is_memory(url))
    engine.update_execution_options(**{_PATIENCE_OPTION: Patience(patience_s)})
    return engine


def patience_of(engine: Engine) -> Patience:
    """The :class:`Patience` of a ledger engine (a fresh default one for an engine made elsewhere)."""
    found = engine.get_execution_options().get(_PATIENCE_OPTION)
    if isinstance(found, Patience):
        return found
    patience = Patience()
    engine.update_execution_options(**{_PATIENCE_OPTION: patience})
    return patience


def _configure_sqlite(engine: Engine, *, memory: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy emit BEGIN (see the "begin" listener), not the driver.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if not memory:
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute("PRAGMA synchronous = NORMAL")
                # Reads of large ledgers (routing, summaries) come from the OS page cache
                # directly instead of being copied into each connection's cache.
                cursor.execute(f"PRAGMA mmap_size = {SQLITE_MMAP_BYTES}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


class Store:
    """One concern's tables over the ledger's engine (each store module owns its tables)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine


def _is_locked(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "database is locked" in text or "database is busy" in text or "deadlock detected" in text


@contextmanager
def ledger_errors(what: str, url: URL, *, opening: bool = False) -> Iterator[None]:
    """Translate SQLAlchemy errors, and the database driver's own, raised inside the block into
    :class:`LedgerError`; a fault of the database (:func:`~llm_connect.ledger._patience.fault_of`:
    a full disk, a read-only ledger, a server gone) into :class:`LedgerFaultError`. ``opening``:
    the ledger is being opened, where a server that cannot be reached may be a wrong URL, so it
    stays a plain :class:`LedgerError`."""
    try:
        yield
    except Exception as exc:
        # SQLAlchemy's errors, and the driver's own for statements sent past SQLAlchemy
        if isinstance(exc, SQLAlchemyError):
            orig: object = exc.orig if isinstance(exc, DBAPIError) else exc
        elif _driver_error(exc):
            orig = exc
        else:
            raise
        detail = _first_line(orig)
        cause = fault_of(exc)
        if cause is not None and not (opening and cause == UNREACHABLE):
            sqlite = url.get_backend_name() == "sqlite"
            cause = sqlite_fault(cause, url.database) if sqlite else cause
            shown = display_url(url)
            message = fault_message(cause, shown, detail, sqlite=sqlite)
            raise LedgerFaultError(f"{what} failed: {message}", cause=cause, url=shown) from exc
        raise LedgerError(f"{what} failed on {display_url(url)}: {detail}") from exc


def _first_line(orig: object) -> str:
    return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__


def _driver_error(exc: BaseException) -> bool:
    """An error of the database driver itself (statements sent past SQLAlchemy: raw reads,
    pipelined writes): sqlite3's, or psycopg's (which carry an SQLSTATE attribute)."""
    import sqlite3

    if isinstance(exc, sqlite3.Error):
        return True
    return type(exc).__module__.split(".")[0] == "psycopg" and hasattr(exc, "sqlstate")


def dialect_insert(dialect: str, table: Any) -> Any:
    """``INSERT`` into ``table`` for ``dialect`` (``sqlite`` or ``postgresql``), with its
    ``on_conflict_do_nothing`` / ``on_conflict_do_update``."""
    # Imported here: the postgresql package loads every PostgreSQL driver's dialect (~50 ms).
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


@contextmanager
def driver_cursor(conn: Connection, what: str) -> Iterator[Any]:
    """A cursor of the driver's own connection under ``conn`` (``sqlite3`` or ``psycopg``), in
    ``conn``'s transaction, for what SQLAlchemy has no call for (psycopg's ``executemany`` with
    ``returning=True``); ``what`` names the statement in errors."""
    dbapi = conn.connection.driver_connection
    module: Any = conn.dialect.loaded_dbapi
    cursor = dbapi.cursor()  # type: ignore[union-attr]
    try:
        yield cursor
    except module.Error as exc:
        disconnected = conn.dialect.is_disconnect(exc, dbapi, cursor)
        if disconnected:
            conn.invalidate(exc)
        options: dict[str, Any] = {
            "hide_parameters": True,
            "connection_invalidated": disconnected,
            "dialect": conn.dialect,
        }
        raise DBAPIError.instance(what, None, exc, module.Error, **options) from exc
    finally:
        if not conn.invalidated:
            cursor.close()


def _connect(engine: Engine, what: str) -> Connection:
    """``engine.connect()``, waiting (up to the engine's patience) for a server that is away."""
    patience = patience_of(engine)
    attempt, first = 0, 0.0
    while True:
        attempt += 1
        try:
            conn = engine.connect()
        except DBAPIError as exc:
            if fault_of(exc) != UNREACHABLE:
                raise
            first = first or time.monotonic()
            sqlite = engine.dialect.name == "sqlite"
            patience.wait(
                attempt, first, url=display_url(engine.url), detail=_first_line(exc.orig), sqlite=sqlite
            )
            continue
        patience.through(attempt)
        return conn


@contextmanager
def reading(engine: Engine, what: str, postgres_isolation: str = "AUTOCOMMIT") -> Iterator[Connection]:
    """A connection for one-statement reads, errors translated (:func:`ledger_errors`): autocommit
    on PostgreSQL (no BEGIN/ROLLBACK round trips; a single statement sees one snapshot anyway), a
    deferred ``BEGIN`` on SQLite. Reads of several statements in one snapshot ask PostgreSQL for
    ``REPEATABLE READ`` and begin a transaction. Getting the connection waits for a server that is
    away (up to the patience); a read cut off under way is not run again (:func:`read` is)."""
    with ledger_errors(what, engine.url), _connect(engine, what) as conn:
        if engine.dialect.name == "postgresql":
            conn.execution_options(isolation_level=postgres_isolation)
        yield conn


def read(
    engine: Engine, what: str, fn: Callable[[Connection], T], postgres_isolation: str = "AUTOCOMMIT"
) -> T:
    """``fn(connection)`` as :func:`reading` runs it, run again from the start while the server
    is away (up to the patience): for the reads a run makes while it goes on (claims, status)."""
    return patiently(engine, what, lambda: _read_once(engine, what, fn, postgres_isolation))


def _read_once(engine: Engine, what: str, fn: Callable[[Connection], T], isolation: str) -> T:
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execution_options(isolation_level=isolation)
        return fn(conn)


def write(engine: Engine, what: str, fn: Callable[[Connection], T]) -> T:
    """Run ``fn(connection)`` in one write transaction, committed when it returns, errors
    translated (:func:`ledger_errors`). One that meets "database is locked" is run again, and so is
    one that meets a server gone away (up to the patience; ``fn`` must be safe to run twice, as
    every ledger write is: see ``_patience.py``)."""

    def once() -> T:
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with engine.connect() as conn:
                    conn = conn.execution_options(**{_WRITE_OPTION: True})
                    with conn.begin():
                        return fn(conn)
            except OperationalError as exc:
                if attempt == WRITE_ATTEMPTS or not _is_locked(exc):
                    raise
                time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.0))
        raise AssertionError("unreachable")  # pragma: no cover

    return patiently(engine, what, once)


def patiently(engine: Engine, what: str, once: Callable[[], T]) -> T:
    """``once()`` (work through ``engine`` that may be run again from the start), errors
    translated (:func:`ledger_errors`), run again while the database is unreachable (backoff
    with jitter, up to the engine's patience; then :class:`LedgerFaultError`): the ledger's
    writes and a run's reads, and every answer of a long-lived reader such as ``view``."""
    patience = patience_of(engine)
    attempt, first = 0, 0.0
    with ledger_errors(what, engine.url):
        while True:
            attempt += 1
            try:
                result = once()
            except DBAPIError as exc:
                if fault_of(exc) != UNREACHABLE:
                    raise
                first = first or time.monotonic()
                url, sqlite = display_url(engine.url), engine.dialect.name == "sqlite"
                try:
                    patience.wait(attempt, first, url=url, detail=_first_line(exc.orig), sqlite=sqlite)
                except LedgerFaultError as fault:
                    raise LedgerFaultError(
                        f"{what} failed: {fault}", cause=fault.cause, url=url, waited_s=fault.waited_s
                    ) from exc
                continue
            patience.through(attempt)
            return result
