"""The judge-anchor store (issue 37): frozen anchor sets and every check of them.

Tables ``judge_anchors``, ``judge_anchor_cases`` and ``judge_checks`` (revision 0013,
``docs/ledger.md``). One active anchor set per judge (grader id) and task; freezing a new one
with ``replace`` marks the old one inactive in the same transaction, so it and its checks stay
readable. A check is written whole or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, func, select, update

from llm_connect.errors import LedgerError
from llm_connect.ledger._engine import Store, reading, write
from llm_connect.ledger._models import Grade, JudgeAnchor, JudgeAnchorCase, JudgeCheck
from llm_connect.ledger._rows import GradeRow, grade_row
from llm_connect.ledger._runs import finite_json
from llm_connect.types import utcnow
from llm_connect.values import FIRST_GRADE, SERVED_KEYS, IdentityChange, identity_changed, identity_of

__all__ = ["AnchorCase", "AnchorExistsError", "AnchorRow", "AnchorStore", "CheckRow"]

_ANCHORS = cast(Table, JudgeAnchor.__table__)
_CASES = cast(Table, JudgeAnchorCase.__table__)
_CHECKS = cast(Table, JudgeCheck.__table__)
_GRADES = cast(Table, Grade.__table__)
_GRADE_COLUMNS = tuple(GradeRow.__dataclass_fields__)
CHECK_STATUSES = ("stable", "drifted", "not settled", "incomplete")


class AnchorExistsError(LedgerError):
    """The judge already has an active anchor set on the task (freeze with ``replace``)."""


@dataclass(frozen=True, slots=True)
class AnchorCase:
    """One frozen grade of an anchor set: its position (the order a check asks), the grade row,
    the case id, the frozen score, and whether people had labelled the case when frozen."""

    position: int
    grade_id: int
    case_id: str | None
    frozen_score: float
    labelled: bool


@dataclass(frozen=True, slots=True)
class AnchorRow:
    """An anchor set: the judge, the task, the seed that drew it, the drift tolerance, the
    judge's identity when frozen, whether it is the active one, why it was frozen, its cases."""

    id: int
    created_at: datetime
    grader_id: str
    task: str
    seed: int
    tolerance: float
    identity: Mapping[str, Any]
    active: bool
    note: str
    cases: tuple[AnchorCase, ...]


@dataclass(frozen=True, slots=True)
class CheckRow:
    """A stored check: its verdict, the judge's new grade per anchor position (``None`` where
    the call failed), the figures, the drift test's state after it, the judge's identity, the
    judge calls it made and the error that left it incomplete."""

    id: int
    anchor_id: int
    created_at: datetime
    status: str
    scores: tuple[float | None, ...]
    figures: Mapping[str, Any]
    state: Mapping[str, Any]
    identity: Mapping[str, Any]
    calls: int
    error: str | None


