"""The decisions store: routing decisions kept for audit (``routing_decisions``), and the
evidence they computed (``evidence_snapshots``), read back while a group's totals are unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select

from llm_connect._version import __version__
from llm_connect.ledger._cases import fetch, json_value
from llm_connect.ledger._engine import Store, reading, write
from llm_connect.ledger._models import SNAPSHOT_KEY, SNAPSHOT_VALUES
from llm_connect.ledger._pipeline import DECISIONS, pg_record_decision, snapshot_upsert
from llm_connect.ledger._runs import finite_json
from llm_connect.types import utcnow

if TYPE_CHECKING:
    from llm_connect.values import RoutingDecision

__all__ = ["DecisionStore", "evidence_snapshot_rows", "write_evidence_snapshots"]


class DecisionStore(Store):
    """Routing decisions and the evidence snapshots stored with them."""

    def record_decision(
        self,
        decision: RoutingDecision,
        *,
        evidence_snapshots: Sequence[tuple[str, str, Sequence[Any], Any]] = (),
        snapshot_settings: str = "",
    ) -> int:
        """Store a routing decision for audit; returns its id.

        ``evidence_snapshots`` ((candidate, grader id, (n, Σ, Σ²), evidence JSON) under
        ``snapshot_settings``) are upserted in the same transaction (see
        :meth:`evidence_snapshots`).
        """
        data = decision.to_dict()
        row = {
            "created_at": decision.created_at,
            "task": decision.task,
            "baseline_model": decision.baseline,
            "chosen_model": decision.model,
            "reason": decision.reason,
            "grader_ids": list(decision.grader_ids),
            "parameters": finite_json(data["parameters"], "decision parameters"),
            "evidence": finite_json(data, "decision evidence"),
            "llm_connect_version": __version__,
        }

        def insert(conn: Connection) -> int:
            if conn.dialect.name == "postgresql":
                # An audit row: skip waiting for the WAL flush (a server crash may lose the
                # last fraction of a second of decisions, never corrupt them).
                conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
            write_evidence_snapshots(conn, snapshots)
            return int(conn.execute(DECISIONS.insert().returning(DECISIONS.c.id), row).scalar_one())

        snapshots = evidence_snapshot_rows(
            decision.task, decision.baseline, snapshot_settings, evidence_snapshots
        )
        if self.engine.dialect.driver == "psycopg":
            # The same transaction in one round trip (it is most of what a decision costs).
            return pg_record_decision(self.engine, row, snapshots)
        return write(self.engine, "recording a routing decision", insert)

    def decisions(self, task: str | None = None, *, limit: int | None = None) -> list[RoutingDecision]:
        """Stored routing decisions, oldest first (the newest ``limit`` when given)."""
        from llm_connect.values import RoutingDecision

        stmt = select(DECISIONS.c.id, DECISIONS.c.evidence).order_by(DECISIONS.c.id.desc())
        if task is not None:
            stmt = stmt.where(DECISIONS.c.task == task)
        if limit is not None:
            stmt = stmt.limit(limit)
        with reading(self.engine, "reading routing decisions") as conn:
            recs = conn.execute(stmt).all()
        return [RoutingDecision.from_dict(evidence, decision_id=rid) for rid, evidence in reversed(recs)]

    def evidence_snapshots(
        self, *, task: str, baseline_model: str, settings: str
    ) -> dict[tuple[str, str], tuple[tuple[int, float, float], dict[str, Any]]]:
        """Stored evidence of (task, baseline, settings): (candidate, grader id) -> (version, JSON).

        Written by :meth:`record_decision` (``evidence_snapshots=``); routing uses an entry only
        while its version equals the group's current running totals.
        """
        sql = (
            "SELECT candidate_model, grader_id, version_n, version_sum, version_sum_sq, evidence "
            "FROM evidence_snapshots WHERE task = %s AND baseline_model = %s AND settings = %s"
        )
        with reading(self.engine, "reading evidence snapshots") as conn:
            records = fetch(conn, sql, (task, baseline_model, settings))
        return {(r[0], r[1]): ((int(r[2]), float(r[3]), float(r[4])), json_value(r[5])) for r in records}


def evidence_snapshot_rows(
    task: str, baseline_model: str, settings: str, snapshots: Sequence[tuple[str, str, Sequence[Any], Any]]
) -> list[dict[str, Any]]:
    """Rows for :func:`write_evidence_snapshots`: (candidate, grader id, (n, Σ, Σ²), evidence JSON)."""
    now, columns, rows = utcnow(), (*SNAPSHOT_KEY, *SNAPSHOT_VALUES), []
    for candidate, grader, v, evidence in snapshots:
        version = (int(v[0]), float(v[1]), float(v[2]))
        values = (task, baseline_model, grader, candidate, settings, *version, evidence, now)
        rows.append(dict(zip(columns, values, strict=True)))
    return rows


def write_evidence_snapshots(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Upsert evidence snapshots within ``conn``'s transaction (newest wins)."""
    if rows:
        conn.execute(snapshot_upsert(conn.dialect.name), rows)
