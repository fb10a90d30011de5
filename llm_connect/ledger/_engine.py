"""Engines for the ledger: URL resolution, SQLite pragmas, write transactions, error mapping."""

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
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from llm_connect._json import strict_dumps
from llm_connect.errors import LedgerError

ENV_VAR = "LLM_CONNECT_DATABASE_URL"
DEFAULT_URL = "sqlite:///llm_connect.db"

#: Milliseconds a SQLite connection waits for another writer before giving up.
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: Bytes of a SQLite ledger file mapped into memory for reading.
SQLITE_MMAP_BYTES = 256 * 1024 * 1024
#: Seconds a pooled PostgreSQL connection may sit idle before it is pinged on checkout.
PG_IDLE_PING_S = 5.0
#: Attempts of one write transaction that meets "database is locked".
WRITE_ATTEMPTS = 8

_WRITE_OPTION = "llm_connect_write"
_LAST_USED = "llm_connect_last_used"
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


def make_engine(url: URL) -> Engine:
    """An engine for ``url`` with the ledger's connection settings."""
    kwargs: dict[str, Any] = {"json_serializer": strict_dumps}
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
    else:
        _configure_postgres(engine)
    return engine


def _configure_postgres(engine: Engine) -> None:
    """Ping a pooled connection before use only when it sat idle (a server restart,
    an idle timeout): back-to-back calls (routing) pay no extra round trip."""

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info[_LAST_USED] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        last = record.info.get(_LAST_USED)
        if last is None or time.monotonic() - last < PG_IDLE_PING_S:
            return
        try:
            dbapi_connection.execute("SELECT 1")
            dbapi_connection.rollback()
        except Exception as exc:
            raise DisconnectionError(f"stale pooled connection: {exc}") from exc


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
def ledger_errors(what: str, url: URL) -> Iterator[None]:
    """Translate SQLAlchemy errors, and the database driver's own, raised inside the block into
    :class:`LedgerError`."""
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
        detail = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
        raise LedgerError(f"{what} failed on {display_url(url)}: {detail}") from exc


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


@contextmanager
def reading(engine: Engine, what: str, postgres_isolation: str = "AUTOCOMMIT") -> Iterator[Connection]:
    """A connection for one-statement reads, errors translated (:func:`ledger_errors`): autocommit
    on PostgreSQL (no BEGIN/ROLLBACK round trips; a single statement sees one snapshot anyway), a
    deferred ``BEGIN`` on SQLite. Reads of several statements in one snapshot ask PostgreSQL for
    ``REPEATABLE READ`` and begin a transaction."""
    with ledger_errors(what, engine.url), engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execution_options(isolation_level=postgres_isolation)
        yield conn


def write(engine: Engine, what: str, fn: Callable[[Connection], T]) -> T:
    """Run ``fn(connection)`` in one write transaction, committed when it returns, errors
    translated (:func:`ledger_errors`); one that meets "database is locked" is run again."""
    with ledger_errors(what, engine.url):
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
