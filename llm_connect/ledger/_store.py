"""QualityLedger: every grade in SQL, on SQLite or PostgreSQL."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import ColumnElement, Connection, Engine, Table, and_, func, select, text

from llm_connect.errors import LedgerError
from llm_connect.ledger._cases import TOTALS_COLUMNS, CasesMixin, _match, totals_row
from llm_connect.ledger._chat import ChatMixin, conversation_rows
from llm_connect.ledger._convert import GRADE_COLUMNS, batch_values, grade_row
from llm_connect.ledger._embeddings import EmbeddingsMixin
from llm_connect.ledger._engine import (
    display_url,
    ledger_errors,
    make_engine,
    read_connection,
    resolve_url,
    write_transaction,
)
from llm_connect.ledger._fleet import FleetMixin
from llm_connect.ledger._insert import created_value, insert_grades
from llm_connect.ledger._labels import LabelStore, LabelWrite
from llm_connect.ledger._migrate import ensure_schema
from llm_connect.ledger._models import (
    CASE_STATS_REBUILD_SQL,
    GRADE_STATS_REBUILD_SQL,
    CaseStats,
    Grade,
    GradeStats,
    RunSkip,
    utcnow,
)
from llm_connect.ledger._records import RecordsMixin
from llm_connect.ledger._rows import GradeRow, GradeTotals, RecordItem, SummaryRow
from llm_connect.ledger._stats import mean_std, t_interval
from llm_connect.values import GradingResult, HumanLabel

__all__ = ["QualityLedger"]

_G = cast(Table, Grade.__table__)
_SKIPS = cast(Table, RunSkip.__table__)
_S = cast(Table, GradeStats.__table__)
_KEY = ("run_id", "case_id", "grader_id", "candidate_model")
_KEY_COLUMNS = [_G.c[name] for name in _KEY]
# Parameters per statement stay well under SQLite's and PostgreSQL's limits.
_CHUNK = 500

Filter = str | Sequence[str] | None


def _totals_filter(task: Filter, baseline: Filter, candidate: Filter, grader: Filter) -> list[Any]:
    """WHERE conditions on the running totals (``grade_stats``) for the filters given."""
    c = _S.c
    conditions = (
        _match(c.task, task),
        _match(c.baseline_model, baseline),
        _match(c.candidate_model, candidate),
        _match(c.grader_id, grader),
    )
    return [cond for cond in conditions if cond is not None]


class QualityLedger(RecordsMixin, CasesMixin, ChatMixin, FleetMixin, EmbeddingsMixin):
    """Every grade in SQL: SQLite by default, PostgreSQL for fleets.

    ``url`` is a SQLAlchemy URL; without one, ``$LLM_CONNECT_DATABASE_URL``,
    then ``sqlite:///llm_connect.db`` in the working directory. A fresh
    database is migrated to the newest schema on open (``auto_migrate``); a
    database at an unknown or newer revision raises
    :class:`~llm_connect.errors.SchemaVersionError` and is left as it is.
    With ``store_text=False`` prompts and response texts are kept only as
    SHA-256 digests.

    Example::

        with QualityLedger("sqlite:///grades.db") as ledger:
            ledger.record(result, task="support", run_id="r1", case_id="c1")
            for row in ledger.summary(task="support"):
                print(row.candidate_model, row.n, row.mean, row.ci_low)
    """

    def __init__(self, url: str | None = None, *, auto_migrate: bool = True, store_text: bool = True) -> None:
        self._url = resolve_url(url)
        self.store_text = bool(store_text)
        self.engine: Engine = make_engine(self._url)
        try:
            self.revision = ensure_schema(self.engine, self._url, auto_migrate=auto_migrate)
        except BaseException:
            self.engine.dispose()
            raise

    # -- lifecycle -------------------------------------------------------------

    @property
    def url(self) -> str:
        """The database URL for display, password masked."""
        return display_url(self._url)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    def close(self) -> None:
        """Release every pooled connection (the ledger can be reopened with a new object)."""
        self.engine.dispose()

    def __enter__(self) -> QualityLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"QualityLedger({self.url!r}, store_text={self.store_text})"

    def _dialect_name(self) -> str:
        return self.engine.dialect.name

    def _insert(self, table: Any) -> Any:
        """A dialect-specific INSERT (supports ``on_conflict_do_nothing``)."""
        # Imported here: the postgresql package loads every PostgreSQL driver's dialect (~50 ms).
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table)
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table)

    def _write(self, what: str, fn: Any, *, single_statement: bool = False) -> Any:
        with ledger_errors(what, self._url):
            return write_transaction(self.engine, fn, single_statement=single_statement)

    def _connect(self) -> Connection:
        """A connection for one-statement reads (autocommit on PostgreSQL)."""
        return read_connection(self.engine)

    def _read(self, what: str) -> Any:
        return ledger_errors(what, self._url)

    # -- writing grades --------------------------------------------------------

    def record(
        self,
        result: GradingResult,
        *,
        task: str,
        run_id: str | None = None,
        case_id: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> int:
        """Store one grade; returns its row id.

        With ``run_id`` and ``case_id`` the grade is idempotent: recording the
        same (run, case, grader, candidate model) again returns the existing
        row's id and changes nothing.
        """
        return self.record_batch([RecordItem(result, task, run_id, case_id, tuple(tags or ()))])[0]

    def record_many(
        self,
        results: Iterable[GradingResult],
        *,
        task: str,
        run_id: str | None = None,
        case_id: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> list[int]:
        """Store many grades sharing the same metadata in one transaction (all or nothing)."""
        tag_tuple = tuple(tags or ())
        return self.record_batch([RecordItem(r, task, run_id, case_id, tag_tuple) for r in results])

    def record_batch(self, items: Sequence[RecordItem]) -> list[int]:
        """Store grades with per-item metadata in one transaction; ids in item order.

        Every item is validated before anything is written; a bad item raises
        :class:`~llm_connect.errors.GradingValidationError` naming its index.
        A database failure (constraint violation, dropped connection) raises
        :class:`~llm_connect.errors.LedgerError` and leaves the ledger as it was.
        """
        rows = batch_values(items, store_text=self.store_text, now=created_value(utcnow(), self.dialect))
        if not rows:
            return []
        conversations = conversation_rows(items)

        def write(conn: Connection) -> list[int]:
            ids = insert_grades(conn, rows)
            self._conversations_in(conn, conversations)
            return ids

        return self._write("recording grades", write)  # type: ignore[no-any-return]

    # -- human labels (a store of their own over this engine) ------------------

    def record_labels(self, labels: Iterable[HumanLabel], *, replace: bool = False) -> LabelWrite:
        """Store human labels in one transaction (:meth:`LabelStore.record`): each must name a
        graded (task, case, candidate); a different label under a stored key is refused unless
        ``replace``. Labels never change a grade."""
        return LabelStore(self.engine).record(labels, replace=replace)

    def labels(self, task: Filter = None, candidate: Filter = None) -> list[HumanLabel]:
        """Stored human labels, by task and candidate model (:meth:`LabelStore.labels`)."""
        return LabelStore(self.engine).labels(task=task, candidate=candidate)

    # -- reading grades --------------------------------------------------------

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
            _match(_G.c.task, task),
            _match(_G.c.baseline_model, baseline_model),
            _match(_G.c.candidate_model, candidate_model),
            _match(_G.c.grader_id, grader_id),
            _match(_G.c.run_id, run_id),
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
        with self._read("reading grades"), self.engine.connect() as conn:
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
        with self._read("summarising grades"), self._connect() as conn:
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
        with self._read("summarising grades"), self._connect() as conn:
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
        with self._read("reading grade totals"), self._connect() as conn:
            records = conn.execute(stmt).all()
        return [totals_row(r) for r in records]

    def rebuild_stats(self) -> None:
        """Recompute the running totals (``grade_stats``, ``case_stats``) from ``grades``.

        Only needed after grades were inserted or deleted with plain SQL
        behind the ledger's back; every ledger write keeps them current.
        """

        def write(conn: Connection) -> None:
            conn.execute(_S.delete())
            conn.execute(text(GRADE_STATS_REBUILD_SQL))
            conn.execute(cast(Table, CaseStats.__table__).delete())
            conn.execute(text(CASE_STATS_REBUILD_SQL))

        self._write("rebuilding grade totals", write)

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

    def count(self, **filters: Any) -> int:
        """How many stored grades match the filters of :meth:`results`."""
        stmt = select(func.count()).select_from(_G).where(*self._filters(**filters))
        with self._read("counting grades"), self._connect() as conn:
            return int(conn.execute(stmt).scalar_one())

    def completed_keys(self, run_id: str) -> set[tuple[str, str, str]]:
        """``(case_id, grader_id, candidate_model)`` of every grade already stored for ``run_id``,
        and of every pair recorded as not applicable (:meth:`record_not_applicable`)."""
        graded = select(_G.c.case_id, _G.c.grader_id, _G.c.candidate_model).where(
            and_(_G.c.run_id == run_id, _G.c.case_id.is_not(None))
        )
        skipped = select(_SKIPS.c.case_id, _SKIPS.c.grader_id, _SKIPS.c.candidate_model).where(
            _SKIPS.c.run_id == run_id
        )
        with self._read("reading completed cases"), self._connect() as conn:
            return {(r[0], r[1], r[2]) for stmt in (graded, skipped) for r in conn.execute(stmt)}
