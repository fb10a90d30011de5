"""The decisions store: routing decisions kept for audit (``routing_decisions``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from sqlalchemy import Connection, Table, select

from llm_connect._version import __version__
from llm_connect.ledger._engine import Store, reading, write
from llm_connect.ledger._models import RoutingDecisionRecord
from llm_connect.ledger._runs import finite_json

if TYPE_CHECKING:
    from llm_connect.values import RoutingDecision

__all__ = ["DecisionStore"]

DECISIONS = cast(Table, RoutingDecisionRecord.__table__)


class DecisionStore(Store):
    """Routing decisions, kept for audit with the evidence and the policy they were made under."""

    def record_decision(self, decision: RoutingDecision) -> int:
        """Store a routing decision for audit; returns its id."""
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
            return int(conn.execute(DECISIONS.insert().returning(DECISIONS.c.id), row).scalar_one())

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
