"""Small PostgreSQL transactions sent in one round trip (psycopg pipeline mode).

``Router.decide`` stores every decision with the evidence it computed. Through
SQLAlchemy that transaction is five round trips (``BEGIN``, ``SET LOCAL``, the
snapshot upsert, the insert, ``COMMIT``); while a fleet of workers keeps both
cores busy each round trip waits for the server process to be scheduled, and
the write was most of what a decision cost (4.7 ms median of 12.5 ms measured by
``scripts/bench/fleet_decide.py``). Here the same statements are queued in
pipeline mode and sent together: one round trip, the same single transaction.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Engine

from llm_connect.ledger._engine import WRITE_ATTEMPTS, read_connection

__all__ = ["pg_record_decision"]

_DECISION_COLUMNS = (
    "created_at",
    "task",
    "baseline_model",
    "chosen_model",
    "reason",
    "grader_ids",
    "parameters",
    "evidence",
    "llm_connect_version",
)
_DECISION_JSON = frozenset({"grader_ids", "parameters", "evidence"})
_SNAPSHOT_KEY = ("task", "baseline_model", "grader_id", "candidate_model", "settings")
_SNAPSHOT_VALUES = ("version_n", "version_sum", "version_sum_sq", "evidence", "updated_at")


def _placeholders(columns: Sequence[str], json_columns: frozenset[str]) -> str:
    return ", ".join("%s::json" if c in json_columns else "%s" for c in columns)


_INSERT_DECISION = (
    f"INSERT INTO routing_decisions ({', '.join(_DECISION_COLUMNS)}) "
    f"VALUES ({_placeholders(_DECISION_COLUMNS, _DECISION_JSON)}) RETURNING id"
)
_UPSERT_SNAPSHOT = (
    f"INSERT INTO evidence_snapshots ({', '.join((*_SNAPSHOT_KEY, *_SNAPSHOT_VALUES))}) "
    f"VALUES ({_placeholders((*_SNAPSHOT_KEY, *_SNAPSHOT_VALUES), frozenset({'evidence'}))}) "
    f"ON CONFLICT ({', '.join(_SNAPSHOT_KEY)}) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in _SNAPSHOT_VALUES)
)


def _deadlock(exc: BaseException) -> bool:
    return getattr(exc, "sqlstate", None) == "40P01"


def pg_record_decision(
    engine: Engine, decision: Mapping[str, Any], snapshots: Sequence[Mapping[str, Any]]
) -> int:
    """Insert one ``routing_decisions`` row and upsert its evidence snapshots in one transaction,
    sent in one round trip; returns the decision's id.

    ``decision`` and ``snapshots`` are rows as the ORM tables take them (JSON columns as Python
    values). The decision is an audit row: it skips waiting for the WAL flush, as the ORM
    path did. A deadlock between two deciders upserting the same snapshots is retried (the
    rows go in key order, so it needs a writer that does not). Driver errors propagate (the
    caller's :func:`~llm_connect.ledger._engine.ledger_errors` names them).
    """
    decision_params = tuple(
        json.dumps(decision[c], allow_nan=False) if c in _DECISION_JSON else decision[c]
        for c in _DECISION_COLUMNS
    )
    snapshot_params = [
        (
            *(row[c] for c in _SNAPSHOT_KEY),
            *(row[c] for c in _SNAPSHOT_VALUES[:3]),
            json.dumps(row["evidence"], allow_nan=False),
            row["updated_at"],
        )
        for row in sorted(snapshots, key=lambda r: tuple(r[c] for c in _SNAPSHOT_KEY))
    ]
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        with read_connection(engine) as conn:  # autocommit: the transaction is spelled out below
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
