"""Per-case running totals (``case_stats``): what case-level evidence is computed from.

Mixed into :class:`~llm_connect.ledger.QualityLedger`. The ledger only stores
and reads these sums; the statistics over them live in
:mod:`llm_connect.routing` (``routing/_evidence.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Table

from llm_connect.ledger._models import CaseStats, EvidenceSnapshot, utcnow
from llm_connect.ledger._rows import CaseSeries, GradeTotals

__all__ = [
    "TOTALS_COLUMNS",
    "CasesMixin",
    "evidence_snapshot_rows",
    "totals_row",
    "write_evidence_snapshots",
]

_C = cast(Table, CaseStats.__table__)

Filter = str | Sequence[str] | None


def _match(column: Any, value: Filter) -> Any:
    """``column == value`` / ``column IN values`` (``None``: no condition); shared with ``_store``."""
    if value is None:
        return None
    if isinstance(value, str):
        return column == value
    return column.in_(list(value))


def _fetch(conn: Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
    """All rows of ``sql`` (``%s`` placeholders) through the driver's own cursor."""
    if conn.dialect.paramstyle == "qmark":
        sql = sql.replace("%s", "?")
    raw: Any = conn.connection.dbapi_connection
    # psycopg: binary results (no text parsing of every number; doubles arrive bit for bit).
    cursor = raw.cursor(binary=True) if conn.dialect.driver == "psycopg" else raw.cursor()
    try:
        cursor.execute(sql, params)
        return cast(list[Any], cursor.fetchall())
    finally:
        cursor.close()


def _fetch_together(conn: Connection, queries: Sequence[tuple[str, tuple[Any, ...]]]) -> list[list[Any]]:
    """The rows of each query: on psycopg sent in one pipeline (one round trip), else in turn."""
    if conn.dialect.driver != "psycopg":
        return [_fetch(conn, sql, params) for sql, params in queries]
    raw: Any = conn.connection.dbapi_connection
    cursors = [raw.cursor(binary=True) for _ in queries]
    try:
        with raw.pipeline():
            for cursor, (sql, params) in zip(cursors, queries, strict=True):
                cursor.execute(sql, params)
        return [cast(list[Any], cursor.fetchall()) for cursor in cursors]
    finally:
        for cursor in cursors:
            cursor.close()


TOTALS_COLUMNS = (
    "task",
    "baseline_model",
    "grader_id",
    "candidate_model",
    "n",
    "sum_quality",
    "sum_quality_sq",
    "candidate_cost_sum",
    "candidate_cost_n",
    "candidate_latency_sum",
    "candidate_latency_n",
    "baseline_cost_sum",
    "baseline_cost_n",
    "baseline_latency_sum",
    "baseline_latency_n",
    "asks_llm",
)
"""The ``grade_stats`` columns a :class:`GradeTotals` is made of, in :func:`totals_row`'s order."""


def _mean(total: Any, count: Any) -> float | None:
    return float(total) / count if count else None


def totals_row(r: Sequence[Any]) -> GradeTotals:
    """A :class:`GradeTotals` from a row of :data:`TOTALS_COLUMNS`."""
    return GradeTotals(
        task=r[0],
        baseline_model=r[1],
        grader_id=r[2],
        candidate_model=r[3],
        n=int(r[4]),
        sum_quality=float(r[5]),
        sum_quality_sq=float(r[6]),
        candidate_mean_cost_usd=_mean(r[7], r[8]),
        candidate_cost_n=int(r[8]),
        candidate_mean_latency_ms=_mean(r[9], r[10]),
        candidate_latency_n=int(r[10]),
        baseline_mean_cost_usd=_mean(r[11], r[12]),
        baseline_cost_n=int(r[12]),
        baseline_mean_latency_ms=_mean(r[13], r[14]),
        baseline_latency_n=int(r[14]),
        asks_llm=bool(r[15]),
    )


