"""The SQL of the figures read from the running totals (``grade_stats``, ``case_stats``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any, TypeVar, cast

from sqlalchemy import Connection

from llm_connect.ledger._models import GROUP_KEY
from llm_connect.ledger._rows import CaseSeries, GradeTotals

Filter = str | Sequence[str] | None
T = TypeVar("T")


def match(column: Any, value: Filter) -> Any:
    """``column == value`` / ``column IN values`` (``None``: no condition)."""
    if value is None:
        return None
    if isinstance(value, str):
        return column == value
    return column.in_(list(value))


def where(*conditions: tuple[Any, Filter]) -> list[Any]:
    """:func:`match` of each (column, filter) whose filter is given."""
    return [match(column, value) for column, value in conditions if value is not None]


def chunks(items: list[T], size: int = 500) -> Iterator[list[T]]:
    """``items`` in slices of at most ``size`` (keys per ``IN (...)``: well under both backends'
    parameter limits)."""
    return (items[start : start + size] for start in range(0, len(items), size))


def fetch(conn: Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
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


def json_value(value: Any) -> Any:
    """A JSON value as the driver returns it (:func:`fetch`): text on SQLite, parsed by psycopg."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def fetch_together(conn: Connection, queries: Sequence[tuple[str, tuple[Any, ...]]]) -> list[list[Any]]:
    """The rows of each query: on psycopg sent in one pipeline (one round trip), else in turn."""
    if conn.dialect.driver != "psycopg":
        return [fetch(conn, sql, params) for sql, params in queries]
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


#: The ``grade_stats`` columns of a :class:`GradeTotals`, in its order (a sum and a count per side).
TOTALS_COLUMNS = (
    *GROUP_KEY,
    *("n", "sum_quality", "sum_quality_sq"),
    *(f"{s}_{w}_{t}" for s in ("candidate", "baseline") for w in ("cost", "latency") for t in ("sum", "n")),
    "asks_llm",
)


def _mean(total: Any, count: Any) -> float | None:
    return float(total) / count if count else None


def totals_row(r: Sequence[Any]) -> GradeTotals:
    """A :class:`GradeTotals` from a row of :data:`TOTALS_COLUMNS` (each sum becomes a mean)."""
    means = [v for i in range(7, 15, 2) for v in (_mean(r[i], r[i + 1]), int(r[i + 1]))]
    values: tuple[Any, ...] = (*r[:4], int(r[4]), float(r[5]), float(r[6]), *means, bool(r[15]))
    return GradeTotals(**dict(zip(GradeTotals.__dataclass_fields__, values, strict=True)))


def series_query(
    task: Filter,
    baseline_model: Filter,
    grader_id: Filter,
    candidate_model: Filter,
    after: Mapping[tuple[str, str], int] | None,
) -> tuple[str, tuple[Any, ...], Callable[[list[Any]], list[CaseSeries]]] | None:
    """The SQL, parameters and row parser of :meth:`GradeStore.case_series` (``None``: nothing
    can match)."""
    clauses: list[str] = []
    params: list[Any] = []
    codes: list[str] = []
    code_params: list[Any] = []
    texts: list[str] = []  # key columns read as text (no filter)
    known: list[list[str]] = []  # per key column: its filter's values ([] when read as text)
    stride = 1
    for column, value in zip(GROUP_KEY, (task, baseline_model, grader_id, candidate_model), strict=True):
        if value is None:
            texts.append(column)
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
    key_sql = [" + ".join(codes) if codes else "0", *texts]
    select = f"SELECT {', '.join(key_sql)}, n, sum_quality, delta_n, delta_sum, first_id FROM case_stats"
    width = len(key_sql)
    if after is None:
        sql = (
            select
            + (" WHERE " + " AND ".join(clauses) if clauses else "")
            + f" ORDER BY {', '.join(GROUP_KEY)}, first_id"
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
