"""Reading the sampling design and the labels as arrays, in full or past a mark.

Routing on what people would say (``routing/_human.py``) reads, per (task, baseline,
candidate, grader), the sampled cases in the sampler's order joined to the judge's grade
(:meth:`SamplingStore.design` does the same into tuples) and people's labels. A Router asks
after every batch, so :class:`DesignReader` gives both as arrays and can read only what
came after a :class:`DesignMark` (the sampling rows past the last position read, the cases
graded since, the labels past the last id), in one snapshot, with the checks that tell
whether the earlier read is still exact:

* **grades** - every grade written adds to the group's running totals (``grade_stats``).
  When the totals grew by exactly the cases that arrived since (``case_stats`` rows past
  the greatest ``first_id`` read), no case read before has a new grade, so its judge value
  stands; otherwise (a replicate of a known case, a case committed out of order) the group
  is read in full. A case that arrived since and was sampled at a position already read
  (it was graded against another baseline first) also means a full read.
* **labels** - a version of the labels up to the last id read (count, and sums over ids
  and contents); unchanged, only labels past that id are read; changed (a label
  replaced), every label of the candidate is read again.

Labels and sampling rows are never deleted; sampling rows never change.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
from sqlalchemy import Connection

from llm_connect.ledger._cases import chunks, json_value
from llm_connect.ledger._cases import fetch as _fetch
from llm_connect.ledger._engine import Store, reading
from llm_connect.ledger._models import PREFERENCE_CODE

__all__ = ["DesignMark", "DesignReader", "DesignRows", "LabelRows"]

_GROUP = "task = %s AND baseline_model = %s AND grader_id = %s AND candidate_model = %s"
_JOINED = (
    "SELECT s.position, CASE WHEN s.chosen THEN -s.inclusion ELSE s.inclusion END, s.floor, "
    "c.sum_quality / c.n FROM label_sampling s JOIN case_stats c ON c.task = s.task "
    "AND c.baseline_model = %s AND c.grader_id = s.grader_id AND c.candidate_model = s.candidate "
    "AND c.case_key = 'id:' || s.case_id "
    "WHERE s.task = %s AND s.candidate = %s AND s.grader_id = %s AND s.position > %s ORDER BY s.position"
)
_TOTALS = f"SELECT n, sum_quality FROM grade_stats WHERE {_GROUP}"
_LAST = f"SELECT MAX(first_id) FROM case_stats WHERE {_GROUP}"
_ID_CASES = f"SELECT COUNT(*) FROM case_stats WHERE {_GROUP} AND case_key LIKE 'id:%%'"
_ARRIVED = (
    "SELECT c.first_id, c.n, c.sum_quality, c.case_key LIKE 'id:%%', s.position FROM case_stats c "
    "LEFT JOIN label_sampling s ON s.task = c.task AND s.candidate = c.candidate_model "
    "AND s.grader_id = c.grader_id AND s.case_id = substr(c.case_key, 4) AND c.case_key LIKE 'id:%%' "
    "WHERE c.task = %s AND c.baseline_model = %s AND c.grader_id = %s AND c.candidate_model = %s "
    "AND c.first_id > %s"
)
# PostgreSQL plans the join of a group's sampled cases to their grades from table statistics;
# without them (a ledger just filled, before autovacuum's ANALYZE, or autovacuum off) it
# estimates one row a side and filters the group's every case per row: a first decision on
# 20,000 cases took 103.7 s, a routing-loop step 1.5 s. A full read first refreshes the two
# tables' statistics when PostgreSQL's estimate of their rows lags the live count by half, and
# runs without nested loops (a hash or merge join is linear in the group's cases whatever the
# estimates: a task new to the statistics, 100,000 cases, 0.33 s instead of minutes).
_STALE = (
    "SELECT c.relname FROM pg_class c JOIN pg_stat_user_tables t ON t.relid = c.oid "
    "WHERE c.relname IN ('case_stats', 'label_sampling') "
    "AND c.relnamespace = to_regnamespace(current_schema()) "
    "AND t.n_live_tup > 1000 AND (c.reltuples < 0 OR c.reltuples * 2 < t.n_live_tup)"
)
# The planner's estimate of a group's sampled cases. A group whose task or candidate the
# statistics have never seen is estimated at one row, and then even a read of 99 rows past the
# mark joins each to every case of the group (3.5 s at 100,000); a full read that finds many more
# rows than estimated refreshes the statistics, so that later reads look each case up.
_ESTIMATES = {
    "label_sampling": "EXPLAIN (FORMAT JSON) SELECT 1 FROM label_sampling "
    "WHERE task = %s AND candidate = %s AND grader_id = %s",
    "case_stats": f"EXPLAIN (FORMAT JSON) SELECT 1 FROM case_stats WHERE {_GROUP}",
}
#: Rows a full read must find before an estimate far below them refreshes the statistics.
_ANALYZE_ABOVE = 1000
# The ids as a joined list, not IN (...): SQLite's planner would scan the covering index
# ix_label_sampling_design (task, candidate, grader_id, position, ...) for an IN list.
_POSITIONS = (
    "WITH v(id) AS (VALUES {}) SELECT s.case_id, s.position FROM v JOIN label_sampling s "
    "ON s.task = %s AND s.candidate = %s AND s.grader_id = %s AND s.case_id = v.id"
)
_LABEL_VERSION = (
    f"SELECT COUNT(*), SUM(id * {PREFERENCE_CODE}), SUM(score * id) FROM human_labels "
    "WHERE task = %s AND candidate = %s AND id <= %s"
)
_LABELS = (
    "SELECT id, case_id, preference, score FROM human_labels "
    "WHERE task = %s AND candidate = %s AND id > %s ORDER BY id"
)


@dataclass(frozen=True, slots=True, eq=False)
class DesignRows:
    """Sampled cases of one group in the sampler's order, as arrays (parallel, one per case):
    ``positions`` (int64, the sampler's positions), ``judge`` (the judge's mean grade against
    the baseline, clipped to 0..1), ``inclusion`` and ``chosen``; ``floor``: the least floor
    of these rows (``None`` without any)."""

    positions: Any
    judge: Any
    inclusion: Any
    chosen: Any
    floor: float | None

    def __len__(self) -> int:
        return int(self.positions.size)


@dataclass(frozen=True, slots=True)
class DesignMark:
    """Where a group's read stopped: the last sampling position joined (-1: none), the
    greatest ``first_id`` of its cases (-1: none), its grades and Σ quality, and how many of
    its cases have a case id."""

    position: int
    first_id: int
    grades: int
    sum_quality: float
    id_cases: int


@dataclass(frozen=True, slots=True)
class LabelRows:
    """Labels of one (task, candidate) with ids past a mark: ``(case_id, preference, score)``
    each, in id order; ``full``: every label (the earlier ones changed, or no mark);
    ``last_id`` and ``version`` make the next mark."""

    rows: tuple[tuple[str, str | None, float | None], ...]
    full: bool
    last_id: int
    version: tuple[Any, ...]


def _rows(raw: list[Any]) -> DesignRows:
    """:class:`DesignRows` of ``(position, ±inclusion (negative: chosen), floor, judge)`` rows."""
    flat = np.fromiter(chain.from_iterable(raw), dtype=float, count=4 * len(raw)).reshape(-1, 4)
    signed = flat[:, 1]
    chosen = signed < 0.0
    return DesignRows(
        positions=flat[:, 0].astype(np.int64),
        judge=np.minimum(1.0, np.maximum(0.0, flat[:, 3])),
        inclusion=np.abs(signed),
        chosen=chosen,
        floor=float(flat[:, 2].min()) if len(raw) else None,
    )


def join_rows(old: DesignRows, new: DesignRows) -> DesignRows:
    """``old`` followed by ``new`` (new arrays; neither is changed)."""
    if not len(new):
        return old
    if not len(old):
        return new
    assert old.floor is not None and new.floor is not None
    names = ("positions", "judge", "inclusion", "chosen")
    arrays = {f: np.concatenate((getattr(old, f), getattr(new, f))) for f in names}
    return DesignRows(**arrays, floor=min(old.floor, new.floor))


class DesignReader(Store):
    """Reads a group's sampling design and a candidate's labels as arrays, in full or past a mark.

    Example::

        reader = DesignReader(ledger.engine)
        rows, mark = reader.design("qa", "big", "small", "judge")
        more = reader.design_since("qa", "big", "small", "judge", mark)  # None: read in full
    """

    @contextmanager
    def _snapshot(self, what: str = "reading label sampling") -> Iterator[Connection]:
        """One transaction whose statements see one snapshot (SQLite: ``BEGIN``, WAL; PostgreSQL:
        repeatable read); errors name ``what``."""
        with reading(self.engine, what, "REPEATABLE READ") as conn, conn.begin():
            yield conn

    def _analyze_if_stale(self) -> None:
        """PostgreSQL: ``ANALYZE`` ``case_stats`` and ``label_sampling`` when their statistics
        lag their rows (see ``_STALE``); a role that may not analyze them gets a warning from
        the server and the read goes on."""
        if self.engine.dialect.name != "postgresql":
            return
        with reading(self.engine, "refreshing table statistics") as conn:
            for (table,) in _fetch(conn, _STALE, ()):
                conn.exec_driver_sql(f"ANALYZE {table}")

    def _analyze_if_unseen(self, group: tuple[str, str, str, str], found: int) -> None:
        """PostgreSQL: ``ANALYZE`` each of ``label_sampling`` and ``case_stats`` whose planner
        estimate of the group's rows is under half of the ``found`` sampled cases a full read just
        read (each table on its own: ``_STALE`` reads the server's row counts, which a writer
        reports up to seconds late, so it can miss a table that just grew)."""
        task, _, grader_id, candidate = group
        params = {"label_sampling": (task, candidate, grader_id), "case_stats": group}
        with reading(self.engine, "refreshing table statistics") as conn:
            for table, sql in _ESTIMATES.items():
                plan = _fetch(conn, sql, params[table])[0][0]
                plan = json_value(plan)
                if float(plan[0]["Plan"]["Plan Rows"]) * 2 < found:
                    conn.exec_driver_sql(f"ANALYZE {table}")

    def design(
        self, task: str, baseline: str, candidate: str, grader_id: str
    ) -> tuple[DesignRows, DesignMark]:
        """Every sampled case of the group with its judge value, and the mark to read on from."""
        group = (task, baseline, grader_id, candidate)
        self._analyze_if_stale()
        pg = self.engine.dialect.name == "postgresql"
        with self._snapshot() as conn:
            if pg:
                conn.exec_driver_sql("SET LOCAL enable_nestloop = off")
            totals = _fetch(conn, _TOTALS, group)
            # The greatest first_id of any case (with a case id or not) bounds what arrives next.
            first = _fetch(conn, _LAST, group)[0][0]
            id_cases = _fetch(conn, _ID_CASES, group)[0][0]
            raw = _fetch(conn, _JOINED, (baseline, task, candidate, grader_id, -1))
        if pg and len(raw) > _ANALYZE_ABOVE:
            self._analyze_if_unseen(group, len(raw))
        rows = _rows(raw)
        n, total = (int(totals[0][0]), float(totals[0][1])) if totals else (0, 0.0)
        mark = DesignMark(
            position=int(rows.positions[-1]) if len(rows) else -1,
            first_id=-1 if first is None else int(first),
            grades=n,
            sum_quality=total,
            id_cases=int(id_cases or 0),
        )
        return rows, mark

    def design_since(
        self, task: str, baseline: str, candidate: str, grader_id: str, mark: DesignMark
    ) -> tuple[DesignRows, DesignMark] | None:
        """The sampled cases after ``mark.position`` and the new mark; ``None`` when more changed
        than new cases (read the group in full)."""
        group = (task, baseline, grader_id, candidate)
        with self._snapshot() as conn:
            arrived = _fetch(conn, _ARRIVED, (*group, mark.first_id))
            raw = _fetch(conn, _JOINED, (baseline, task, candidate, grader_id, mark.position))
            totals = _fetch(conn, _TOTALS, group)
        n, total = (int(totals[0][0]), float(totals[0][1])) if totals else (0, 0.0)
        add_n = sum(int(r[1]) for r in arrived)
        expected = mark.sum_quality + sum(float(r[2]) for r in arrived)
        if mark.grades + add_n != n or abs(expected - total) > 1e-9 * max(1.0, abs(total)):
            return None
        if any(r[4] is not None and int(r[4]) <= mark.position for r in arrived):
            return None  # a case sampled earlier now graded against this baseline: in the middle
        rows = _rows(raw)
        return rows, DesignMark(
            position=int(rows.positions[-1]) if len(rows) else mark.position,
            first_id=max([mark.first_id, *(int(r[0]) for r in arrived)]),
            grades=n,
            sum_quality=total,
            id_cases=mark.id_cases + sum(1 for r in arrived if r[3]),
        )

    def positions(self, task: str, candidate: str, grader_id: str, case_ids: Sequence[str]) -> dict[str, int]:
        """The sampler's positions of those of ``case_ids`` it decided (a few hundred per query)."""
        out: dict[str, int] = {}
        with reading(self.engine, "reading label sampling") as conn:
            for part in chunks(list(case_ids)):
                sql = _POSITIONS.format(", ".join(["(%s)"] * len(part)))
                out.update(
                    (str(c), int(p)) for c, p in _fetch(conn, sql, (*part, task, candidate, grader_id))
                )
        return out

    def labels_since(
        self, task: str, candidate: str, last_id: int | None, version: tuple[Any, ...]
    ) -> LabelRows:
        """Labels of ``candidate`` on ``task`` past ``last_id`` when those up to it still have
        ``version``; else (or with ``last_id`` ``None``) every label, with ``full`` set."""
        with self._snapshot("reading labels") as conn:
            same = (
                last_id is not None
                and tuple(_fetch(conn, _LABEL_VERSION, (task, candidate, last_id))[0]) == version
            )
            start = last_id if same and last_id is not None else -1
            raw = _fetch(conn, _LABELS, (task, candidate, start))
            end = int(raw[-1][0]) if raw else start
            now = (
                tuple(_fetch(conn, _LABEL_VERSION, (task, candidate, end))[0]) if raw or not same else version
            )
        return LabelRows(
            rows=tuple((r[1], r[2], None if r[3] is None else float(r[3])) for r in raw),
            full=not same,
            last_id=end,
            version=now,
        )
