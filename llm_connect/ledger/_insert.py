"""The fast path that writes grades: the driver's own ``executemany``, inside the ledger's transaction.

Rows arrive as value tuples (:func:`~llm_connect.ledger._convert.batch_values`);
the idempotency key is (run_id, case_id, grader_id, candidate_model) when
run_id and case_id are both given. Duplicates within a batch share one row;
a key already stored returns the stored row's id and writes nothing.

* SQLite: the transaction holds the write lock (``BEGIN IMMEDIATE``); rows
  go in with ``sqlite3`` ``executemany`` (``ON CONFLICT DO NOTHING`` for keyed
  rows). New ids are consecutive after the current maximum (SQLite's rowid
  rule, with no other writer); when some keys already existed, the ids of the
  batch's keys are read back instead. The maximum id is verified afterwards.
* Both: the running totals in ``grade_stats`` (per grader and candidate) and
  ``case_stats`` (per case of those) are upserted for the rows actually
  inserted, in the same transaction. ``grade_stats`` gets one row per group,
  summed in Python; ``case_stats`` is summed by the database from the rows it
  just stored (one ``INSERT ... SELECT ... ON CONFLICT DO UPDATE``, no per-case
  parameters): on SQLite over the batch's new rowid range, on PostgreSQL inside
  the statement that moves the staged rows (from its ``RETURNING``), or over the
  new ids for a row-by-row batch.
* PostgreSQL: the batch's ids are taken from the ``grades.id`` sequence in one
  query; the rows (with those ids) go through ``COPY`` into a temporary staging
  table of the session (``ON COMMIT DELETE ROWS``), and one ``INSERT ... SELECT
  ... ON CONFLICT DO NOTHING RETURNING id`` moves them into ``grades``, emptying
  the stage. COPY is the fastest way into PostgreSQL (faster than psycopg's
  pipelined ``executemany``); keys that conflicted (a concurrent writer or an
  earlier run) are looked up afterwards, and their unused ids are left as gaps.
  Batches under :data:`PG_COPY_MIN_ROWS` rows, and every batch of a role
  without the TEMPORARY privilege on the database (checked once per
  connection), use psycopg's pipelined ``executemany(..., returning=True)``
  with ``ON CONFLICT DO NOTHING RETURNING id`` instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from llm_connect.errors import GradeConflictError, LedgerError
from llm_connect.ledger._convert import INSERT_COLUMNS, KEY_POSITIONS
from llm_connect.ledger._models import CASE_KEY_SQL

__all__ = ["PG_COPY_MIN_ROWS", "SAME_GRADE_COLUMNS", "created_value", "insert_grades", "sqlite_timestamp"]

_COLS = ", ".join(INSERT_COLUMNS)
_KEY_COLS = "run_id, case_id, grader_id, candidate_model"
_SQLITE_INSERT = f"INSERT INTO grades ({_COLS}) VALUES ({', '.join('?' for _ in INSERT_COLUMNS)})"
_SQLITE_INSERT_KEYED = f"{_SQLITE_INSERT} ON CONFLICT ({_KEY_COLS}) DO NOTHING"
_PG_INSERT = (
    f"INSERT INTO grades ({_COLS}) VALUES ({', '.join('%s' for _ in INSERT_COLUMNS)}) "
    f"ON CONFLICT ({_KEY_COLS}) DO NOTHING RETURNING id"
)
_STAGE_ALLOWED = "llm_connect_may_stage"  # key in the pooled connection's info
#: Batches at least this long go through COPY; below it the extra round trips (ids, staging
#: table, move) cost more than COPY saves (1 row: 1.5 vs 0.7 ms; 25: 2.4 vs 2.3; 100: 5.5 vs 6.6).
PG_COPY_MIN_ROWS = 50
_PG_NEXT_IDS = (
    "SELECT nextval(seq) FROM (SELECT pg_get_serial_sequence('grades', 'id')::regclass AS seq) AS s, "
    "generate_series(1, %s)"
)
# Named after the column list, so a release that writes other columns stages into a table of its own
# (a pooled session may keep the previous release's staging table).
_PG_STAGE = "llm_connect_grades_in_" + hashlib.sha256(_COLS.encode()).hexdigest()[:10]
_PG_STAGE_CREATE = (
    f"CREATE TEMPORARY TABLE IF NOT EXISTS {_PG_STAGE} ON COMMIT DELETE ROWS AS "
    f"SELECT id, {_COLS} FROM grades WITH NO DATA"
)
_PG_COPY = f"COPY {_PG_STAGE} (id, {_COLS}) FROM STDIN"
_LOOKUP_CHUNK = 200  # keys per lookup statement (4 parameters each)

_STAT_KEY = ("task", "baseline_model", "grader_id", "candidate_model")
_STAT_COLS = (
    *_STAT_KEY,
    "n",
    "sum_quality",
    "sum_quality_sq",
    "baseline_cost_sum",
    "baseline_cost_n",
    "candidate_cost_sum",
    "candidate_cost_n",
    "baseline_latency_sum",
    "baseline_latency_n",
    "candidate_latency_sum",
    "candidate_latency_n",
    "first_at",
    "last_at",
    "asks_llm",
)
_ADDED = _STAT_COLS[4:-3]
_POS = {name: INSERT_COLUMNS.index(name) for name in INSERT_COLUMNS}


def _stats_upsert(placeholder: str, least: str, greatest: str) -> str:
    updates = ", ".join(f"{c} = grade_stats.{c} + excluded.{c}" for c in _ADDED)
    return (
        f"INSERT INTO grade_stats ({', '.join(_STAT_COLS)}) "
        f"VALUES ({', '.join(placeholder for _ in _STAT_COLS)}) "
        f"ON CONFLICT ({', '.join(_STAT_KEY)}) DO UPDATE SET {updates}, "
        f"first_at = {least}(grade_stats.first_at, excluded.first_at), "
        f"last_at = {greatest}(grade_stats.last_at, excluded.last_at), "
        "asks_llm = grade_stats.asks_llm OR excluded.asks_llm"
    )


_SQLITE_STATS = _stats_upsert("?", "min", "max")
_PG_STATS = _stats_upsert("%s", "LEAST", "GREATEST")

_CASE_KEY = (*_STAT_KEY, "case_key")
_CASE_COLS = (*_CASE_KEY, "n", "sum_quality", "delta_n", "delta_sum", "first_id")


def _case_upsert(values: str, least: str) -> str:
    added = ", ".join(f"{c} = case_stats.{c} + excluded.{c}" for c in _CASE_COLS[5:9])
    return (
        f"INSERT INTO case_stats ({', '.join(_CASE_COLS)}) {values} "
        f"ON CONFLICT ({', '.join(_CASE_KEY)}) DO UPDATE SET {added}, "
        f"first_id = {least}(case_stats.first_id, excluded.first_id)"
    )


# The case totals of grades, summed by the database from the rows just inserted: no per-row
# parameters and no aggregation in Python; the same sums as CASE_STATS_REBUILD_SQL.
_CASE_KEY_COLS = "task, baseline_model, grader_id, candidate_model"


def _case_totals(source: str) -> str:
    """PostgreSQL: one row per case of ``source`` (an upsert may not touch a row twice), in key
    order (concurrent writers then lock the rows in one order)."""
    return _case_upsert(
        f"SELECT {_CASE_KEY_COLS}, {CASE_KEY_SQL}, COUNT(*), SUM(quality_score), COUNT(score_delta), "
        f"COALESCE(SUM(score_delta), 0.0), MIN(id) FROM {source} "
        "GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5",
        "LEAST",
    )


# SQLite: one grade at a time, no GROUP BY (SQLite upserts row by row, so a case repeated in the
# batch adds to the row its first grade created; sorting the batch would cost more than the
# upsert). The rows this transaction inserted are those above the maximum id before it (we hold
# the write lock); NOT INDEXED: a rowid range, never a scan of an index that happens to be sorted.
_SQLITE_CASES = _case_upsert(
    f"SELECT {_CASE_KEY_COLS}, {CASE_KEY_SQL}, 1, quality_score, score_delta IS NOT NULL, "
    "COALESCE(score_delta, 0.0), id FROM grades NOT INDEXED WHERE id > ?",
    "min",
)
# PostgreSQL, small batches: the ids just inserted.
_PG_CASES = _case_totals("grades WHERE id = ANY(%s)")
# PostgreSQL, COPY: one statement moves the staged rows into grades (emptying the stage), adds the
# case totals of the rows it inserted (a key already stored is skipped) and returns their ids.
_PG_MOVE = (
    f"WITH staged AS (DELETE FROM {_PG_STAGE} RETURNING *), "
    f"moved AS (INSERT INTO grades (id, {_COLS}) SELECT id, {_COLS} FROM staged "
    f"ON CONFLICT ({_KEY_COLS}) DO NOTHING "
    f"RETURNING id, {_CASE_KEY_COLS}, case_id, prompt_sha256, quality_score, score_delta), "
    f"cases AS ({_case_totals('moved')}) "
    "SELECT id FROM moved"
)


_I_TASK, _I_BASE, _I_GRADER, _I_CAND = (_POS[c] for c in _STAT_KEY)
_I_Q, _I_CREATED, _I_ASKS = _POS["quality_score"], _POS["created_at"], _POS["asks_llm"]
# In the order of the (sum, count) pairs of _STAT_COLS.
_I_SUMMED_COLUMNS = tuple(
    _POS[c]
    for c in ("baseline_cost_usd", "candidate_cost_usd", "baseline_latency_ms", "candidate_latency_ms")
)
_stat_key = itemgetter(_I_TASK, _I_BASE, _I_GRADER, _I_CAND)
_row_key = itemgetter(*KEY_POSITIONS)


def _stats(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Totals per (task, baseline model, grader id, candidate model) of newly inserted rows."""
    by_key: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for r in rows:  # group first: the sums below then run over plain lists
        key = _stat_key(r)
        group = by_key.get(key)
        if group is None:
            by_key[key] = [r]
        else:
            group.append(r)
    out = []
    # A fixed order of upserts: concurrent writers lock the totals rows in the same order.
    for key in sorted(by_key):
        group = by_key[key]
        qs = [r[_I_Q] for r in group]
        acc: list[Any] = [len(group), float(sum(qs)), float(sum(q * q for q in qs))]
        for column in _I_SUMMED_COLUMNS:
            values = [v for r in group if (v := r[column]) is not None]
            acc += [float(sum(values)), len(values)]
        created = [r[_I_CREATED] for r in group]
        out.append((*key, *acc, min(created), max(created), any(r[_I_ASKS] for r in group)))
    return out