class AnchorStore(Store):
    """Frozen anchor sets of judges and their checks."""

    def freeze_anchor(
        self,
        *,
        grader_id: str,
        task: str,
        cases: Sequence[AnchorCase],
        seed: int,
        tolerance: float,
        identity: Mapping[str, Any],
        note: str,
        replace: bool = False,
    ) -> int:
        """Store a new active anchor set; returns its id. Raises :class:`AnchorExistsError`
        when one is active for ``grader_id`` and ``task`` and ``replace`` is false (nothing
        written); with ``replace`` the old one becomes inactive in the same transaction."""
        if not grader_id or not task:
            raise LedgerError("an anchor set needs a judge and a task")
        if not cases:
            raise LedgerError("an anchor set needs at least one case")
        row = {
            "created_at": utcnow(),
            "grader_id": grader_id,
            "task": task,
            "seed": int(seed),
            "tolerance": float(tolerance),
            "identity": finite_json(dict(identity), "judge identity"),
            "active": True,
            "note": note,
        }

        def insert(conn: Connection) -> int:
            a = _ANCHORS.c
            old = conn.execute(
                select(a.id).where(a.grader_id == grader_id, a.task == task, a.active.is_(True))
            ).scalar()
            if old is not None and not replace:
                raise AnchorExistsError(
                    f"{grader_id} already has anchor set {old} on task {task!r}; "
                    "freeze a new one with --replace (its checks start again)"
                )
            if old is not None:
                conn.execute(update(_ANCHORS).where(a.id == old).values(active=False))
            anchor_id = int(conn.execute(_ANCHORS.insert().returning(a.id), row).scalar_one())
            conn.execute(
                _CASES.insert(),
                [
                    {
                        "anchor_id": anchor_id,
                        "position": c.position,
                        "grade_id": c.grade_id,
                        "case_id": c.case_id,
                        "frozen_score": float(c.frozen_score),
                        "labelled": bool(c.labelled),
                    }
                    for c in cases
                ],
            )
            return anchor_id

        return write(self.engine, "freezing an anchor set", insert)

    def anchors(
        self, grader_id: str | None = None, task: str | None = None, *, active: bool | None = None
    ) -> list[AnchorRow]:
        """Anchor sets, oldest first (of one judge and task when given; only the active or only
        the replaced ones when ``active`` says so), with their cases."""
        a = _ANCHORS.c
        stmt = select(_ANCHORS).order_by(a.id)
        if active is not None:
            stmt = stmt.where(a.active.is_(active))
        if grader_id is not None:
            stmt = stmt.where(a.grader_id == grader_id)
        if task is not None:
            stmt = stmt.where(a.task == task)
        with reading(self.engine, "reading anchor sets") as conn:
            heads = list(conn.execute(stmt).mappings())
            if not heads:
                return []
            c = _CASES.c
            got: dict[int, list[AnchorCase]] = {int(h["id"]): [] for h in heads}
            rows = conn.execute(
                select(_CASES).where(c.anchor_id.in_(list(got))).order_by(c.anchor_id, c.position)
            ).mappings()
            for r in rows:
                got[int(r["anchor_id"])].append(
                    AnchorCase(
                        int(r["position"]),
                        int(r["grade_id"]),
                        r["case_id"],
                        float(r["frozen_score"]),
                        bool(r["labelled"]),
                    )
                )
        return [
            AnchorRow(
                id=int(h["id"]),
                created_at=h["created_at"],
                grader_id=h["grader_id"],
                task=h["task"],
                seed=int(h["seed"]),
                tolerance=float(h["tolerance"]),
                identity=dict(h["identity"]),
                active=bool(h["active"]),
                note=h["note"],
                cases=tuple(got[int(h["id"])]),
            )
            for h in heads
        ]

    def active_anchor(self, grader_id: str, task: str) -> AnchorRow | None:
        """The judge's active anchor set on ``task``, or ``None``."""
        return next(iter(self.anchors(grader_id, task, active=True)), None)

    def record_check(
        self,
        *,
        anchor_id: int,
        status: str,
        scores: Sequence[float | None],
        figures: Mapping[str, Any],
        state: Mapping[str, Any],
        identity: Mapping[str, Any],
        calls: int,
        error: str | None = None,
    ) -> int:
        """Store one check of anchor set ``anchor_id``; returns its id."""
        if status not in CHECK_STATUSES:
            raise LedgerError(f"a check's status is one of {', '.join(CHECK_STATUSES)}, not {status!r}")
        row = {
            "anchor_id": anchor_id,
            "created_at": utcnow(),
            "status": status,
            "scores": [None if s is None else float(s) for s in scores],
            "figures": finite_json(dict(figures), "check figures"),
            "state": finite_json(dict(state), "drift state"),
            "identity": finite_json(dict(identity), "judge identity"),
            "calls": int(calls),
            "error": error,
        }

        def insert(conn: Connection) -> int:
            return int(conn.execute(_CHECKS.insert().returning(_CHECKS.c.id), row).scalar_one())

        return write(self.engine, "recording a judge check", insert)

    def version(self) -> tuple[tuple[int, bool, int], ...]:
        """``(anchor id, active, checks)`` of every anchor set, in one read: what changes when
        a set is frozen or replaced or a check is stored (the report server's cache key)."""
        a, c = _ANCHORS.c, _CHECKS.c
        stmt = (
            select(a.id, a.active, func.count(c.id))
            .select_from(_ANCHORS.outerjoin(_CHECKS, c.anchor_id == a.id))
            .group_by(a.id, a.active)
            .order_by(a.id)
        )
        with reading(self.engine, "reading judge checks") as conn:
            return tuple((int(i), bool(act), int(n)) for i, act, n in conn.execute(stmt))

    def checks(self, anchor_id: int) -> list[CheckRow]:
        """The checks of one anchor set, oldest first."""
        c = _CHECKS.c
        stmt = select(_CHECKS).where(c.anchor_id == anchor_id).order_by(c.id)
        with reading(self.engine, "reading judge checks") as conn:
            return [_check_row(r) for r in conn.execute(stmt).mappings()]

    def drifted(self, grader_ids: Sequence[str], task: str) -> dict[str, CheckRow]:
        """Per judge of ``grader_ids`` whose active anchor set on ``task`` has a newest complete
        check saying ``drifted`` (a drifted judge stays so until a new anchor set): that set's
        first ``drifted`` check. One small read (a second only when some judge drifted)."""
        a, c = _ANCHORS.c, _CHECKS.c
        if not grader_ids:
            return {}
        last = (
            select(c.status)
            .where(c.anchor_id == a.id, c.status != "incomplete")
            .order_by(c.id.desc())
            .limit(1)
            .scalar_subquery()
        )
        stmt = select(a.grader_id, a.id, last).where(
            a.task == task, a.active.is_(True), a.grader_id.in_(list(grader_ids))
        )
        with reading(self.engine, "reading judge checks") as conn:
            anchors = {int(anchor): gid for gid, anchor, status in conn.execute(stmt) if status == "drifted"}
            if not anchors:
                return {}
            out: dict[str, CheckRow] = {}
            first = (
                select(_CHECKS).where(c.anchor_id.in_(list(anchors)), c.status == "drifted").order_by(c.id)
            )
            for rec in conn.execute(first).mappings():
                out.setdefault(anchors[int(rec["anchor_id"])], _check_row(rec))
        return out

    def identity_changes(self, grader_ids: Sequence[str], task: str) -> dict[str, IdentityChange]:
        """Per judge of ``grader_ids`` whose newest grade on ``task`` names another served model
        or fingerprint than the identity its evidence was last vouched for under: the newest
        complete check of its active anchor set, else that anchor set, else its first grade on
        the task. Two indexed row reads per judge (``ix_grades_grader_task_id``) and one of the
        anchors; judges that ask no model are never listed."""
        g, a, c = _GRADES.c, _ANCHORS.c, _CHECKS.c
        if not grader_ids:
            return {}
        newest_check = (
            select(func.max(c.id)).where(c.anchor_id == a.id, c.status != "incomplete").scalar_subquery()
        )
        anchors = select(a.grader_id, a.id, a.identity, a.created_at, newest_check).where(
            a.task == task, a.active.is_(True), a.grader_id.in_(list(grader_ids))
        )
        out: dict[str, IdentityChange] = {}
        with reading(self.engine, "reading judge identities") as conn:
            vouched: dict[str, tuple[str, Mapping[str, Any], datetime]] = {}
            checks: dict[int, str] = {}
            for gid, anchor_id, anchor_identity, frozen_at, check_id in conn.execute(anchors):
                vouched[gid] = (f"anchor set {anchor_id}", anchor_identity or {}, frozen_at)
                if check_id is not None:
                    checks[int(check_id)] = gid
            if checks:
                found = select(c.id, c.identity, c.created_at).where(c.id.in_(list(checks)))
                for check_id, identity, checked_at in conn.execute(found):
                    if identity:
                        vouched[checks[int(check_id)]] = (f"check {check_id}", identity, checked_at)
            for gid in dict.fromkeys(grader_ids):
                mine = select(g.created_at, g.details).where(g.grader_id == gid, g.task == task)
                newest = conn.execute(mine.order_by(g.id.desc()).limit(1)).first()
                if newest is None:
                    continue
                graded = identity_of(newest.details or {})
                if not any(graded.get(k) for k in SERVED_KEYS):
                    continue  # a judge that asks no model, or a server that names nothing
                if gid not in vouched:
                    first = conn.execute(mine.order_by(g.id).limit(1)).first()
                    assert first is not None  # the newest grade exists
                    vouched[gid] = (FIRST_GRADE, identity_of(first.details or {}), first.created_at)
                reference, identity, at = vouched[gid]
                if not identity_changed(identity, graded):
                    continue
                vouch = dict(identity)
                if newest.created_at >= at:
                    out[gid] = IdentityChange(gid, task, reference, vouch, graded, newest.created_at)
                else:
                    out[gid] = IdentityChange(gid, task, reference, graded, vouch, at, grades_newer=False)
        return out

    def served_models(self, grader_id: str, task: str, *, before_id: int) -> set[str]:
        """The served models (``details.judge_model``) of the judge's grades of ``task`` stored
        before grade row ``before_id``."""
        g = _GRADES.c
        served = g.details["judge_model"].as_string()
        stmt = select(served).where(g.grader_id == grader_id, g.task == task, g.id < before_id).distinct()
        with reading(self.engine, "reading served models") as conn:
            return {str(v) for (v,) in conn.execute(stmt) if v is not None}

    def grade_rows(self, ids: Sequence[int]) -> dict[int, GradeRow]:
        """The stored grades with these row ids (a pruned grade is absent)."""
        out: dict[int, GradeRow] = {}
        wanted = sorted({int(i) for i in ids})
        with reading(self.engine, "reading anchored grades") as conn:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                stmt = select(*[_GRADES.c[name] for name in _GRADE_COLUMNS]).where(_GRADES.c.id.in_(chunk))
                for rec in conn.execute(stmt).mappings():
                    row = grade_row(rec)
                    out[row.id] = row
        return out

    def judge_identities(self, task: str | None = None) -> list[dict[str, Any]]:
        """Per judge (grader id) and task: its grades and, per served model and fingerprint its
        grades recorded (``details.judge_model``, ``details.system_fingerprint``; ``None`` for
        judges that call no model or servers that send none), how many and when."""
        g = _GRADES.c
        served = _GRADES.c.details["judge_model"].as_string()
        fingerprint = _GRADES.c.details["system_fingerprint"].as_string()
        stmt = (
            select(
                g.grader_id,
                g.task,
                served,
                fingerprint,
                func.count(),
                func.min(g.created_at),
                func.max(g.created_at),
            )
            .group_by(g.grader_id, g.task, served, fingerprint)
            .order_by(g.grader_id, g.task, func.min(g.created_at))
        )
        if task is not None:
            stmt = stmt.where(g.task == task)
        out: dict[tuple[str, str], dict[str, Any]] = {}
        with reading(self.engine, "reading judge identities") as conn:
            for grader_id, task_name, model, print_, count, first, last in conn.execute(stmt):
                row = out.setdefault(
                    (grader_id, task_name),
                    {"judge": grader_id, "task": task_name, "grades": 0, "identities": []},
                )
                row["grades"] += int(count)
                row["identities"].append(
                    {
                        "judge_model": model,
                        "system_fingerprint": print_,
                        "grades": int(count),
                        "first": first,
                        "last": last,
                    }
                )
        return list(out.values())


def _check_row(r: Mapping[Any, Any]) -> CheckRow:
    return CheckRow(
        id=int(r["id"]),
        anchor_id=int(r["anchor_id"]),
        created_at=r["created_at"],
        status=r["status"],
        scores=tuple(r["scores"]),
        figures=dict(r["figures"]),
        state=dict(r["state"]),
        identity=dict(r["identity"]),
        calls=int(r["calls"]),
        error=r["error"],
    )
