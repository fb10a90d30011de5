"""Alembic migrations, run from code over an existing connection."""

from __future__ import annotations

import ast
import importlib.resources
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.engine import URL

from llm_connect._version import __version__
from llm_connect.errors import LedgerError, SchemaVersionError
from llm_connect.ledger._engine import display_url, ledger_errors, make_engine, resolve_url, write

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory


# Any constant works; it only has to be the same in every process.
_PG_MIGRATION_LOCK = 0x4C4C4D43  # "LLMC"

# A script's ``revision: str = "0002_grade_stats"`` and ``down_revision: str | None = ...`` lines
_REVISION_LINE = re.compile(r"^(revision|down_revision)\b[^=\n]*=(.*)$", re.MULTILINE)


def migrations_dir() -> Path:
    """Where the Alembic scripts are: inside the installed wheel, else the source tree."""
    packaged = importlib.resources.files("llm_connect") / "_migrations"
    if packaged.is_dir():
        return Path(str(packaged))
    source = Path(__file__).resolve().parents[2] / "migrations"  # the source tree's migrations/
    if not (source / "env.py").is_file():
        raise LedgerError(f"the ledger's migration scripts are missing (looked in {packaged} and {source})")
    return source


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic ``Config`` for the ledger's scripts, bound to ``connection`` when given."""
    import sys

    from alembic.config import Config

    # Alembic's default stdout is the sys.stdout of the moment alembic was imported, which may
    # be a stream closed since (a CLI runner's buffer): always hand it the current one.
    cfg = Config(stdout=sys.stdout)
    cfg.set_main_option("script_location", str(migrations_dir()))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


@lru_cache(maxsize=1)
def _script_directory() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The newest revision this version of llm-connect knows (Alembic's ``ScriptDirectory``)."""
    head = _script_directory().get_current_head()
    if head is None:  # pragma: no cover - the package ships its scripts
        raise LedgerError("the ledger's migration scripts define no revision")
    return str(head)


def _revision_of(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    heads = MigrationContext.configure(conn).get_current_heads()
    if len(heads) > 1:
        raise SchemaVersionError(f"the database has several schema revisions {heads}; expected one")
    return heads[0] if heads else None


def _check_known(conn: Connection, revision: str | None, url: URL) -> None:
    if revision is None:
        if inspect(conn).has_table("grades"):
            raise SchemaVersionError(
                f"{display_url(url)} has a grades table but no llm-connect schema revision; "
                "it was not created by llm-connect"
            )
        return
    script = _script_directory()
    try:
        known = script.get_revision(revision)
    except Exception:  # alembic raises several kinds for an unknown id
        known = None
    if known is None:
        raise SchemaVersionError(
            f"{display_url(url)} is at schema revision {revision!r}, which this version of llm-connect "
            f"({__version__}, head {head_revision()!r}) does not know; it was probably "
            "written by a newer llm-connect. Upgrade llm-connect; the database was not changed."
        )


@contextmanager
def _engine(url: str | URL | None) -> Iterator[tuple[Engine, URL]]:
    """An engine for ``url`` (resolved), disposed after the block."""
    parsed = resolve_url(url)
    engine = make_engine(parsed)
    try:
        yield engine, parsed
    finally:
        engine.dispose()


def current_revision(url: str | URL | None = None) -> str | None:
    """The schema revision of the database at ``url`` (``None`` when never migrated)."""
    what = "reading the schema revision"
    with _engine(url) as (engine, parsed), ledger_errors(what, parsed), engine.connect() as conn:
        return _revision_of(conn)


def _upgrade_locked(conn: Connection, url: URL) -> str:
    from alembic import command

    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
    revision = _revision_of(conn)
    _check_known(conn, revision, url)
    head = head_revision()
    if revision != head:
        command.upgrade(alembic_config(conn), "head")
    return head


@lru_cache(maxsize=1)
def _scripts_head() -> str | None:
    """The head revision read from the scripts' text (each one's ``revision`` and ``down_revision``
    lines), without importing Alembic (~0.2 s); ``None`` where that is not plain (a line missing or
    not a literal, a merge, several heads): then only Alembic (:func:`head_revision`) answers."""
    revisions: set[str] = set()
    parents: set[str | None] = set()
    for path in (migrations_dir() / "versions").glob("*.py"):
        if path.name.startswith((".#", "__init__")):  # the files Alembic skips
            continue
        try:
            lines = dict(_REVISION_LINE.findall(path.read_text(encoding="utf-8")))
            revision, parent = (ast.literal_eval(lines[k].strip()) for k in ("revision", "down_revision"))
        except (OSError, KeyError, ValueError, SyntaxError):  # ValueError: a bad encoding too
            return None
        if not isinstance(revision, str) or not (parent is None or isinstance(parent, str)):
            return None
        revisions.add(revision)
        parents.add(parent)
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _at_head(conn: Connection) -> str | None:
    """The head revision when the database is at it (alone), read with plain SQL and the scripts'
    text (:func:`_scripts_head`): no Alembic import. ``None`` otherwise, or when unsure."""
    head = _scripts_head()
    if head is None or not inspect(conn).has_table("alembic_version"):
        return None
    stored = [row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))]
    return head if stored == [head] else None


def ensure_schema(engine: Engine, url: URL, *, auto_migrate: bool) -> str:
    """Bring the database to head (or check it is there). Returns the revision."""
    with ledger_errors("reading the schema revision", url, opening=True), engine.connect() as conn:
        if (at_head := _at_head(conn)) is not None:  # the common case: nothing to check or migrate
            conn.rollback()
            return at_head
        head = head_revision()
        revision = _revision_of(conn)
        # No revision yet and migrating: another process may be migrating right now, so whether
        # a foreign grades table exists is only decided under the migration lock (_upgrade_locked).
        if revision is not None or not auto_migrate:
            _check_known(conn, revision, url)
        conn.rollback()
    if revision == head:
        return head
    if not auto_migrate:
        state = "has no llm-connect schema" if revision is None else f"is at revision {revision!r}"
        raise LedgerError(
            f"{display_url(url)} {state}; the current schema is {head!r}. "
            f"Run `llm-connect db upgrade --db {display_url(url)}` first."
        )
    return write(engine, "migrating the ledger", lambda conn: _upgrade_locked(conn, url))


def upgrade(url: str | URL | None = None) -> str:
    """Migrate the database at ``url`` to the newest revision; returns that revision."""
    with _engine(url) as (engine, parsed):
        return ensure_schema(engine, parsed, auto_migrate=True)
