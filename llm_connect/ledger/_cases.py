"""Per-case running totals (``case_stats``): what case-level evidence is computed from.

Mixed into :class:`~llm_connect.ledger.QualityLedger`. The ledger only stores
and reads these sums; the statistics over them live in
:mod:`llm_connect.routing` (``routing/_evidence.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Table, select

from llm_connect.ledger._models import CaseStats
from llm_connect.ledger._rows import CaseSeries

__all__ = ["CasesMixin"]

_C = cast(Table, CaseStats.__table__)

Filter = str | Sequence[str] | None


def _match(column: Any, value: Filter) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return column == value
    return column.in_(list(value))


class CasesMixin:
    """Reads the per-case totals of (task, baseline, grader, candidate) groups."""

    if TYPE_CHECKING:

        def _connect(self) -> Connection: ...
        def _read(self, what: str) -> Any: ...

    def case_series(
        self,
        *,
        task: Filter = None,
        baseline_model: Filter = None,
        grader_id: Filter = None,
        candidate_model: Filter = None,
    ) -> list[CaseSeries]:
        """One :class:`CaseSeries` per (task, baseline model, grader id, candidate model), one query.

        Each holds, per distinct case in the order the cases were first graded,
        its number of grades and the sums of their quality scores and score
        deltas. Kept current by every write (like :meth:`grade_totals`), so it
        costs one row per case, not per grade. Each filter takes one value or a
        sequence of values.
        """
        c = _C.c
        conditions = [
            cond
            for cond in (
                _match(c.task, task),
                _match(c.baseline_model, baseline_model),
                _match(c.grader_id, grader_id),
                _match(c.candidate_model, candidate_model),
            )
            if cond is not None
        ]
        stmt = (
            select(
                c.task,
                c.baseline_model,
                c.grader_id,
                c.candidate_model,
                c.n,
                c.sum_quality,
                c.delta_n,
                c.delta_sum,
            )
            .where(*conditions)
            .order_by(c.task, c.baseline_model, c.grader_id, c.candidate_model, c.first_id)
        )
        with self._read("reading case totals"), self._connect() as conn:
            records = conn.execute(stmt).all()
        groups: dict[tuple[str, str, str, str], tuple[list[int], list[float], list[int], list[float]]] = {}
        for r in records:
            key = (r[0], r[1], r[2], r[3])
            cols = groups.get(key)
            if cols is None:
                cols = groups[key] = ([], [], [], [])
            cols[0].append(int(r[4]))
            cols[1].append(float(r[5]))
            cols[2].append(int(r[6]))
            cols[3].append(float(r[7]))
        return [
            CaseSeries(
                task=key[0],
                baseline_model=key[1],
                grader_id=key[2],
                candidate_model=key[3],
                grades=tuple(cols[0]),
                sum_quality=tuple(cols[1]),
                delta_n=tuple(cols[2]),
                delta_sum=tuple(cols[3]),
            )
            for key, cols in groups.items()
        ]
