"""Small PostgreSQL transactions sent in one round trip (psycopg pipeline mode)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import JSON, Engine, Table

from llm_connect.ledger._engine import WRITE_ATTEMPTS, reading
from llm_connect.ledger._models import SNAPSHOT_KEY, SNAPSHOT_VALUES, EvidenceSnapshot, RoutingDecisionRecord

_DECISIONS = cast(Table, RoutingDecisionRecord.__table__)
_DECISION_COLUMNS = tuple(c.name for c in _DECISIONS.columns if c.name != "id")
_SNAPSHOT_COLUMNS = (*SNAPSHOT_KEY, *SNAPSHOT_VALUES)
_DECISION_JSON, _SNAPSHOT_JSON = (
    frozenset(c.name for c in cast(Table, t.__table__).columns if isinstance(c.type, JSON))
    for t in (RoutingDecisionRecord, EvidenceSnapshot)
)


def _placeholders(columns: Sequence[str], json_columns: frozenset[str]) -> str:
    return ", ".join("%s::json" if c in json_columns else "%s" for c in columns)


def _values(row: Mapping[str, Any], columns: Sequence[str], json_columns: frozenset[str]) -> tuple[Any, ...]:
    """``row``'s values in ``columns`` order, JSON columns serialised (as the ORM's JSON type does)."""
    return tuple(json.dumps(row[c], allow_nan=False) if c in json_columns else row[c] for c in columns)


# The tables' own column lists: a column added to either table is written here too.
_INSERT_DECISION = (
    f"INSERT INTO routing_decisions ({', '.join(_DECISION_COLUMNS)}) "
    f"VALUES ({_placeholders(_DECISION_COLUMNS, _DECISION_JSON)}) RETURNING id"
)
_UPSERT_SNAPSHOT = (
    f"INSERT INTO evidence_snapshots ({', '.join(_SNAPSHOT_COLUMNS)}) "
    f"VALUES ({_placeholders(_SNAPSHOT_COLUMNS, _SNAPSHOT_JSON)}) "
    f"ON CONFLICT ({', '.join(SNAPSHOT_KEY)}) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in SNAPSHOT_VALUES)
)


def _deadlock(exc: BaseException) -> bool:
    return getattr(exc, "sqlstate", None) == "40P01"


def pg_record_decision(
    engine: Engine, decision: Mapping[str, Any], snapshots: Sequence[Mapping[str, Any]]
) -> int:
    """Insert one ``routing_decisions`` row and upsert its evidence snapshots in one transaction,
    sent in one round trip; returns the decision's id (errors as :class:`LedgerError`)."""
    decision_params = _values(decision, _DECISION_COLUMNS, _DECISION_JSON)
    snapshot_params = [
        _values(row, _SNAPSHOT_COLUMNS, _SNAPSHOT_JSON)
        for row in sorted(snapshots, key=lambda r: tuple(r[c] for c in SNAPSHOT_KEY))
    ]
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