Key = tuple[Any, ...]


def sqlite_timestamp(moment: datetime) -> str:
    """``moment`` in the text form SQLAlchemy stores SQLite timestamps in (naive UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def created_value(moment: datetime, dialect: str) -> Any:
    """``moment`` as the ``created_at`` value the driver gets for ``dialect``."""
    return sqlite_timestamp(moment) if dialect == "sqlite" else moment


def _key(values: Sequence[Any]) -> Key | None:
    key: Key = _row_key(values)
    return key if key[0] is not None and key[1] is not None else None


#: What makes two grades under one key "the same grade" (re-recording it is then a no-op).
SAME_GRADE_COLUMNS: tuple[str, ...] = (
    "task",
    "baseline_model",
    "prompt_sha256",
    "baseline_text_sha256",
    "candidate_text_sha256",
    "quality_score",
    "candidate_served_model",
)
_I_SAME = tuple(_POS[c] for c in SAME_GRADE_COLUMNS)
_same_values = itemgetter(*_I_SAME)


def _differences(stored: Sequence[Any], new: Sequence[Any]) -> list[str]:
    """Fields in which two grades under one key differ ("" when they are the same grade).

    A stored ``candidate_served_model`` of ``None`` (not recorded) matches anything.
    """
    out = []
    for name, old, value in zip(SAME_GRADE_COLUMNS, stored, new, strict=True):
        if old == value or (name == "candidate_served_model" and old is None):
            continue
        out.append(f"{name} stored {old!r}, new {value!r}")
    return out


def _conflict(found: list[tuple[Key, int | None, list[str]]]) -> GradeConflictError:
    lines = []
    for key, stored_id, diffs in found[:5]:
        where = f"grade #{stored_id}" if stored_id is not None else "an earlier grade of this batch"
        lines.append(
            f"run {key[0]!r}, case {key[1]!r}, grader {key[2]!r}, candidate {key[3]!r}: {where} differs "
            f"({'; '.join(diffs)})"
        )
    more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
    return GradeConflictError(
        f"{len(found)} grade(s) conflict with stored grades under the same key, nothing was written: "
        + " | ".join(lines)
        + more
        + ". Use a new run id, or resume the run to grade only what is missing.",
        keys=tuple(k for k, _, _ in found),
    )


def _plan(rows: list[tuple[Any, ...]]) -> tuple[list[Key | None], dict[Key, int]]:
    """Each row's key, and the first row index of each distinct key.

    A key repeated within the batch with different content raises :class:`GradeConflictError`.
    """
    keys = [_key(r) for r in rows]
    first: dict[Key, int] = {}
    clashes: list[tuple[Key, int | None, list[str]]] = []
    for i, key in enumerate(keys):
        if key is not None:
            j = first.setdefault(key, i)
            if j != i:
                diffs = _differences(_same_values(rows[j]), _same_values(rows[i]))
                if diffs:
                    clashes.append((key, None, diffs))
    if clashes:
        raise _conflict(clashes)
    return keys, first


def _check_existing(cursor: Any, placeholder: str, pending: dict[Key, tuple[Any, ...]]) -> dict[Key, int]:
    """Ids of the stored grades under ``pending``'s keys (key -> row values); raises
    :class:`GradeConflictError` if one holds different content."""
    if not pending:
        return {}
    cols = ", ".join(SAME_GRADE_COLUMNS)
    one = f"({', '.join(placeholder for _ in range(4))})"
    keys = list(pending)
    found: dict[Key, int] = {}
    clashes: list[tuple[Key, int | None, list[str]]] = []
    for start in range(0, len(keys), _LOOKUP_CHUNK):
        chunk = keys[start : start + _LOOKUP_CHUNK]
        cursor.execute(
            f"SELECT id, {_KEY_COLS}, {cols} FROM grades WHERE ({_KEY_COLS}) IN "
            f"(VALUES {', '.join(one for _ in chunk)})",
            [v for key in chunk for v in key],
        )
        for rec in cursor.fetchall():
            key = tuple(rec[1:5])
            found[key] = rec[0]
            diffs = _differences(rec[5:], _same_values(pending[key]))
            if diffs:
                clashes.append((key, rec[0], diffs))
    if clashes:
        raise _conflict(clashes)
    return found


def _insert_sqlite(dbapi: Any, rows: list[tuple[Any, ...]]) -> list[int]:
    keys, first = _plan(rows)
    plain = [i for i, key in enumerate(keys) if key is None]
    keyed = list(first.values())
    ids: list[int | None] = [None] * len(rows)
    inserted: list[int] = []
    cursor = dbapi.cursor()
    try:
        cursor.execute("SELECT COALESCE(MAX(id), 0) FROM grades")
        start = first_new = int(cursor.fetchone()[0])
        # We hold the write lock: each new row gets max(id) + 1, so ids are consecutive.
        if plain:
            cursor.executemany(_SQLITE_INSERT, rows if len(plain) == len(rows) else [rows[i] for i in plain])
            for offset, i in enumerate(plain, start=1):
                ids[i] = start + offset
            inserted += plain
            start += len(plain)
        if keyed:
            # Every row keyed by a distinct key (the usual batch): `keyed` is 0..n-1, in order.
            batch = rows if len(keyed) == len(rows) else [rows[i] for i in keyed]
            cursor.executemany(_SQLITE_INSERT_KEYED, batch)
            if cursor.rowcount == len(keyed):  # no key was stored before: consecutive ids
                if len(keyed) == len(rows):
                    ids = list(range(start + 1, start + 1 + len(rows)))
                else:
                    for offset, i in enumerate(keyed, start=1):
                        ids[i] = start + offset
                inserted += keyed
            else:  # some keys existed: read every key's id (ids above `start` are new) in the
                # query that also checks a stored grade is this one (a new row matches itself)
                found = _check_existing(cursor, "?", {keys[i]: rows[i] for i in keyed})  # type: ignore[misc]
                for i in keyed:
                    ids[i] = found[keys[i]]  # type: ignore[index]
                    if found[keys[i]] > start:  # type: ignore[index]
                        inserted.append(i)
        cursor.execute("SELECT COALESCE(MAX(id), 0) FROM grades")
        end = int(cursor.fetchone()[0])
        if end != start + (len(inserted) - len(plain)):
            raise LedgerError(f"unexpected row ids after inserting {len(inserted)} grades (max id {end})")
        if inserted:
            new_rows = rows if len(inserted) == len(rows) else [rows[i] for i in inserted]
            cursor.executemany(_SQLITE_STATS, _stats(new_rows))
            cursor.execute(_SQLITE_CASES, (first_new,))
    finally:
        cursor.close()
    if None not in ids:  # every row was inserted: its own id
        return ids  # type: ignore[return-value]
    by_key = {key: ids[i] for key, i in first.items()}
    return [_id_of(ids[i], keys[i], by_key) for i in range(len(rows))]


def _copy_in(cursor: Any, batch: list[tuple[Any, ...]]) -> list[int | None]:
    """Insert ``batch`` through the staging table; each row's new id, or None where its key existed."""
    # Ids first (in row order), then the rows through COPY into the session's staging table,
    # then one INSERT ... SELECT that moves them (emptying the stage) and returns the ids it
    # inserted: a row whose key is already stored is skipped.
    cursor.execute(_PG_NEXT_IDS, (len(batch),))
    new_ids: list[int | None] = sorted(rec[0] for rec in cursor.fetchall())
    cursor.execute(_PG_STAGE_CREATE)
    with cursor.copy(_PG_COPY) as copy:
        write_row = copy.write_row
        for new_id, row in zip(new_ids, batch, strict=True):
            write_row((new_id, *row))
    cursor.execute(_PG_MOVE)
    inserted = {rec[0] for rec in cursor.fetchall()}
    if len(inserted) == len(new_ids):  # the usual batch: every row is new
        return new_ids
    return [new_id if new_id in inserted else None for new_id in new_ids]