def _series_query(
    task: Filter,
    baseline_model: Filter,
    grader_id: Filter,
    candidate_model: Filter,
    after: Mapping[tuple[str, str], int] | None,
) -> tuple[str, tuple[Any, ...], Callable[[list[Any]], list[CaseSeries]]] | None:
    """The SQL, parameters and row parser of :meth:`CasesMixin.case_series` (``None``: nothing
    can match).

    Straight to the driver (no SQLAlchemy rows): routing reads one row per case, thousands per
    decision. A filtered key column is not read as text on every row: one value is a constant,
    several become a small integer (CASE), and the filtered columns together one integer per row.
    """
    clauses: list[str] = []
    params: list[Any] = []
    codes: list[str] = []
    code_params: list[Any] = []
    texts: list[int] = []  # key positions read as text (no filter)
    known: list[list[str]] = []  # per key position: its filter's values ([] when read as text)
    stride = 1
    filters = (
        ("task", task),
        ("baseline_model", baseline_model),
        ("grader_id", grader_id),
        ("candidate_model", candidate_model),
    )
    for pos, (column, value) in enumerate(filters):
        if value is None:
            texts.append(pos)
            known.append([])
            continue
        values = list(dict.fromkeys([value] if isinstance(value, str) else value))
        if not values:
            return None
        clauses.append(f"{column} IN ({', '.join('%s' for _ in values)})")
        params.extend(values)
        known.append(values)
        if len(values) > 1:
            whens = " ".join(f"WHEN %s THEN {i * stride}" for i in range(len(values)))
            codes.append(f"(CASE {column} {whens} END)")
            code_params.extend(values)
            stride *= len(values)
    key_sql = [" + ".join(codes) if codes else "0"]
    key_sql += [("task", "baseline_model", "grader_id", "candidate_model")[pos] for pos in texts]
    select = f"SELECT {', '.join(key_sql)}, n, sum_quality, delta_n, delta_sum, first_id FROM case_stats"
    width = len(key_sql)
    if after is None:
        sql = (
            select
            + (" WHERE " + " AND ".join(clauses) if clauses else "")
            + " ORDER BY task, baseline_model, grader_id, candidate_model, first_id"
        )
        all_params: tuple[Any, ...] = (*code_params, *params)
    else:
        if not after:
            return None
        # One range of the arrival-order index per group (an OR of the groups made the planner
        # scan every case of the task); the few rows are put in order here.
        branch = f"{select} WHERE {' AND '.join([*clauses, 'candidate_model = %s', 'grader_id = %s'])}"
        sql = " UNION ALL ".join(f"{branch} AND first_id > %s" for _ in after)
        all_params = tuple(
            value
            for (candidate, grader), last in after.items()
            for value in (*code_params, *params, candidate, grader, int(last))
        )

    def parse(records: list[Any]) -> list[CaseSeries]:
        if after is not None:
            records = sorted(records, key=lambda r: (r[:width], r[-1]))
        # Rows arrive grouped by key: transpose once, then slice each run of rows with one key.
        # Column by column (itemgetter): zip(*records) would make an iterator per row (garbage
        # that sets off collections).
        cols = [tuple(map(itemgetter(i), records)) for i in range(width + 5)]
        keys = cols[0] if width == 1 else list(zip(*cols[:width], strict=True))
        out: list[CaseSeries] = []
        start = 0
        for key, run in groupby(keys):
            stop = start + len(list(run))
            code, names = (key, ()) if width == 1 else (key[0], key[1:])
            parts: list[str] = []
            rest = iter(names)
            for values in known:
                if values:
                    parts.append(values[code % len(values)])
                    code //= len(values)
                else:
                    parts.append(next(rest))
            out.append(
                CaseSeries(
                    task=parts[0],
                    baseline_model=parts[1],
                    grader_id=parts[2],
                    candidate_model=parts[3],
                    grades=cols[width][start:stop],
                    sum_quality=cols[width + 1][start:stop],
                    delta_n=cols[width + 2][start:stop],
                    delta_sum=cols[width + 3][start:stop],
                    first_ids=cols[width + 4][start:stop],
                )
            )
            start = stop
        return out

    return sql, all_params, parse


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
        after: Mapping[tuple[str, str], int] | None = None,
    ) -> list[CaseSeries]:
        """One :class:`CaseSeries` per (task, baseline model, grader id, candidate model), one query.

        Each holds, per distinct case in the order the cases were first graded,
        its number of grades, the sums of their quality scores and score
        deltas, and the id of its first grade. Kept current by every write (like
        :meth:`grade_totals`), so it costs one row per case, not per grade. Each
        filter takes one value or a sequence of values. ``after`` maps (candidate
        model, grader id) to a grade id: only those groups are read, and of each
        only the cases first graded past that id (what arrived since the group was
        read; a group with no such case is left out).
        """
        query = _series_query(task, baseline_model, grader_id, candidate_model, after)
        if query is None:
            return []
        sql, params, parse = query
        with self._read("reading case totals"), self._connect() as conn:
            return parse(_fetch(conn, sql, params))

    def routing_read(
        self,
        *,
        task: str,
        baseline_model: str,
        grader_id: Sequence[str],
        candidate_model: Sequence[str],
        after: Mapping[tuple[str, str], int] | None = None,
    ) -> tuple[list[GradeTotals], list[CaseSeries]]:
        """What a routing decision reads first, together: :meth:`grade_totals` of the groups and,
        with ``after``, :meth:`case_series` of the groups it names past their ids (the cases that
        arrived since a router last read them). One round trip on PostgreSQL (pipeline mode);
        the two reads are separate statements, each seeing its own committed state.
        """
        graders, models = list(dict.fromkeys(grader_id)), list(dict.fromkeys(candidate_model))
        if not graders or not models:
            return [], []
        totals_sql = (
            f"SELECT {', '.join(TOTALS_COLUMNS)} FROM grade_stats WHERE task = %s AND baseline_model = %s"
            f" AND grader_id IN ({', '.join('%s' for _ in graders)})"
            f" AND candidate_model IN ({', '.join('%s' for _ in models)})"
        )
        totals_params = (task, baseline_model, *graders, *models)
        # The groups are those of ``after``: no grader or model filter (whose CASE codes would be
        # planned again in every branch); the few rows name their group as text.
        query = _series_query(task, baseline_model, None, None, after) if after else None
        with self._read("reading routing totals"), self._connect() as conn:
            if query is None:
                return [totals_row(r) for r in _fetch(conn, totals_sql, totals_params)], []
            totals, cases = _fetch_together(conn, [(totals_sql, totals_params), query[:2]])
        return [totals_row(r) for r in totals], query[2](cases)

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
        with self._read("reading evidence snapshots"), self._connect() as conn:
            records = _fetch(conn, sql, (task, baseline_model, settings))
        return {(r[0], r[1]): ((int(r[2]), float(r[3]), float(r[4])), _json(r[5])) for r in records}


def _json(value: Any) -> Any:
    """A JSON column as the driver returns it: text on SQLite, already parsed by psycopg."""
    return json.loads(value) if isinstance(value, str | bytes) else value


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
    stmt = _UPSERTS.get(conn.dialect.name)
    if stmt is None:
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert  # type: ignore[assignment]
        insert = dialect_insert(_SNAP)
        stmt = _UPSERTS[conn.dialect.name] = insert.on_conflict_do_update(
            index_elements=list(_SNAP_KEY),
            set_={c: insert.excluded[c] for c in _SNAP_VALUES},
        )
    conn.execute(stmt, rows)


_UPSERTS: dict[str, Any] = {}
"""The snapshot upsert per dialect name, built once (a statement is immutable)."""
