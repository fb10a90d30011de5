"""The grades store: every grade, its running totals, and the figures read from them.

:class:`GradeStore` owns ``grades``, ``grade_stats`` and ``case_stats`` (``_models``)
over the ledger's engine. A batch of grades goes in with one plain
``INSERT ... ON CONFLICT DO NOTHING RETURNING id``, executed by the driver inside
the caller's (SQLAlchemy) transaction with the rows already built as tuples
(:func:`~llm_connect.ledger._convert.grade_rows`): on PostgreSQL psycopg's
``executemany(..., returning=True)`` (pipelined, the statement prepared once),
on SQLite one ``sqlite3`` execute per row of the one cached statement (its
``executemany`` discards ``RETURNING`` rows). SQLAlchemy's own multi-row
statement cost 3-8 times as much here (psycopg parsing 500 x 43 placeholders per
batch; per-row bind processing on SQLite). The running totals of the rows
actually inserted are upserted in the same transaction, so routing and summaries
read a handful of rows however large the ledger grows.

The idempotency key is (run_id, case_id, grader_id, candidate_model) when run_id
and case_id are both given: recording the same grade again returns the stored id
and writes nothing; a different grade under a stored key (or twice in one batch)
raises :class:`~llm_connect.errors.GradeConflictError` and the whole batch is
rolled back. Grades without a key never conflict: each is inserted and gets its own id.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from operator import itemgetter
from pathlib import Path
from typing import Any, cast

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Connection,
    Engine,
    Integer,
    Table,
    and_,
    any_,
    bindparam,
    case,
    func,
    literal_column,
    or_,
    select,
    text,
)

from llm_connect.errors import LedgerError
from llm_connect.ledger._cases import (
    TOTALS_COLUMNS,
    fetch,
    fetch_together,
    match,
    series_query,
    totals_row,
)
from llm_connect.ledger._convert import (
    GRADE_COLUMNS,
    INSERT_COLUMNS,
    conflict_error,
    differences,
    grade_row,
    stored_ids,
)
from llm_connect.ledger._engine import dialect_insert, driver_cursor, ledger_errors, reading, write
from llm_connect.ledger._models import (
    CASE_KEY_SQL,
    CASE_STATS_REBUILD_SQL,
    GRADE_STATS_REBUILD_SQL,
    CaseStats,
    Grade,
    GradeStats,
)
from llm_connect.ledger._rows import CaseSeries, GradeRow, GradeTotals, SummaryRow
from llm_connect.ledger._stats import mean_std, t_interval

__all__ = ["GradeStore"]

_G = cast(Table, Grade.__table__)
_S = cast(Table, GradeStats.__table__)
_C = cast(Table, CaseStats.__table__)
_KEY = ("run_id", "case_id", "grader_id", "candidate_model")
_GROUP = ("task", "baseline_model", "grader_id", "candidate_model")
_LOOKUP_CHUNK = 200  # keys per lookup of stored grades (4 parameters each)
_IDS_CHUNK = 5000  # ids per case totals statement: under both backends' parameter limits

Filter = str | Sequence[str] | None
Key = tuple[Any, ...]
Row = tuple[Any, ...]

_POS = {name: i for i, name in enumerate(INSERT_COLUMNS)}
_KEY_OF = itemgetter(*(_POS[c] for c in _KEY))
_GROUP_OF = itemgetter(*(_POS[c] for c in _GROUP))
_QUALITY, _ASKS_LLM = _POS["quality_score"], _POS["asks_llm"]
_SUMMED = tuple(
    (f"{side}_{what}", _POS[f"{side}_{column}"])
    for side in ("baseline", "candidate")
    for what, column in (("cost", "cost_usd"), ("latency", "latency_ms"))
)


def _insert_sql(placeholder: str) -> str:
    return (
        f"INSERT INTO grades ({', '.join(INSERT_COLUMNS)}) "
        f"VALUES ({', '.join(placeholder for _ in INSERT_COLUMNS)}) "
        f"ON CONFLICT ({', '.join(_KEY)}) DO NOTHING RETURNING id"
    )


_INSERT = {"sqlite": _insert_sql("?"), "postgresql": _insert_sql("%s")}


def _key(row: Row) -> Key | None:
    key: Key = _KEY_OF(row)
    return key if key[0] is not None and key[1] is not None else None


def _insert(conn: Connection, rows: list[Row]) -> list[int | None]:
    """Insert ``rows`` (no two under one key) in ``conn``'s transaction; each row's new id, or
    ``None`` where its key was already stored (nothing written for it)."""
    sql = _INSERT[conn.dialect.name]
    out: list[int | None] = []
    with driver_cursor(conn, "INSERT INTO grades ...") as cursor:
        if conn.dialect.name == "postgresql":
            cursor.executemany(sql, rows, returning=True)  # one result per row, in order
            while True:
                rec = cursor.fetchone()
                out.append(None if rec is None else rec[0])
                if not cursor.nextset():
                    return out
        for row in rows:  # sqlite3 caches the prepared statement
            rec = cursor.execute(sql, row).fetchone()
            out.append(None if rec is None else rec[0])
    return out


def _grade_totals(rows: list[Row], created_at: datetime) -> list[dict[str, Any]]:
    """``grade_stats`` increments of newly inserted rows (all created at ``created_at``), one per
    group, in key order."""
    groups: dict[Key, list[Row]] = {}
    for r in rows:
        groups.setdefault(_GROUP_OF(r), []).append(r)
    out = []
    for key in sorted(groups):  # one lock order for concurrent writers
        group = groups[key]
        qs = [r[_QUALITY] for r in group]
        total: dict[str, Any] = dict(zip(_GROUP, key, strict=True))
        total.update(n=len(group), sum_quality=float(sum(qs)), sum_quality_sq=float(sum(q * q for q in qs)))
        for name, pos in _SUMMED:
            values = [v for r in group if (v := r[pos]) is not None]
            total[f"{name}_sum"], total[f"{name}_n"] = float(sum(values)), len(values)
        total.update(first_at=created_at, last_at=created_at, asks_llm=any(r[_ASKS_LLM] for r in group))
        out.append(total)
    return out


_Q = _G.c.quality_score
# The case totals of the grades whose ids are given, summed by the database (one row per case, in
# key order: concurrent writers lock the rows in one order); the same sums as CASE_STATS_REBUILD_SQL.
_CASE_GROUP = (*(_G.c[c] for c in _GROUP), literal_column(CASE_KEY_SQL))
_CASE_SUMS = select(
    *_CASE_GROUP,
    func.count(),
    func.sum(_Q),
    func.count(_G.c.score_delta),
    func.coalesce(func.sum(_G.c.score_delta), 0.0),
    func.min(_G.c.id),
)
_CASE_COLUMNS = (*_GROUP, "case_key", "n", "sum_quality", "delta_n", "delta_sum", "first_id")
# PostgreSQL: the ids as one array parameter (``id = ANY(%(ids)s)``), a short statement psycopg
# parses once, not one placeholder per id; SQLite: an expanding ``IN``.
_IDS_GIVEN = {
    "postgresql": _G.c.id == any_(bindparam("ids", type_=ARRAY(Integer))),
    "sqlite": _G.c.id.in_(bindparam("ids", expanding=True)),
}


def _add_case_totals(conn: Connection, ids: list[int]) -> None:
    """Add the grades ``ids`` (just inserted) to ``case_stats``, in ``conn``'s transaction."""
    sums = _CASE_SUMS.where(_IDS_GIVEN[conn.dialect.name]).group_by(*_CASE_GROUP).order_by(*_CASE_GROUP)
    stmt = dialect_insert(conn.dialect.name, _C).from_select(_CASE_COLUMNS, sums)
    new = stmt.excluded
    sets = {c: _C.c[c] + new[c] for c in ("n", "sum_quality", "delta_n", "delta_sum")}
    stmt = stmt.on_conflict_do_update(
        index_elements=list(_C.primary_key.columns),
        set_={**sets, "first_id": _least(_C.c.first_id, new.first_id)},
    )
    for start in range(0, len(ids), _IDS_CHUNK):
        conn.execute(stmt, {"ids": ids[start : start + _IDS_CHUNK]})