def _execute_in(cursor: Any, batch: list[tuple[Any, ...]]) -> list[int | None]:
    """Insert ``batch`` row by row (pipelined ``executemany``), for small batches and for roles
    that may not create temporary tables; each row's new id, or None where its key existed."""
    cursor.executemany(_PG_INSERT, batch, returning=True)
    out: list[int | None] = []
    while True:
        rec = cursor.fetchone()
        out.append(None if rec is None else rec[0])
        if not cursor.nextset():
            return out


def _insert_postgres(dbapi: Any, rows: list[tuple[Any, ...]], *, stage: bool) -> list[int]:
    keys, first = _plan(rows)
    sent = [i for i, key in enumerate(keys) if key is None or first[key] == i]
    batch = rows if len(sent) == len(rows) else [rows[i] for i in sent]
    with dbapi.cursor() as cursor:
        # Through COPY, the statement that moves the rows also adds their case totals; row by row,
        # one statement after the inserts does. Either way case_stats before grade_stats: one lock
        # order for every writer.
        own = _copy_in(cursor, batch) if stage else _execute_in(cursor, batch)
        if len(sent) == len(rows) and None not in own:  # every row was inserted: its own id
            if not stage:
                cursor.execute(_PG_CASES, (own,))
            cursor.executemany(_PG_STATS, _stats(rows))
            return own  # type: ignore[return-value]
        ids: list[int | None] = [None] * len(rows)
        for i, new_id in zip(sent, own, strict=True):
            ids[i] = new_id
        fresh = [i for i in sent if ids[i] is not None]
        if fresh:
            if not stage:
                cursor.execute(_PG_CASES, ([ids[i] for i in fresh],))
            cursor.executemany(_PG_STATS, _stats([rows[i] for i in fresh]))
        conflicted = {key: rows[i] for key, i in first.items() if ids[i] is None}
        existing = _check_existing(cursor, "%s", conflicted)
    by_key = {**existing, **{key: ids[i] for key, i in first.items() if ids[i] is not None}}
    return [_id_of(ids[i], keys[i], by_key) for i in range(len(rows))]


