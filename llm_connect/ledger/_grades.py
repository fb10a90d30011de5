"""The grades store: every grade, its running totals (``grade_stats``, ``case_stats``), the figures
read from them. The record path and the idempotency key are described in ``docs/ledger.md``."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Connection, Table, and_, distinct, func, literal_column, select

from llm_connect.errors import LedgerError
from llm_connect.ledger._cases import TOTALS_COLUMNS, fetch, fetch_together, match, series_query, totals_row
from llm_connect.ledger._convert import INSERT_COLUMNS, KEY, conflict_error, differences, stored_ids
from llm_connect.ledger._engine import Store, driver_cursor, ledger_errors, reading, write
from llm_connect.ledger._models import GROUP_KEY, CaseStats, Grade, GradeStats
from llm_connect.ledger._rows import CaseSeries, GradeRow, GradeTotals, SummaryRow, grade_row
from llm_connect.ledger._stats import mean_std

_G = cast(Table, Grade.__table__)
_S = cast(Table, GradeStats.__table__)
_C = cast(Table, CaseStats.__table__)
GRADE_COLUMNS = tuple(GradeRow.__dataclass_fields__)
Filter = str | Sequence[str] | None
Key = tuple[Any, ...]
Row = tuple[Any, ...]

_KEY_AT = tuple(INSERT_COLUMNS.index(c) for c in KEY)
_INSERT = f"INSERT INTO grades ({', '.join(INSERT_COLUMNS)}) "
_CONFLICT = f" ON CONFLICT ({', '.join(KEY)}) DO NOTHING RETURNING id"
_RETURNING = f"{_CONFLICT}, {', '.join(KEY)}"  # the key returned with each id names the row
_KEY_OF = itemgetter(*_KEY_AT)
_ONE = {pg: f"{_INSERT}VALUES ({', '.join([ph] * len(INSERT_COLUMNS))})" for pg, ph in ((1, "%s"), (0, "?"))}
# PostgreSQL: a batch as one statement over one JSON array of the rows (all made at one moment, the
# first parameter): psycopg sends one text instead of binding 43 parameters a row.
_PG_TYPES = {"String": "text", "Text": "text", "Float": "float8", "Integer": "int4", "Boolean": "bool"}
_PG_TYPES.update(JSON="json", UTCDateTime="timestamptz")
_PG_VALUES = ", ".join(
    f"(r->>{i})::{_PG_TYPES[type(_G.c[c].type).__name__]}" for i, c in enumerate(INSERT_COLUMNS[1:])
)
_PG_MANY = f"{_INSERT}SELECT %s, {_PG_VALUES} FROM jsonb_array_elements(%s::jsonb) AS r"
_GROUP = ", ".join(GROUP_KEY)
_KEYS = ("task", "baseline_model", "candidate_model", "grader_id")  # a summary row's order
_SUMMED = (("cost", "cost_usd"), ("latency", "latency_ms"))
_SUMMED_COLUMN = dict(_SUMMED)
_SIDES = {f"{s}_{w}": f"{s}_{c}" for s in ("baseline", "candidate") for w, c in _SUMMED}
_TOTALS = {  # table -> (columns besides the key, their values over grades, the columns summed)
    "grade_stats": (
        f"n, sum_quality, sum_quality_sq, {', '.join(f'{t}_sum, {t}_n' for t in _SIDES)}, first_at, last_at, "
        "asks_llm",
        "COUNT(*), SUM(quality_score), SUM(quality_score * quality_score), "
        + ", ".join(f"COALESCE(SUM({c}), 0.0), COUNT({c})" for c in _SIDES.values())
        + ", MIN(created_at), MAX(created_at), MAX(CASE WHEN asks_llm THEN 1 ELSE 0 END) > 0",
        ("n", "sum_quality", "sum_quality_sq", *(f"{c}_{t}" for c in _SIDES for t in ("sum", "n"))),
    ),
    "case_stats": (
        "n, sum_quality, delta_n, delta_sum, first_id",
        "COUNT(*), SUM(quality_score), COUNT(score_delta), COALESCE(SUM(score_delta), 0.0), MIN(id)",
        ("n", "sum_quality", "delta_n", "delta_sum"),
    ),
}
_CASE_KEY = "CASE WHEN case_id IS NOT NULL THEN 'id:' || case_id ELSE 'sha256:' || prompt_sha256 END"


def _totals_sql(table: str, where: str) -> str:
    """Adds the grades ``where`` selects to ``table``'s running totals, one row per group in key
    order (one lock order for concurrent writers); also what rebuilds them (``where`` true)."""
    columns, values, added = _TOTALS[table]
    key, case = (_GROUP, "") if table == "grade_stats" else (f"{_GROUP}, case_key", f", {_CASE_KEY}")
    order = "1, 2, 3, 4" + (", 5" if case else "")

    def least(c: str, op: str = "<") -> str:
        return f"{c} = CASE WHEN excluded.{c} {op} {table}.{c} THEN excluded.{c} ELSE {table}.{c} END"

    other = [least("first_id")] if case else [least("first_at"), least("last_at", ">")]
    other += [] if case else ["asks_llm = grade_stats.asks_llm OR excluded.asks_llm"]
    return (
        f"INSERT INTO {table} ({key}, {columns}) SELECT {_GROUP}{case}, {values} FROM grades WHERE {where} "
        f"GROUP BY {order} ORDER BY {order} ON CONFLICT ({key}) DO UPDATE SET "
        + ", ".join([*(f"{c} = {table}.{c} + excluded.{c}" for c in added), *other])
    )


# case_stats before grade_stats: one lock order for every writer
_ADD_TOTALS = {
    pg: [_totals_sql(t, where) for t in ("case_stats", "grade_stats")]
    for pg, where in ((True, "id = ANY(%s)"), (False, "id IN (SELECT value FROM json_each(?))"))
}


def _one_by_one(cursor: Any, pg: bool, rows: list[Row]) -> list[Any]:
    """Insert ``rows`` one at a time (PostgreSQL: pipelined); ``(id, *key)`` of each row written."""
    if not pg:
        return [rec for row in rows for rec in cursor.execute(_ONE[pg] + _RETURNING, row).fetchall()]
    out: list[Any] = []
    cursor.executemany(_ONE[pg] + _RETURNING, rows, returning=True)
    while True:
        out += cursor.fetchall()
        if not cursor.nextset():
            return out


def _insert_keyed(cursor: Any, pg: bool, rows: list[Row]) -> list[Any]:
    """Insert ``rows`` (each under its own key) many per statement; ``(id, *key)`` of each row
    written (none for a key already stored)."""
    out: list[Any] = []
    for start in range(0, len(rows), 500):  # SQLite: 43 parameters a row, under its 32,766
        chunk = rows[start : start + 500]
        if not pg:
            values = ", ".join([_ONE[pg].partition(" VALUES ")[2]] * len(chunk))
            cursor.execute(f"{_INSERT}VALUES {values}{_RETURNING}", [v for row in chunk for v in row])
            out += cursor.fetchall()
            continue
        try:  # all rows of a batch are made at one moment, the first parameter
            data = json.dumps([row[1:] for row in chunk], ensure_ascii=False, allow_nan=False)
        except ValueError:  # a NaN latency or cost is no JSON
            out += _one_by_one(cursor, pg, chunk)
            continue
        out += cursor.execute(_PG_MANY + _RETURNING, (chunk[0][0], data)).fetchall()
    return out


class GradeStore(Store):
    """Grades and their running totals, and the figures read from them (what routing, reports
    and calibration use)."""

    def add(self, conn: Connection, rows: list[Row]) -> list[int]:
        """Insert :func:`~llm_connect.ledger._convert.grade_rows` rows in ``conn``'s transaction and
        add the new ones to the running totals; the grades' ids, in row order."""
        keys: list[Key] = list(map(_KEY_OF, rows))
        first: dict[Key, int] = {}  # each key once; a repeat in the batch gets its first row's id
        loose: list[int] = []  # rows without a key: each inserted, one at a time
        clashes: list[tuple[Key, int | None, list[str]]] = []
        for i, key in enumerate(keys):
            if key[0] is None or key[1] is None:
                loose.append(i)
            elif first.setdefault(key, i) != i:
                same = dict(zip(INSERT_COLUMNS, rows[first[key]], strict=True))
                clashes += [(key, None, diffs)] if (diffs := differences(same, rows[i])) else []
        if clashes:
            raise conflict_error(clashes)
        pg = conn.dialect.name == "postgresql"
        ids: list[Any] = [None] * len(rows)
        sent = sorted([*first.values(), *loose])  # in item order: ids ascend as the items
        with driver_cursor(conn, "INSERT INTO grades ...") as cursor:
            for keyed, run in groupby(sent, lambda i: keys[i][0] is not None and keys[i][1] is not None):
                part = list(run)
                if keyed:
                    for new_id, *key in _insert_keyed(cursor, pg, [rows[i] for i in part]):
                        ids[first[tuple(key)]] = new_id
                else:  # no key: every row is written, and the rows go in one at a time, in order
                    for i, rec in zip(part, _one_by_one(cursor, pg, [rows[i] for i in part]), strict=True):
                        ids[i] = rec[0]
            inserted = [ids[i] for i in sent if ids[i] is not None]
            # Keys already stored (an earlier batch, a concurrent writer): their ids, the grades checked.
            pending = {k: rows[i] for k, i in first.items() if ids[i] is None}
            stored = stored_ids(cursor, pending, "%s" if pg else "?")
            for i, key in enumerate(keys):
                if ids[i] is None:  # keyed: a stored key, or a repeat of an earlier row
                    ids[i] = stored[key] if first[key] == i else ids[first[key]]
            for sql in _ADD_TOTALS[pg] if inserted else ():
                cursor.execute(sql, (inserted if pg else json.dumps(inserted),))
        return ids

    def rebuild_stats(self) -> None:
        """Recompute the running totals (``grade_stats``, ``case_stats``) from ``grades``: only
        needed after grades were written or deleted with plain SQL behind the ledger's back."""

        def rebuild(conn: Connection) -> None:
            for table in ("grade_stats", "case_stats"):
                conn.exec_driver_sql(f"DELETE FROM {table}")
                conn.exec_driver_sql(_totals_sql(table, "true"))

        write(self.engine, "rebuilding grade totals", rebuild)

    # -- reading ---------------------------------------------------------------

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
        """Stored grades matching every filter given (one value or several), oldest first, streamed."""
        where = _where(_G, task, baseline_model, candidate_model, grader_id, since, until, run_id=run_id)
        stmt = select(*[_G.c[name] for name in GRADE_COLUMNS]).where(*where).order_by(_G.c.id).limit(limit)
        with ledger_errors("reading grades", self.engine.url), self.engine.connect() as conn:
            result = conn.execution_options(yield_per=1000).execute(stmt)
            try:
                yield from map(grade_row, result.mappings())
            finally:
                # A caller that stops early (``next(iter(results()))``) closes the generator: the
                # server-side cursor is closed here, not left to the garbage collector.
                result.close()

    def summary(
        self,
        *,
        task: Filter = None,
        baseline_model: Filter = None,
        candidate_model: Filter = None,
        grader_id: Filter = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[SummaryRow]:
        """One :class:`SummaryRow` per (task, baseline model, candidate model, grader id): grades,
        distinct cases, mean and standard deviation over grades, mean costs and latencies; no
        interval (routing's bounds count cases: :mod:`llm_connect.routing`). One statement: the
        running totals (cases from ``case_stats``) unless ``since``/``until``, else the grades."""
        sides = [(s, w) for w in ("cost", "latency") for s in ("baseline", "candidate")]
        filters = (task, baseline_model, candidate_model, grader_id)
        if since is None and until is None:  # the running totals: a few rows however many grades
            t, c = _S.c, _C.c
            per_case = (  # one case_stats row per case
                select(*(c[k] for k in _KEYS), func.count().label("cases"))
                .where(*_where(_C, *filters))
                .group_by(*(c[k] for k in _KEYS))
                .subquery()
            )
            on = and_(*(t[k] == per_case.c[k] for k in _KEYS))
            means = [t[f"{s}_{w}_sum"] / func.nullif(t[f"{s}_{w}_n"], 0) for s, w in sides]
            stmt = select(
                *(t[k] for k in _KEYS),
                t.n,
                func.coalesce(per_case.c.cases, 0),
                t.sum_quality,
                t.sum_quality_sq,
                *means,
            )
            stmt = stmt.add_columns(t.first_at, t.last_at).select_from(_S.outerjoin(per_case, on))
            where = _where(_S, *filters)
        else:
            t, q = _G.c, _G.c.quality_score
            cases = func.count(distinct(literal_column(_CASE_KEY)))  # a case as case_stats keys it
            avgs = [func.avg(t[f"{s}_{_SUMMED_COLUMN[w]}"]) for s, w in sides]
            at = (func.min(t.created_at), func.max(t.created_at))
            stmt = select(
                *(t[k] for k in _KEYS), func.count(), cases, func.sum(q), func.sum(q * q), *avgs, *at
            )
            stmt = stmt.group_by(*(t[k] for k in _KEYS))
            where = _where(_G, *filters, since, until)
        with reading(self.engine, "summarising grades") as conn:
            records = conn.execute(stmt.where(*where).order_by(*(t[k] for k in _KEYS))).all()
        out = []
        for r in records:
            n = int(r[4])
            mean, std = mean_std(n, float(r[6]), float(r[7]))
            avg = [None if v is None else float(v) for v in r[8:12]]
            row = (*r[:4], n, int(r[5]), mean or 0.0, std, *avg, *r[12:14])
            out.append(SummaryRow(*row))
        return out

    def grade_totals(
        self,
        *,
        task: Filter = None,
        baseline_model: Filter = None,
        grader_id: Filter = None,
        candidate_model: Filter = None,
    ) -> list[GradeTotals]:
        """Running totals per (task, baseline model, grader id, candidate model), one query."""
        where = _where(_S, task, baseline_model, candidate_model, grader_id)
        with reading(self.engine, "reading grade totals") as conn:
            return [
                totals_row(r) for r in conn.execute(select(*(_S.c[n] for n in TOTALS_COLUMNS)).where(*where))
            ]

    def export(self, path: str | Path, format: str = "jsonl", **filters: Any) -> int:
        """Write the grades :meth:`results` yields for ``filters`` to ``path`` as JSON Lines or CSV
        (JSON values as JSON text in their cell); returns the rows written."""
        if format not in ("jsonl", "csv"):
            raise ValueError(f"export format must be 'jsonl' or 'csv', not {format!r}")
        rows = self.results(**filters)
        count = 0
        try:
            with open(path, "w", encoding="utf-8", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=list(GRADE_COLUMNS)) if format == "csv" else None
                if writer is not None:
                    writer.writeheader()
                for count, row in enumerate(rows, 1):  # noqa: B007 - the count is returned
                    data = row.to_dict()
                    if writer is None:
                        fh.write(json.dumps(data, ensure_ascii=False) + "\n")
                    else:
                        writer.writerow({k: _cell(v) for k, v in data.items()})
        except OSError as exc:
            raise LedgerError(f"cannot write export to {path}: {exc}") from None
        return count

    def count(self, /, **filters: Any) -> int:
        """How many stored grades match the filters of :meth:`results`."""
        since, until = filters.pop("since", None), filters.pop("until", None)
        where = _where(_G, None, None, None, None, since, until, **filters)
        with reading(self.engine, "counting grades") as conn:
            return int(conn.execute(select(func.count()).select_from(_G).where(*where)).scalar_one())

    def graded_keys(self, run_id: str) -> set[tuple[str, str, str]]:
        """``(case_id, grader_id, candidate_model)`` of every grade stored for ``run_id``."""
        c = _G.c
        keyed = select(c.case_id, c.grader_id, c.candidate_model).where(c.case_id.is_not(None))
        stmt = keyed.where(c.run_id == run_id)
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
        """One :class:`CaseSeries` per (task, baseline model, grader id, candidate model), one query."""
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


def _cell(value: Any) -> Any:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value


def _where(table: Table, *filters: Any, **more: Filter) -> list[Any]:
    """WHERE conditions on ``table``: task, baseline model, candidate model, grader id, optionally
    ``since`` (inclusive) and ``until`` (exclusive), then the columns named in ``more``."""
    c, (since, until) = table.c, (*filters[4:], None, None)[:2]
    conditions = [match(c[k], v) for k, v in (*zip(_KEYS, filters[:4], strict=True), *more.items())]
    conditions += [
        None if since is None else c.created_at >= since,
        None if until is None else c.created_at < until,
    ]
    return [cond for cond in conditions if cond is not None]
