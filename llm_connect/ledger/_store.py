"""QualityLedger: every grade in SQL, on SQLite or PostgreSQL; the one public entry."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import update_wrapper
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, Engine

from llm_connect.errors import LedgerError
from llm_connect.ledger._calibrations import CalibrationStore
from llm_connect.ledger._chat import ChatStore
from llm_connect.ledger._convert import grade_rows
from llm_connect.ledger._decisions import DecisionStore
from llm_connect.ledger._embeddings import EmbeddingStore
from llm_connect.ledger._engine import display_url, make_engine, patience_of, resolve_url, write
from llm_connect.ledger._fleet import FleetStore
from llm_connect.ledger._grades import GradeStore
from llm_connect.ledger._journal import Journal, JournalEntry
from llm_connect.ledger._labels import LabelStore, LabelWrite
from llm_connect.ledger._migrate import ensure_schema
from llm_connect.ledger._patience import DEFAULT_PATIENCE_S, PATIENCE_ENV, Patience
from llm_connect.ledger._rows import RecordItem
from llm_connect.ledger._runs import RunStore, failure_row, skip_rows
from llm_connect.types import LLMResponse, utcnow
from llm_connect.values import GradingResult, HumanLabel

if TYPE_CHECKING:
    from pathlib import Path

    from llm_connect.values import NotApplicable


Filter = str | Sequence[str] | None
P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def _to(store: str, method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[Any, P], R]:
    """A :class:`QualityLedger` method that calls ``method`` on the ledger's ``store``
    (same signature and docstring)."""

    def call(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(getattr(self, store), *args, **kwargs)

    update_wrapper(call, method)
    return call


def _patience_s(given: float | None) -> float:
    """``given``, else ``$LLM_CONNECT_DB_PATIENCE``, else the default (60 s)."""
    if given is not None:
        value: float = given
    else:
        raw = os.environ.get(PATIENCE_ENV, "").strip()
        try:
            value = float(raw) if raw else DEFAULT_PATIENCE_S
        except ValueError:
            raise LedgerError(f"${PATIENCE_ENV} must be a number of seconds, not {raw!r}") from None
    if not value >= 0:
        raise LedgerError(f"the database patience must be 0 or more seconds, not {value!r}")
    return float(value)


class QualityLedger:
    """Every grade in SQL: SQLite by default, PostgreSQL for fleets."""

    def __init__(
        self,
        url: str | None = None,
        *,
        auto_migrate: bool = True,
        store_text: bool = True,
        patience_s: float | None = None,
    ) -> None:
        self._url = resolve_url(url)
        self.store_text = bool(store_text)
        self.engine: Engine = make_engine(self._url, patience_s=_patience_s(patience_s))
        try:
            self.revision = ensure_schema(self.engine, self._url, auto_migrate=auto_migrate)
        except BaseException:
            self.engine.dispose()
            raise
        self.grades = GradeStore(self.engine)
        self.runs = RunStore(self.engine)
        self.calibration_store = CalibrationStore(self.engine)
        self.decision_store = DecisionStore(self.engine)
        self.chat = ChatStore(self.engine, store_text=self.store_text)
        self.embeddings = EmbeddingStore(self.engine, store_text=self.store_text)
        self.fleet = FleetStore(self.engine)
        self.label_store = LabelStore(self.engine)

    # -- lifecycle -------------------------------------------------------------

    @property
    def url(self) -> str:
        """The database URL for display, password masked."""
        return display_url(self._url)

    @property
    def patience(self) -> Patience:
        """How long a write (or a read on a run's path) waits for a database that went away, and
        the pauses it rode out (``patience.seconds``, ``patience.unreachable_s``, ``on_pause``)."""
        return patience_of(self.engine)

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

    # -- writes that span stores, in one transaction ---------------------------

    def record(
        self,
        result: GradingResult,
        *,
        task: str,
        run_id: str | None = None,
        case_id: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> int:
        """Store one grade; returns its row id."""
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
        """Store grades with per-item metadata in one transaction; ids in item order."""
        return self.record_outcomes(None, records=items)

    def record_outcomes(
        self,
        run_id: str | None,
        *,
        records: Sequence[RecordItem] = (),
        cache: Sequence[tuple[str, str, LLMResponse]] = (),
        not_applicable: Sequence[NotApplicable] = (),
        failures: Sequence[Mapping[str, Any]] = (),
        worker_id: str | None = None,
        finished_case_ids: Sequence[str] = (),
        adopt_from: Sequence[str] = (),
    ) -> list[int]:
        """Write what finished cases produced in ONE transaction: all of it, or nothing (see
        ``docs/ledger.md``); ``worker_id``: only the cases that worker still holds, marked done
        (``adopt_from``: a journal's replay, see :meth:`FleetStore.finish_cases`)."""
        what = "recording grades" if run_id is None else "recording finished cases"
        what = what if worker_id is None else "recording a shared run's cases"
        records = list(records)
        rows = grade_rows(records, store_text=self.store_text, now=utcnow(), dialect=self.engine.dialect.name)
        if (not_applicable or failures) and run_id is None:
            raise LedgerError("not-applicable pairs and failures belong to a run: give its run_id")
        skips = skip_rows(run_id, not_applicable) if run_id is not None else []
        fields = ("case_id", "task", "stage", "error_type", "message")
        fails = [
            failure_row(run_id or "", adapter_id=f.get("adapter_id"), **{k: f[k] for k in fields})
            for f in failures
        ]
        case_ids: list[str] = []
        failed: set[str] = set()
        if worker_id is not None:
            self.fleet.check_shared("recording a shared run's cases")
            if run_id is None:
                raise LedgerError("a shared run's outcomes need its run_id")
            if any(item.case_id is None for item in records):
                raise LedgerError(f"shared run {run_id!r}: every grade needs its case_id")
            produced = [item.case_id for item in records] + [r["case_id"] for r in skips]
            failed = {r["case_id"] for r in fails}.difference(produced)
            case_ids = list(dict.fromkeys([*produced, *(r["case_id"] for r in fails), *finished_case_ids]))
        if not (rows or cache or skips or fails or case_ids):
            return []

        def outcomes(conn: Connection) -> list[int]:
            mine = list(range(len(records)))
            own_skips, own_fails = skips, fails
            if worker_id is not None:  # only what belongs to cases this worker still holds
                assert run_id is not None  # checked above, before anything was written
                held = self.fleet.finish_cases(
                    conn, run_id, worker_id, case_ids, sorted(failed), adopt_from=adopt_from
                )
                mine = [i for i, item in enumerate(records) if item.case_id in held]
                own_skips = [r for r in skips if r["case_id"] in held]
                own_fails = [r for r in fails if r["case_id"] in held]
            if cache:
                self.runs.add_cache(conn, cache)
            ids = self.grades.add(conn, [rows[i] for i in mine]) if mine else []
            if mine:
                self.chat.add_conversations(conn, [records[i] for i in mine])
            if own_skips or own_fails:
                self.runs.add_run(conn, run_id)  # type: ignore[arg-type]
                self.runs.add_skips(conn, own_skips)
                self.runs.add_failures(conn, own_fails)
            return ids

        return write(self.engine, what, outcomes)

    # -- the journal: answers received but not recorded --------------------------

    def journal(self, run_id: str) -> Journal:
        """The journal of ``run_id`` for this ledger (where it is kept: ``_journal.py``)."""
        return Journal(self._url, run_id)

    def keep_outcomes(
        self, run_id: str, entries: Sequence[JournalEntry | Mapping[str, Any]]
    ) -> tuple[Path, str | None]:
        """Append what finished cases produced (``JournalEntry`` objects or their fields) to the
        run's journal (fsync-ed) when the ledger cannot take it; returns the file and, when that
        is the fallback, why the journal's own place was passed over. Raises ``JournalError`` when
        no place can be written."""
        journal = self.journal(run_id)
        kept = [e if isinstance(e, JournalEntry) else JournalEntry(**e) for e in entries]
        return journal.append(kept), journal.passed_over

    def replay_journal(self, run_id: str, *, worker_id: str | None = None) -> int:
        """Record what the run's journal kept, then remove it; returns how many cases it held.

        Each entry is recorded as the run recorded its cases (grades are idempotent: an entry
        recorded before is a no-op). ``worker_id``: a shared run's worker, which finishes the
        journal's cases that nobody else holds (the worker that kept them has stopped)."""
        journal = self.journal(run_id)
        count = 0
        for path in journal.files():
            taken, entries = journal.take(path)
            for entry in entries:
                shared: dict[str, Any] = {}
                if worker_id is not None:
                    ids = [entry.case_id] if entry.case_id is not None else []
                    adopt = [entry.worker_id] if entry.worker_id else [worker_id]
                    shared = {"worker_id": worker_id, "finished_case_ids": ids, "adopt_from": adopt}
                self.record_outcomes(
                    run_id,
                    records=entry.records,
                    cache=entry.cache,
                    not_applicable=entry.skips,
                    failures=entry.failures,
                    **shared,
                )
            count += len(entries)
            taken.unlink(missing_ok=True)
        return count

    def completed_keys(self, run_id: str) -> set[tuple[str, str, str]]:
        """``(case_id, grader_id, candidate_model)`` of every grade already stored for ``run_id``,
        and of every pair recorded as not applicable (:meth:`record_not_applicable`)."""
        return self.grades.graded_keys(run_id) | self.runs.skipped_keys(run_id)

    # -- delegated to the store that owns the tables ----------------------------

    # grades, running totals and the figures read from them (_grades.py)
    results = _to("grades", GradeStore.results)
    count = _to("grades", GradeStore.count)
    summary = _to("grades", GradeStore.summary)
    grade_totals = _to("grades", GradeStore.grade_totals)
    case_series = _to("grades", GradeStore.case_series)
    routing_read = _to("grades", GradeStore.routing_read)
    rebuild_stats = _to("grades", GradeStore.rebuild_stats)
    export = _to("grades", GradeStore.export)  # type: ignore[arg-type]
    # runs, failures, not-applicable pairs, the response cache (_runs.py)
    cache_key = staticmethod(RunStore.cache_key)
    cache_get = _to("runs", RunStore.cache_get)
    cache_get_many = _to("runs", RunStore.cache_get_many)
    cache_put = _to("runs", RunStore.cache_put)
    cache_put_many = _to("runs", RunStore.cache_put_many)
    start_run = _to("runs", RunStore.start_run)
    finish_run = _to("runs", RunStore.finish_run)
    run = _to("runs", RunStore.run)
    record_failure = _to("runs", RunStore.record_failure)
    failures = _to("runs", RunStore.failures)
    record_not_applicable = _to("runs", RunStore.record_not_applicable)
    not_applicable = _to("runs", RunStore.not_applicable)
    # calibrations (_calibrations.py)
    record_calibration = _to("calibration_store", CalibrationStore.record_calibration)
    calibrations = _to("calibration_store", CalibrationStore.calibrations)
    latest_calibration = _to("calibration_store", CalibrationStore.latest_calibration)
    # routing decisions (_decisions.py)
    record_decision = _to("decision_store", DecisionStore.record_decision)
    decisions = _to("decision_store", DecisionStore.decisions)
    # conversations and stability analyses (_chat.py)
    conversation = _to("chat", ChatStore.conversation)
    record_stability = _to("chat", ChatStore.record_stability)
    stability_runs = _to("chat", ChatStore.stability_runs)
    latest_stability = _to("chat", ChatStore.latest_stability)
    stability_responses = _to("chat", ChatStore.stability_responses)
    # the embedding cache (_embeddings.py)
    cached_embeddings = _to("embeddings", EmbeddingStore.cached_embeddings)
    put_embeddings = _to("embeddings", EmbeddingStore.put_embeddings)
    # shared runs: claims, leases, workers, rate buckets (_fleet.py)
    register_run_cases = _to("fleet", FleetStore.register_run_cases)
    claim_cases = _to("fleet", FleetStore.claim_cases)
    renew_leases = _to("fleet", FleetStore.renew_leases)
    release_cases = _to("fleet", FleetStore.release_cases)
    register_worker = _to("fleet", FleetStore.register_worker)
    heartbeat = _to("fleet", FleetStore.heartbeat)
    stop_worker = _to("fleet", FleetStore.stop_worker)
    run_status = _to("fleet", FleetStore.run_status)
    acquire_rate = _to("fleet", FleetStore.acquire_rate)
    return_rate = _to("fleet", FleetStore.return_rate)

    # -- human labels (_labels.py) ---------------------------------------------

    def record_labels(self, labels: Iterable[HumanLabel], *, replace: bool = False) -> LabelWrite:
        """Store human labels in one transaction (:meth:`LabelStore.record`): each must name a
        graded (task, case, candidate); a different label under a stored key is refused unless
        ``replace``. Labels never change a grade."""
        return self.label_store.record(labels, replace=replace)

    def labels(self, task: Filter = None, candidate: Filter = None) -> list[HumanLabel]:
        """Stored human labels, by task and candidate model (:meth:`LabelStore.labels`)."""
        return self.label_store.labels(task=task, candidate=candidate)
