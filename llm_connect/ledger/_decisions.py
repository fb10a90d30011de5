"""The decisions store: routing decisions kept for audit (``routing_decisions``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Table, func, select

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

    def record_decision(self, decision: RoutingDecision, *, slices: Mapping[str, Any] | None = None) -> int:
        """Store a routing decision for audit; returns its id. ``slices`` (``Router.decide_slices``:
        ``SliceDecisions.slices_dict()``) is stored with it, its ``slice_by`` and ``length_cuts``
        also in the parameters (the ledger's ``SliceStore`` reads the cut points back)."""
        data = decision.to_dict()
        if slices is not None:
            fixed = {k: slices[k] for k in ("slice_by", "length_cuts") if k in slices}
            data = data | {"parameters": data["parameters"] | fixed, "slices": dict(slices)}
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

    def latest_watch(self, task: str, baseline: str) -> tuple[int, str, Any, Any] | None:
        """The newest stored decision of ``task`` against ``baseline``: its id, chosen model, and
        what it says of the watch (``routed_since``, ``rollback``, as stored JSON or ``None``).
        One indexed row read (``ix_routing_decisions_task``); the evidence is not parsed."""
        c = DECISIONS.c
        stmt = (
            select(c.id, c.chosen_model, c.evidence["routed_since"], c.evidence["rollback"])
            .where(c.task == task, c.baseline_model == baseline)
            .order_by(c.created_at.desc(), c.id.desc())
            .limit(1)
        )
        with reading(self.engine, "reading the newest routing decision") as conn:
            row = conn.execute(stmt).first()
        return None if row is None else (int(row[0]), str(row[1]), row[2], row[3])

    def grade_watermark(self) -> int:
        """The newest grade's id (0 in an empty ledger): cases graded later have larger ids."""
        from llm_connect.ledger._models import Grade

        grades = cast(Table, Grade.__table__)
        with reading(self.engine, "reading the newest grade id") as conn:
            return int(conn.execute(select(func.coalesce(func.max(grades.c.id), 0))).scalar_one())