def _upsert(
    conn: Connection, table: Table, rows: list[dict[str, Any]], added: Sequence[str], **other: Any
) -> None:
    """``INSERT ... ON CONFLICT (primary key) DO UPDATE``: the ``added`` columns summed, ``other``
    set from (stored column, new value) -> expression."""
    stmt = dialect_insert(conn.dialect.name, table)
    new = stmt.excluded
    sets = {c: table.c[c] + new[c] for c in added}
    sets.update({c: fn(table.c[c], new[c]) for c, fn in other.items()})
    conn.execute(stmt.on_conflict_do_update(index_elements=list(table.primary_key.columns), set_=sets), rows)


def _least(old: Any, new: Any) -> Any:
    return case((new < old, new), else_=old)


def _greatest(old: Any, new: Any) -> Any:
    return case((new > old, new), else_=old)


_GRADE_ADDED = (
    "n",
    "sum_quality",
    "sum_quality_sq",
    *(f"{s}_{w}_{t}" for s in ("baseline", "candidate") for w in ("cost", "latency") for t in ("sum", "n")),
)


class GradeStore:
    """Grades and their running totals, and the figures read from them (what routing, reports
    and calibration use)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- writing ---------------------------------------------------------------

    def add(self, conn: Connection, rows: list[Row], created_at: datetime) -> list[int]:
        """Insert :func:`~llm_connect.ledger._convert.grade_rows` rows (made at ``created_at``)
        in ``conn``'s transaction and add the new ones to the running totals; the grades' ids,
        in row order."""
        keys = [_key(r) for r in rows]
        first: dict[Key, int] = {}
        clashes: list[tuple[Key, int | None, list[str]]] = []
        for i, key in enumerate(keys):
            if key is not None and first.setdefault(key, i) != i:
                diffs = differences(dict(zip(INSERT_COLUMNS, rows[first[key]], strict=True)), rows[i])
                if diffs:
                    clashes.append((key, None, diffs))
        if clashes:
            raise conflict_error(clashes)
        # Each key once (a repeat in the batch gets its first row's id); keyless rows all go in.
        sent = [i for i, key in enumerate(keys) if key is None or first[key] == i]
        new = _insert(conn, rows if len(sent) == len(rows) else [rows[i] for i in sent])
        ids: list[int | None] = [None] * len(rows)
        for i, new_id in zip(sent, new, strict=True):
            ids[i] = new_id
        inserted = [i for i in sent if ids[i] is not None]
        # Keys already stored (an earlier batch, a concurrent writer): their ids, the grades checked.
        stored = stored_ids(conn, {k: rows[i] for k, i in first.items() if ids[i] is None})
        for i, key in enumerate(keys):
            if ids[i] is None:  # keyed: a stored key, or a repeat of an earlier row (its id is set)
                assert key is not None
                ids[i] = stored[key] if first[key] == i else ids[first[key]]
        if inserted:  # case_stats before grade_stats: one lock order for every writer
            _add_case_totals(conn, [cast(int, ids[i]) for i in inserted])
            totals = _grade_totals([rows[i] for i in inserted], created_at)
            _upsert(conn, _S, totals, _GRADE_ADDED, first_at=_least, last_at=_greatest, asks_llm=or_)
        return cast(list[int], ids)

    def rebuild_stats(self) -> None:
        """Recompute the running totals (``grade_stats``, ``case_stats``) from ``grades``.

        Only needed after grades were inserted or deleted with plain SQL
        behind the ledger's back; every ledger write keeps them current.
        """

        def rebuild(conn: Connection) -> None:
            conn.execute(_S.delete())
            conn.execute(text(GRADE_STATS_REBUILD_SQL))
            conn.execute(_C.delete())
            conn.execute(text(CASE_STATS_REBUILD_SQL))

        write(self.engine, "rebuilding grade totals", rebuild)

    # -- reading ---------------------------------------------------------------

    @staticmethod
    def _filters(
        *,
        task: Filter = None,
        baseline_model: Filter = None,
        candidate_model: Filter = None,
        grader_id: Filter = None,
        run_id: Filter = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[ColumnElement[bool]]:
        conditions = [
            match(_G.c.task, task),
            match(_G.c.baseline_model, baseline_model),
            match(_G.c.candidate_model, candidate_model),
            match(_G.c.grader_id, grader_id),
            match(_G.c.run_id, run_id),
            None if since is None else _G.c.created_at >= since,
            None if until is None else _G.c.created_at < until,
        ]
        return [c for c in conditions if c is not None]

    def results(
        self,
        *,
        task: Filter = None,
        baseline_model: Filter = None,
        candidate_model: Filter = None,
        grader_id: Filter = None,
        run_id: Filter = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> Iterator[GradeRow]:
        """Stored grades matching every filter given, oldest first, as :class:`GradeRow`.

        Each filter takes one value or a sequence of values; ``since`` is
        inclusive and ``until`` exclusive. Rows are streamed, so iterating a
        large ledger does not load it all at once.
        """
        stmt = (
            select(*[_G.c[name] for name in GRADE_COLUMNS])
            .where(
                *self._filters(
                    task=task,
                    baseline_model=baseline_model,
                    candidate_model=candidate_model,
                    grader_id=grader_id,
                    run_id=run_id,
                    since=since,
                    until=until,
                )
            )
            .order_by(_G.c.id)
        )
        if limit is not None:
            stmt = stmt.limit(limit)
        return self._stream(stmt)

    def _stream(self, stmt: Any) -> Iterator[GradeRow]:
        with ledger_errors("reading grades", self.engine.url), self.engine.connect() as conn:
            result = conn.execution_options(yield_per=1000).execute(stmt)
            for mapping in result.mappings():
                yield grade_row(mapping)

    def summary(
        self,
        *,
        task: Filter = None,
        baseline_model: Filter = None,
        candidate_model: Filter = None,
        grader_id: Filter = None,
        since: datetime | None = None,
        until: datetime | None = None,
        confidence: float = 0.95,
    ) -> list[SummaryRow]:
        """One :class:`SummaryRow` per (task, baseline model, candidate model, grader id).

        The confidence interval is a two-sided Student t-interval for the mean
        quality (``scipy.stats.t``), clipped to 0..1; ``None`` when ``n < 2``.
        """
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must lie strictly between 0 and 1, not {confidence!r}")
        if since is None and until is None:
            records = self._summary_from_totals(task, baseline_model, candidate_model, grader_id)
        else:
            records = self._summary_from_grades(
                task, baseline_model, candidate_model, grader_id, since, until
            )
        out = []
        for rec in records:
            n = int(rec[4])
            mean, std = mean_std(n, float(rec[5]), float(rec[6]))
            low, high = t_interval(n, mean, std, confidence)
            out.append(
                SummaryRow(
                    task=rec[0],
                    baseline_model=rec[1],
                    candidate_model=rec[2],
                    grader_id=rec[3],
                    n=n,
                    mean=float(mean or 0.0),
                    std=std,
                    ci_low=low,
                    ci_high=high,
                    confidence=confidence,
                    baseline_mean_cost_usd=None if rec[7] is None else float(rec[7]),
                    candidate_mean_cost_usd=None if rec[8] is None else float(rec[8]),
                    baseline_mean_latency_ms=None if rec[9] is None else float(rec[9]),
                    candidate_mean_latency_ms=None if rec[10] is None else float(rec[10]),
                    first_at=rec[11],
                    last_at=rec[12],
                )
            )
        return out

    def _summary_from_totals(
        self, task: Filter, baseline: Filter, candidate: Filter, grader: Filter
    ) -> list[Any]:
        c = _S.c
        conditions = _totals_filter(task, baseline, candidate, grader)
        keys = (c.task, c.baseline_model, c.candidate_model, c.grader_id)
        stmt = (
            select(
                *keys,
                c.n,
                c.sum_quality,
                c.sum_quality_sq,
                c.baseline_cost_sum,
                c.baseline_cost_n,
                c.candidate_cost_sum,
                c.candidate_cost_n,
                c.baseline_latency_sum,
                c.baseline_latency_n,
                c.candidate_latency_sum,
                c.candidate_latency_n,
                c.first_at,
                c.last_at,
            )
            .where(*conditions)
            .order_by(*keys)
        )
        with reading(self.engine, "summarising grades") as conn:
            rows = conn.execute(stmt).all()
        return [
            (*r[:7], *(r[i] / r[i + 1] if r[i + 1] else None for i in (7, 9, 11, 13)), r[15], r[16])
            for r in rows
        ]

    def _summary_from_grades(
        self,
        task: Filter,
        baseline: Filter,
        candidate: Filter,
        grader: Filter,
        since: datetime | None,
        until: datetime | None,
    ) -> list[Any]:
        keys = (_G.c.task, _G.c.baseline_model, _G.c.candidate_model, _G.c.grader_id)
        q = _G.c.quality_score
        stmt = (
            select(
                *keys,
                func.count(),
                func.sum(q),
                func.sum(q * q),
                func.avg(_G.c.baseline_cost_usd),
                func.avg(_G.c.candidate_cost_usd),
                func.avg(_G.c.baseline_latency_ms),
                func.avg(_G.c.candidate_latency_ms),
                func.min(_G.c.created_at),
                func.max(_G.c.created_at),
            )
            .where(
                *self._filters(
                    task=task,
                    baseline_model=baseline,
                    candidate_model=candidate,
                    grader_id=grader,
                    since=since,
                    until=until,
                )
            )
            .group_by(*keys)
            .order_by(*keys)
        )
        with reading(self.engine, "summarising grades") as conn:
            return list(conn.execute(stmt).all())

    def grade_totals(
        self,
        *,
        task: Filter = None,
        baseline_model: Filter = None,
        grader_id: Filter = None,
        candidate_model: Filter = None,
    ) -> list[GradeTotals]:
        """Running totals per (task, baseline model, grader id, candidate model), one query.

        What routing reads: sums and counts kept current by every write, so the
        answer costs the same at a thousand grades or a million. Each filter takes
        one value or a sequence of values.
        """
        conditions = _totals_filter(task, baseline_model, candidate_model, grader_id)
        stmt = select(*(_S.c[name] for name in TOTALS_COLUMNS)).where(*conditions)
        with reading(self.engine, "reading grade totals") as conn:
            records = conn.execute(stmt).all()
        return [totals_row(r) for r in records]

    def export(
        self,
        path: str | Path,
        format: str = "jsonl",
        *,
        task: Filter = None,
        baseline_model: Filter = None,
        candidate_model: Filter = None,
        grader_id: Filter = None,
        run_id: Filter = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> int:
        """Write matching grades to ``path`` as JSON Lines or CSV; returns the rows written.

        CSV has one column per :class:`GradeRow` field; JSON-valued fields
        (tags, details, run config, tool calls) are JSON text in their cell.
        """
        if format not in ("jsonl", "csv"):
            raise ValueError(f"export format must be 'jsonl' or 'csv', not {format!r}")
        rows = self.results(
            task=task,
            baseline_model=baseline_model,
            candidate_model=candidate_model,
            grader_id=grader_id,
            run_id=run_id,
            since=since,
            until=until,
            limit=limit,
        )
        count = 0
        try:
            with open(path, "w", encoding="utf-8", newline="") as fh:
                if format == "jsonl":
                    for row in rows:
                        fh.write(json.dumps(row.to_dict(), ensure_ascii=False) + "\n")
                        count += 1
                else:
                    writer = csv.DictWriter(fh, fieldnames=list(GRADE_COLUMNS))
                    writer.writeheader()
                    for row in rows:
                        data = row.to_dict()
                        writer.writerow(
                            {
                                k: json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v
                                for k, v in data.items()
                            }
                        )
                        count += 1
        except OSError as exc:
            raise LedgerError(f"cannot write export to {path}: {exc}") from None
        return count

    def count(self, /, **filters: Any) -> int:
        """How many stored grades match the filters of :meth:`results`."""
        stmt = select(func.count()).select_from(_G).where(*self._filters(**filters))
        with reading(self.engine, "counting grades") as conn:
            return int(conn.execute(stmt).scalar_one())

    def graded_keys(self, run_id: str) -> set[tuple[str, str, str]]:
        """``(case_id, grader_id, candidate_model)`` of every grade stored for ``run_id``."""
        c = _G.c
        stmt = select(c.case_id, c.grader_id, c.candidate_model).where(
            and_(c.run_id == run_id, c.case_id.is_not(None))
        )
        with reading(self.engine, "reading completed cases") as conn:
            return {(r[0], r[1], r[2]) for r in conn.execute(stmt)}

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
        query = series_query(task, baseline_model, grader_id, candidate_model, after)
        if query is None:
            return []
        sql, params, parse = query
        with reading(self.engine, "reading case totals") as conn:
            return parse(fetch(conn, sql, params))

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
        query = series_query(task, baseline_model, None, None, after) if after else None
        with reading(self.engine, "reading routing totals") as conn:
            if query is None:
                return [totals_row(r) for r in fetch(conn, totals_sql, totals_params)], []
            totals, cases = fetch_together(conn, [(totals_sql, totals_params), query[:2]])
        return [totals_row(r) for r in totals], query[2](cases)


def _totals_filter(task: Filter, baseline: Filter, candidate: Filter, grader: Filter) -> list[Any]:
    """WHERE conditions on the running totals (``grade_stats``) for the filters given."""
    c = _S.c
    conditions = (
        match(c.task, task),
        match(c.baseline_model, baseline),
        match(c.candidate_model, candidate),
        match(c.grader_id, grader),
    )
    return [cond for cond in conditions if cond is not None]
