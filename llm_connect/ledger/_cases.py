"""Per-case running totals (``case_stats``): what case-level evidence is computed from.

Mixed into :class:`~llm_connect.ledger.QualityLedger`. The ledger only stores
and reads these sums; the statistics over them live in
:mod:`llm_connect.routing` (``routing/_evidence.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Table, select

from llm_connect.ledger._models import CaseStats, EvidenceSnapshot, utcnow
from llm_connect.ledger._rows import CaseSeries

__all__ = ["CasesMixin", "evidence_snapshot_rows", "write_evidence_snapshots"]

_C = cast(Table, CaseStats.__table__)

Filter = str | Sequence[str] | None


def _match(column: Any, value: Filter) -> Any:
    """``column == value`` / ``column IN values`` (``None``: no condition); shared with ``_store``."""
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
        # Straight to the driver (no SQLAlchemy rows): routing reads one row per case, thousands
        # per decision, and this read is most of what a decision costs when nothing is cached.
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("task", task),
            ("baseline_model", baseline_model),
            ("grader_id", grader_id),
            ("candidate_model", candidate_model),
        ):
            if value is None:
                continue
            values = [value] if isinstance(value, str) else list(value)
            if not values:
                return []
            clauses.append(f"{column} IN ({', '.join('%s' for _ in values)})")
            params.extend(values)
        sql = (
            "SELECT task, baseline_model, grader_id, candidate_model, n, sum_quality, delta_n, delta_sum "
            "FROM case_stats"
            + (" WHERE " + " AND ".join(clauses) if clauses else "")
            + " ORDER BY task, baseline_model, grader_id, candidate_model, first_id"
        )
        with self._read("reading case totals"), self._connect() as conn:
            if conn.dialect.paramstyle == "qmark":
                sql = sql.replace("%s", "?")
            cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.execute(sql, tuple(params))
                records = cursor.fetchall()
            finally:
                cursor.close()
        # Rows arrive grouped by key: transpose each run of rows with the same key.
        groups: dict[tuple[str, str, str, str], tuple[Any, ...]] = {}
        for key, run in groupby(records, key=itemgetter(0, 1, 2, 3)):
            groups[key] = tuple(zip(*run, strict=True))
        return [
            CaseSeries(
                task=key[0],
                baseline_model=key[1],
                grader_id=key[2],
                candidate_model=key[3],
                grades=cols[4],
                sum_quality=cols[5],
                delta_n=cols[6],
                delta_sum=cols[7],
            )
            for key, cols in groups.items()
        ]


    def evidence_snapshots(
        self, *, task: str, baseline_model: str, settings: str
    ) -> dict[tuple[str, str], tuple[tuple[int, float, float], dict[str, Any]]]:
        """Stored evidence of (task, baseline, settings): (candidate, grader id) -> (version, JSON).

        Written by :meth:`record_decision` (``evidence_snapshots=``); routing uses an entry only
        while its version equals the group's current running totals.
        """
        c = _SNAP.c
        stmt = select(
            c.candidate_model, c.grader_id, c.version_n, c.version_sum, c.version_sum_sq, c.evidence
        ).where(c.task == task, c.baseline_model == baseline_model, c.settings == settings)
        with self._read("reading evidence snapshots"), self._connect() as conn:
            records = conn.execute(stmt).all()
        return {(r[0], r[1]): ((int(r[2]), float(r[3]), float(r[4])), r[5]) for r in records}

_SNAP = cast(Table, EvidenceSnapshot.__table__)
_SNAP_KEY = ("task", "baseline_model", "grader_id", "candidate_model", "settings")
_SNAP_VALUES = ("version_n", "version_sum", "version_sum_sq", "evidence", "updated_at")


def evidence_snapshot_rows(
    task: str, baseline_model: str, settings: str, snapshots: Sequence[tuple[str, str, Sequence[Any], Any]]
) -> list[dict[str, Any]]:
    """Rows for :func:`write_evidence_snapshots`: (candidate, grader id, (n, Σ, Σ²), evidence JSON)."""
    now = utcnow()
    return [
        {
            "task": task,
            "baseline_model": baseline_model,
            "grader_id": grader,
            "candidate_model": candidate,
            "settings": settings,
            "version_n": int(version[0]),
            "version_sum": float(version[1]),
            "version_sum_sq": float(version[2]),
            "evidence": evidence,
            "updated_at": now,
        }
        for candidate, grader, version, evidence in snapshots
    ]


def write_evidence_snapshots(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Upsert evidence snapshots within ``conn``'s transaction (newest wins)."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert  # type: ignore[assignment]
    stmt = dialect_insert(_SNAP)
    stmt = stmt.on_conflict_do_update(
        index_elements=list(_SNAP_KEY),
        set_={c: stmt.excluded[c] for c in _SNAP_VALUES},
    )
    conn.execute(stmt, rows)
