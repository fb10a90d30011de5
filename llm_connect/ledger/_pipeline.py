"""Small PostgreSQL transactions sent in one round trip (psycopg pipeline mode)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import JSON, Engine, Table
from sqlalchemy.dialects.postgresql.psycopg import dialect as psycopg_dialect

from llm_connect.ledger._decisions import DECISIONS, SNAPSHOTS, snapshot_upsert
from llm_connect.ledger._engine import WRITE_ATTEMPTS, reading
from llm_connect.ledger._models import SNAPSHOT_KEY


def _compiled(stmt: Any, table: Table) -> str:
    """The store's own ``stmt`` as psycopg takes it: ``%(column)s`` parameters (cast by type)
    for every column but ``id``."""
    keys = [c.name for c in table.columns if c.name != "id"]
    return str(stmt.compile(dialect=psycopg_dialect(), column_keys=keys))  # type: ignore[no-untyped-call]


_INSERT_DECISION = _compiled(DECISIONS.insert().returning(DECISIONS.c.id), DECISIONS)
_UPSERT_SNAPSHOT = _compiled(snapshot_upsert("postgresql"), SNAPSHOTS)
_JSON = {
    t.name: frozenset(c.name for c in t.columns if isinstance(c.type, JSON)) for t in (DECISIONS, SNAPSHOTS)
}


def _params(row: Mapping[str, Any], table: Table) -> dict[str, Any]:
    """``row`` with its JSON columns serialised (as the ORM's JSON type does)."""
    return {k: json.dumps(v, allow_nan=False) if k in _JSON[table.name] else v for k, v in row.items()}


def _deadlock(exc: BaseException) -> bool:
    return getattr(exc, "sqlstate", None) == "40P01"


def pg_record_decision(
    engine: Engine, decision: Mapping[str, Any], snapshots: Sequence[Mapping[str, Any]]
) -> int:
    """Insert one ``routing_decisions`` row and upsert its evidence snapshots in one transaction,
    sent in one round trip; returns the decision's id (errors as :class:`LedgerError`)."""
    decision_params = _params(decision, DECISIONS)
    ordered = sorted(snapshots, key=lambda r: tuple(r[c] for c in SNAPSHOT_KEY))
    snapshot_params = [_params(row, SNAPSHOTS) for row in ordered]
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        # autocommit: the transaction is spelled out below
        with reading(engine, "recording a routing decision") as conn:
            raw: Any = conn.connection.dbapi_connection
            control, insert = raw.cursor(), raw.cursor()
            try:
                with raw.pipeline():
                    control.execute("BEGIN")
                    control.execute("SET LOCAL synchronous_commit = off")
                    if snapshot_params:
                        control.executemany(_UPSERT_SNAPSHOT, snapshot_params)
                    insert.execute(_INSERT_DECISION, decision_params)
                    control.execute("COMMIT")
                row = insert.fetchone()
                return int(row[0])
            except Exception as exc:
                # An error aborts the rest of the pipeline (COMMIT included): end the
                # transaction before the connection goes back to the pool.
                try:
                    if raw.info.transaction_status != 0:  # not IDLE
                        raw.execute("ROLLBACK")
                except Exception:
                    conn.invalidate()  # a broken connection is not returned to the pool
                if attempt == WRITE_ATTEMPTS or not _deadlock(exc):
                    raise
            finally:
                control.close()
                insert.close()
        time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.0))
    raise AssertionError("unreachable")  # pragma: no cover
