"""The calibrations store: how far a judge agrees with reference graders (``calibrations``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Connection, Table, select

from llm_connect._version import __version__
from llm_connect.errors import LedgerError
from llm_connect.ledger._engine import Store, reading, write
from llm_connect.ledger._models import Calibration
from llm_connect.ledger._rows import CalibrationRow
from llm_connect.ledger._runs import finite_json
from llm_connect.types import utcnow

_CALIBRATIONS = cast(Table, Calibration.__table__)


class CalibrationStore(Store):
    """Stored judge calibrations, newest last."""

    def record_calibration(
        self,
        *,
        judge_grader_id: str,
        references: Sequence[str],
        task: str | None,
        figures: Mapping[str, Any],
        verdict: str,
        passed: bool,
    ) -> int:
        """Store a calibration of ``judge_grader_id`` against ``references``; returns its id."""
        if not judge_grader_id:
            raise LedgerError("judge_grader_id must be a non-empty string")
        row = {
            "created_at": utcnow(),
            "judge_grader_id": judge_grader_id,
            "reference_grader_ids": [str(r) for r in references],
            "task": task,
            "figures": finite_json(dict(figures), "calibration figures"),
            "verdict": verdict,
            "passed": bool(passed),
            "llm_connect_version": __version__,
        }

        def insert(conn: Connection) -> int:
            stmt = _CALIBRATIONS.insert().returning(_CALIBRATIONS.c.id)
            return int(conn.execute(stmt, row).scalar_one())

        return write(self.engine, "recording a calibration", insert)

    def calibrations(self, judge_grader_id: str | None = None) -> list[CalibrationRow]:
        """Stored calibrations, oldest first (of one judge when given)."""
        stmt = select(_CALIBRATIONS).order_by(_CALIBRATIONS.c.id)
        if judge_grader_id is not None:
            stmt = stmt.where(_CALIBRATIONS.c.judge_grader_id == judge_grader_id)
        with reading(self.engine, "reading calibrations") as conn:
            return [_calibration_row(rec) for rec in conn.execute(stmt).mappings()]

    def latest_calibration(self, judge_grader_id: str, *, task: str | None = None) -> CalibrationRow | None:
        """The newest calibration of ``judge_grader_id`` for ``task``."""
        c = _CALIBRATIONS.c
        with reading(self.engine, "reading calibrations") as conn:
            for wanted in [task, None] if task is not None else [None]:
                cond = c.task.is_(None) if wanted is None else c.task == wanted
                stmt = (
                    select(_CALIBRATIONS)
                    .where(c.judge_grader_id == judge_grader_id, cond)
                    .order_by(c.created_at.desc(), c.id.desc())
                    .limit(1)
                )
                rec = conn.execute(stmt).mappings().first()
                if rec is not None:
                    return _calibration_row(rec)
        return None


def _calibration_row(rec: Mapping[Any, Any]) -> CalibrationRow:
    same = {name: rec[name] for name in ("id", "created_at", "judge_grader_id", "task", "figures", "verdict")}
    return CalibrationRow(**same, references=tuple(rec["reference_grader_ids"]), passed=bool(rec["passed"]))
