"""Small PostgreSQL transactions sent in one round trip (psycopg pipeline mode), and the two
statements the decisions store shares with it (``_decisions.py`` imports this module, never the
other way round)."""

from __future__ import annotations

import functools
import json
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import JSON, Engine, Table

from llm_connect.ledger._engine import WRITE_ATTEMPTS, dialect_insert, reading
from llm_connect.ledger._models import SNAPSHOT_KEY, SNAPSHOT_VALUES, EvidenceSnapshot, RoutingDecisionRecord

DECISIONS = cast(Table, RoutingDecisionRecord.__table__)
SNAPSHOTS = cast(Table, EvidenceSnapshot.__table__)
_JSON = {
    t.name: frozenset(c.name for c in t.columns if isinstance(c.type, JSON)) for t in (DECISIONS, SNAPSHOTS)
}


def snapshot_upsert(dialect: str) -> Any:
    """The upsert of evidence snapshots (newest wins) for ``dialect``."""
    insert = dialect_insert(dialect, SNAPSHOTS)
    set_ = {c: insert.excluded[c] for c in SNAPSHOT_VALUES}
    return insert.on_conflict_do_update(index_elements=list(SNAPSHOT_KEY), set_=set_)


@functools.cache
def _statements() -> tuple[str, str]:
    """The decision insert and the snapshot upsert as psycopg takes them: ``%(column)s``
    parameters (cast by type) for every column but ``id`` (compiled on first use: the dialect
    module stays out of ``import llm_connect``)."""
    from sqlalchemy.dialects.postgresql.psycopg import dialect

    def compiled(stmt: Any, table: Table) -> str:
        keys = [c.name for c in table.columns if c.name != "id"]
        return str(stmt.compile(dialect=dialect(), column_keys=keys))  # type: ignore[no-untyped-call]

    return (
        compiled(DECISIONS.insert().returning(DECISIONS.c.id), DECISIONS),
        compiled(snapshot_upsert("postgresql"), SNAPSHOTS),
    )


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
    insert_decision, upsert_snapshot = _statements()
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
                        control.executemany(upsert_snapshot, snapshot_params)
                    insert.execute(insert_decision, decision_params)
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