def _may_stage(conn: Connection, dbapi: Any) -> bool:
    """Whether this session may create the temporary staging table (asked once per connection)."""
    info = conn.connection.info
    allowed = info.get(_STAGE_ALLOWED)
    if allowed is None:
        with dbapi.cursor() as cursor:
            cursor.execute("SELECT has_database_privilege(current_database(), 'TEMPORARY')")
            allowed = info[_STAGE_ALLOWED] = bool(cursor.fetchone()[0])
    return bool(allowed)


def _id_of(own: int | None, key: Key | None, by_key: dict[Key, int | None]) -> int:
    """A row's own new id, else the id stored under its key."""
    if own is not None:
        return own
    found = by_key.get(key) if key is not None else None
    if found is None:  # pragma: no cover - every keyless row is inserted
        raise LedgerError(f"no row id for grade key {key!r}")
    return found


def insert_grades(conn: Connection, rows: list[tuple[Any, ...]]) -> list[int]:
    """Insert value tuples into ``grades`` within ``conn``'s open transaction; ids in row order.

    ``created_at`` must already be in the dialect's form (:func:`created_value`).
    """
    dbapi = conn.connection.driver_connection
    module = conn.dialect.dbapi
    try:
        if conn.dialect.name == "sqlite":
            return _insert_sqlite(dbapi, rows)
        stage = len(rows) >= PG_COPY_MIN_ROWS and _may_stage(conn, dbapi)
        return _insert_postgres(dbapi, rows, stage=stage)
    except module.Error as exc:  # type: ignore[union-attr]
        # Map the driver's error as SQLAlchemy would have (OperationalError, IntegrityError...).
        disconnected = conn.dialect.is_disconnect(exc, dbapi, None)
        if disconnected:
            conn.invalidate(exc)
        raise DBAPIError.instance(
            "INSERT INTO grades ...",
            None,
            exc,
            module.Error,  # type: ignore[union-attr]
            hide_parameters=True,
            connection_invalidated=disconnected,
            dialect=conn.dialect,
        ) from exc
