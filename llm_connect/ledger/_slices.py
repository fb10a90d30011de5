"""What slicing a task reads (issue 38): each graded case's tags, metadata, tools and prompt
length, and the length quartiles a task's first slice decision fixed.

No table of its own. A case's attributes are those of its first grade in each group
(``case_stats.first_id``), so one read per decision joins the task's case rows to their first
grades (and to the stored conversation, for the tools it offered). The ``length`` cut points
are kept in the ``parameters`` of the first stored decision that sliced the task by length
(``routing_decisions``, written by :class:`~llm_connect.ledger._decisions.DecisionStore`); later
decisions read them back, so the quartiles do not move as cases arrive.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, Text, and_, func, null, select
from sqlalchemy import cast as sql_cast

from llm_connect.ledger._engine import Store, reading
from llm_connect.ledger._models import CaseStats, ConversationRecord, Grade, RoutingDecisionRecord

__all__ = ["CaseAttributes", "SliceStore"]

_GRADES = cast(Table, Grade.__table__)
_CASES = cast(Table, CaseStats.__table__)
_CONVERSATIONS = cast(Table, ConversationRecord.__table__)
_DECISIONS = cast(Table, RoutingDecisionRecord.__table__)
CUTS_KEY = "length_cuts"
"""The key of a stored decision's ``parameters`` that holds the length quartiles' cut points."""


@dataclass(frozen=True, slots=True)
class CaseAttributes:
    """One case of one group (task, baseline, grader, candidate), as its first grade recorded it."""

    first_id: int
    candidate_model: str
    grader_id: str
    case_key: str
    """The case id, else the prompt's digest (``case_stats.case_key``)."""
    tags: tuple[str, ...]
    metadata: dict[str, Any] | None
    prompt_chars: int | None
    """The stored prompt's length in characters (``None``: the run kept no texts)."""
    tools: bool
    """Whether the case offered tools: its stored conversation has tools, or a side called one."""


class SliceStore(Store):
    """The reads slicing a task needs, over the grades, case and decision tables."""

    def case_attributes(
        self,
        task: str,
        baseline: str,
        candidates: Sequence[str],
        grader_ids: Sequence[str] | None = None,
        *,
        kind: str | None = None,
    ) -> list[CaseAttributes]:
        """Every case of ``task`` graded against ``baseline`` for ``candidates`` (by ``grader_ids``,
        or any judge), one row per (group, case) in the order the group's cases arrived; one read.
        ``kind`` (``tag``, ``meta``, ``tools``, ``length``) reads only what that slice key needs
        (the other attributes are left empty); ``None`` reads them all."""
        if not candidates:
            return []
        g, cs, conv = _GRADES.c, _CASES.c, _CONVERSATIONS.c
        conditions = [
            cs.task == task,
            cs.baseline_model == baseline,
            cs.candidate_model.in_(list(dict.fromkeys(candidates))),
        ]
        if grader_ids is not None:
            conditions.append(cs.grader_id.in_(list(dict.fromkeys(grader_ids))))
        every = kind is None
        columns: list[Any] = [
            # as text, parsed once per distinct value below (a task's cases share few tag lists)
            sql_cast(g.tags, Text) if every or kind == "tag" else null(),
            sql_cast(g["metadata"], Text) if every or kind == "meta" else null(),
            func.length(g.prompt) if every or kind == "length" else null(),
        ]
        joined = _CASES.join(_GRADES, g.id == cs.first_id)
        if every or kind == "tools":
            columns += [g.baseline_tool_calls, g.candidate_tool_calls, conv.tools]
            joined = joined.outerjoin(_CONVERSATIONS, conv.sha256 == g.prompt_sha256)
        stmt = (
            select(cs.first_id, cs.candidate_model, cs.grader_id, cs.case_key, *columns)
            .select_from(joined)
            .where(and_(*conditions))
            .order_by(cs.candidate_model, cs.grader_id, cs.first_id)
        )
        with reading(self.engine, "reading the cases to slice") as conn:
            rows = conn.execute(stmt).all()
        parsed: dict[str, Any] = {}

        def decoded(text: str | None) -> Any:
            if text is None:
                return None
            if text not in parsed:
                parsed[text] = json.loads(text)
            return parsed[text]

        return [
            CaseAttributes(
                first_id=int(r[0]),
                candidate_model=r[1],
                grader_id=r[2],
                case_key=r[3],
                tags=tuple(decoded(r[4]) or ()),
                metadata=decoded(r[5]),
                prompt_chars=None if r[6] is None else int(r[6]),
                tools=len(r) > 7 and bool(r[7] or r[8] or r[9]),
            )
            for r in rows
        ]

    def length_cuts(self, task: str) -> tuple[float, ...] | None:
        """The length quartiles' cut points the first stored decision that sliced ``task`` by
        length fixed, or ``None`` when none has."""
        d = _DECISIONS.c
        stmt = (
            select(d.parameters)
            .where(d.task == task, sql_cast(d.parameters, Text).like(f'%"{CUTS_KEY}"%'))
            .order_by(d.id)
            .limit(1)
        )
        with reading(self.engine, "reading the length slices' cut points") as conn:
            found = conn.execute(stmt).scalar_one_or_none()
        if not found or found.get(CUTS_KEY) is None:
            return None
        return tuple(float(c) for c in found[CUTS_KEY])

    def newest_sliced(self, task: str) -> tuple[int, dict[str, Any]] | None:
        """The newest stored decision of ``task`` made with slices (``Router.decide_slices``): its
        id and stored evidence (the whole decision with ``slices``), or ``None``."""
        d = _DECISIONS.c
        stmt = (
            select(d.id, d.evidence)
            .where(d.task == task, sql_cast(d.parameters, Text).like('%"slice_by"%'))
            .order_by(d.id.desc())
            .limit(1)
        )
        with reading(self.engine, "reading the newest slice decision") as conn:
            row = conn.execute(stmt).first()
        return None if row is None else (int(row[0]), dict(row[1]))

    def newest_slices(self, task: str, baseline: str, slice_by: str) -> tuple[int, dict[str, Any]] | None:
        """The newest stored decision of ``task`` against ``baseline`` sliced by ``slice_by``: its
        id and stored slices (``slices`` of the evidence), or ``None``: where the watch of each
        slice's candidate starts from."""
        d = _DECISIONS.c
        stmt = (
            select(d.id, d.evidence["slices"])
            .where(
                d.task == task,
                d.baseline_model == baseline,
                d.parameters["slice_by"].as_string() == slice_by,
            )
            .order_by(d.id.desc())
            .limit(1)
        )
        with reading(self.engine, "reading the newest slice decision") as conn:
            row = conn.execute(stmt).first()
        return None if row is None or not row[1] else (int(row[0]), dict(row[1]))
