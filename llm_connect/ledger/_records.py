"""The ledger's other tables: response cache, runs, run failures and skips, calibrations, routing decisions.

Mixed into :class:`~llm_connect.ledger.QualityLedger`; every method here is
part of its public surface.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Table, select, update

from llm_connect._secrets import mask_secrets, redact_request
from llm_connect._version import __version__
from llm_connect.errors import GradingValidationError, LedgerError
from llm_connect.ledger._cases import evidence_snapshot_rows, write_evidence_snapshots
from llm_connect.ledger._chat import conversation_rows
from llm_connect.ledger._convert import batch_values
from llm_connect.ledger._insert import created_value, insert_grades
from llm_connect.ledger._models import (
    Calibration,
    ResponseCacheEntry,
    RoutingDecisionRecord,
    Run,
    RunFailure,
    RunSkip,
    utcnow,
)
from llm_connect.ledger._rows import CalibrationRow, FailureRow, RecordItem, RunRow
from llm_connect.types import Conversation, LLMResponse, Prompt, RunConfig

if TYPE_CHECKING:
    from llm_connect.values import NotApplicable, RoutingDecision

__all__ = ["RecordsMixin"]

_CACHE = cast(Table, ResponseCacheEntry.__table__)
_RUNS = cast(Table, Run.__table__)
_FAILURES = cast(Table, RunFailure.__table__)
_SKIPS = cast(Table, RunSkip.__table__)
_CALIBRATIONS = cast(Table, Calibration.__table__)
_DECISIONS = cast(Table, RoutingDecisionRecord.__table__)
_CHUNK = 500


def _finite_json(value: Any, what: str) -> Any:
    """``value`` as plain JSON types; NaN or infinity is refused (the ledger never stores NaN)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except ValueError as exc:
        raise LedgerError(
            f"{what} must be JSON without NaN or infinity ({exc}); store None instead"
        ) from None
    except TypeError as exc:
        raise LedgerError(f"{what} must be JSON-serialisable: {exc}") from None


class RecordsMixin:
    """Response cache, runs, failures, calibrations and routing decisions."""

    if TYPE_CHECKING:
        from sqlalchemy import Engine

        engine: Engine

        def _insert(self, table: Any) -> Any: ...
        def _write(self, what: str, fn: Any, *, single_statement: bool = False) -> Any: ...
        def _connect(self) -> Connection: ...
        def _read(self, what: str) -> Any: ...

        store_text: bool

        def _dialect_name(self) -> str: ...

    # -- response cache --------------------------------------------------------

    @staticmethod
    def cache_key(
        adapter_id: str,
        prompt: Prompt,
        run_config: RunConfig,
        *,
        endpoint: str | None = None,
        sample: int = 0,
    ) -> str:
        """The cache key of one model call: SHA-256 of canonical JSON of the request.

        Covers what decides the answer: the endpoint (base URL without credentials:
        one model name on two servers is two entries), the adapter id (provider and
        requested model), the messages (system prompt, prompt, or a conversation's
        messages), a conversation's tools and tool choice, temperature, max
        tokens and every model parameter except secret-named ones (an API key never
        reaches the key) and ``timeout``. The per-call timeout is left out: it does
        not change the answer. ``sample`` (``--samples``: the k-th answer to the
        same request) makes each sample its own entry; sample 0 has the key a call
        without samples has.
        """
        params = redact_request(dict(run_config.model_params))  # secret names dropped at any depth
        params.pop("timeout", None)
        headers = params.pop("extra_headers", None)
        if isinstance(headers, dict) and headers:  # may select a deployment; names are case-free
            params["extra_headers"] = {k.lower(): v for k, v in headers.items()}
        request: dict[str, Any] = {"v": 2, "endpoint": endpoint, "adapter": adapter_id}
        if isinstance(prompt, Conversation):
            request["messages"] = prompt.openai_messages(run_config.system_prompt)
            if prompt.tools:
                request["tools"] = prompt.tools
            if prompt.tool_choice is not None:
                request["tool_choice"] = prompt.tool_choice
        else:
            messages = []
            if run_config.system_prompt is not None:
                messages.append({"role": "system", "content": run_config.system_prompt})
            messages.append({"role": "user", "content": prompt})
            request["messages"] = messages
        if sample:
            request["sample"] = sample
        request.update(temperature=run_config.temperature, max_tokens=run_config.max_tokens, params=params)
        payload = json.dumps(
            request,
            ensure_ascii=False,
            sort_keys=True,
            separators=(",", ":"),
            default=str,
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def cache_get(self, key: str) -> LLMResponse | None:
        """The cached response for ``key``, or ``None``."""
        return self.cache_get_many([key]).get(key)

    def cache_get_many(self, keys: Iterable[str]) -> dict[str, LLMResponse]:
        """The cached responses among ``keys`` (absent keys are simply missing)."""
        wanted = list(dict.fromkeys(keys))
        out: dict[str, LLMResponse] = {}
        with self._read("reading the response cache"), self._connect() as conn:
            for start in range(0, len(wanted), _CHUNK):
                stmt = select(_CACHE.c.key, _CACHE.c.response).where(
                    _CACHE.c.key.in_(wanted[start : start + _CHUNK])
                )
                for key, response in conn.execute(stmt):
                    out[key] = LLMResponse.from_dict(response)
        return out

    def cache_put(self, key: str, adapter_id: str, response: LLMResponse) -> None:
        """Cache ``response`` under ``key``; an existing entry is kept as it is."""
        row = {"key": key, "adapter_id": adapter_id, "response": response.to_dict(), "created_at": utcnow()}
        stmt = self._insert(_CACHE).on_conflict_do_nothing(index_elements=["key"])
        self._write("writing the response cache", lambda conn: conn.execute(stmt, row), single_statement=True)

    def cache_put_many(self, entries: Sequence[tuple[str, str, LLMResponse]]) -> None:
        """Cache many ``(key, adapter_id, response)`` entries in one transaction.

        Same rule as :meth:`cache_put`: an entry already in the cache is kept
        as it is, and within ``entries`` the first one for a key wins.
        """
        rows = _cache_rows(entries)
        if rows:
            self._write("writing the response cache", lambda conn: self._cache_in(conn, rows))

    def _cache_in(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        stmt = self._insert(_CACHE).on_conflict_do_nothing(index_elements=["key"])
        for start in range(0, len(rows), _CHUNK):
            conn.execute(stmt, rows[start : start + _CHUNK])

    # -- runs and failures -----------------------------------------------------

    def start_run(
        self, run_id: str, *, suite: str | None = None, config: Mapping[str, Any] | None = None
    ) -> None:
        """Register a run (idempotent). Starting a known run again marks it ``running``;
        its suite and config are kept. ``config`` is stored with secrets removed."""
        if not isinstance(run_id, str) or not run_id:
            raise LedgerError(f"run_id must be a non-empty string, not {run_id!r}")
        stored = None if config is None else _finite_json(redact_request(config), "run config")
        row = {
            "run_id": run_id,
            "suite": suite,
            "config": stored,
            "status": "running",
            "started_at": utcnow(),
            "llm_connect_version": __version__,
        }

        def write(conn: Connection) -> None:
            stmt = (
                self._insert(_RUNS)
                .on_conflict_do_nothing(index_elements=["run_id"])
                .returning(_RUNS.c.run_id)
            )
            if conn.execute(stmt, row).first() is None:  # the run exists: resume it
                conn.execute(
                    update(_RUNS).where(_RUNS.c.run_id == run_id).values(status="running", finished_at=None)
                )

        self._write("starting a run", write)

    def finish_run(self, run_id: str, status: str) -> None:
        """Mark a run finished with ``status`` (``completed``, ``failed``, ``interrupted``...)."""

        def write(conn: Connection) -> None:
            done = conn.execute(
                update(_RUNS).where(_RUNS.c.run_id == run_id).values(status=status, finished_at=utcnow())
            )
            if done.rowcount == 0:
                raise LedgerError(f"no run {run_id!r} in the ledger (start_run was never called)")

        self._write("finishing a run", write)

    def run(self, run_id: str) -> RunRow | None:
        """The stored run ``run_id``, or ``None``."""
        with self._read("reading a run"), self._connect() as conn:
            rec = conn.execute(select(_RUNS).where(_RUNS.c.run_id == run_id)).mappings().first()
        return None if rec is None else RunRow(**dict(rec))

    def record_failure(
        self,
        *,
        run_id: str,
        case_id: str,
        task: str,
        stage: str,
        error_type: str,
        message: str,
        adapter_id: str | None = None,
    ) -> int:
        """Record a case that could not be graded; returns the failure's id.

        The run is registered if it was not yet. API-key-shaped text in the
        message is masked.
        """
        row = _failure_row(run_id, case_id, task, stage, error_type, message, adapter_id)
        run_row = _new_run(run_id)

        def write(conn: Connection) -> int:
            conn.execute(self._insert(_RUNS).on_conflict_do_nothing(index_elements=["run_id"]), run_row)
            return int(conn.execute(_FAILURES.insert().returning(_FAILURES.c.id), row).scalar_one())

        return self._write("recording a failure", write)  # type: ignore[no-any-return]

    def failures(self, run_id: str | None = None) -> list[FailureRow]:
        """Recorded failures, oldest first; of one run when ``run_id`` is given."""
        stmt = select(_FAILURES).order_by(_FAILURES.c.id)
        if run_id is not None:
            stmt = stmt.where(_FAILURES.c.run_id == run_id)
        with self._read("reading failures"), self._connect() as conn:
            return [FailureRow(**dict(rec)) for rec in conn.execute(stmt).mappings()]

    def record_not_applicable(self, run_id: str, outcomes: Sequence[NotApplicable]) -> int:
        """Record pairs of ``run_id`` that a judge had no case data for; returns how many were new.

        Each outcome needs its ``candidate_model`` (the model as it answered):
        with it, :meth:`completed_keys` counts the pair as done, so a resumed
        run does not grade the case again. The run is registered if it was not
        yet; a pair already recorded keeps its first record.
        """
        rows = _skip_rows(run_id, outcomes)
        if not rows:
            return 0
        run_row = _new_run(run_id)

        def write(conn: Connection) -> int:
            conn.execute(self._insert(_RUNS).on_conflict_do_nothing(index_elements=["run_id"]), run_row)
            return self._skips_in(conn, rows)

        return self._write("recording not-applicable outcomes", write)  # type: ignore[no-any-return]

    def _skips_in(self, conn: Connection, rows: list[dict[str, Any]]) -> int:
        keys = ["run_id", "case_id", "grader_id", "candidate_model"]
        stmt = self._insert(_SKIPS).on_conflict_do_nothing(index_elements=keys).returning(_SKIPS.c.id)
        return sum(1 for row in rows if conn.execute(stmt, row).first() is not None)

    # -- one finished case (or several) in one transaction ----------------------

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
    ) -> list[int]:
        """Write what finished cases produced in ONE transaction: all of it, or nothing.

        ``records`` are grades (as :meth:`record_batch`), ``cache`` response-cache
        entries (as :meth:`cache_put_many`), ``not_applicable`` pairs of ``run_id``
        (as :meth:`record_not_applicable`) and ``failures`` mappings with the keyword
        arguments of :meth:`record_failure` except ``run_id``. A crash or a refused
        grade (:class:`~llm_connect.errors.GradeConflictError`) leaves none of them
        written. Returns the grades' ids in order.

        ``worker_id`` (a shared run, PostgreSQL only): the cases of the call (every
        case id among ``records``, ``not_applicable``, ``failures`` and
        ``finished_case_ids``, the cases that produced nothing to write) that this
        worker still holds become ``done`` (``failed`` when a failure is their only
        outcome) in the same transaction, and only their grades, skips and failures
        are written (cache entries always are); the outcomes of a case whose lease
        another worker took over are dropped without a word. The ids returned are
        those of the grades written.
        """
        rows = batch_values(
            records, store_text=self.store_text, now=created_value(utcnow(), self._dialect_name())
        )
        cache_rows = _cache_rows(cache)
        if (not_applicable or failures) and run_id is None:
            raise LedgerError("not-applicable pairs and failures belong to a run: give its run_id")
        skip_rows = _skip_rows(run_id, not_applicable) if run_id is not None else []
        failure_rows = [
            _failure_row(
                run_id,  # type: ignore[arg-type]
                f["case_id"],
                f["task"],
                f["stage"],
                f["error_type"],
                f["message"],
                f.get("adapter_id"),
            )
            for f in failures
        ]
        if worker_id is not None:
            return self._record_claimed(  # type: ignore[attr-defined,no-any-return]
                run_id,
                worker_id,
                records=records,
                rows=rows,
                cache_rows=cache_rows,
                skip_rows=skip_rows,
                failure_rows=failure_rows,
                finished_case_ids=finished_case_ids,
            )

        conversations = conversation_rows(records)

        def write(conn: Connection) -> list[int]:
            ids = insert_grades(conn, rows) if rows else []
            self._conversations_in(conn, conversations)  # type: ignore[attr-defined]
            if cache_rows:
                self._cache_in(conn, cache_rows)
            if skip_rows or failure_rows:
                conn.execute(
                    self._insert(_RUNS).on_conflict_do_nothing(index_elements=["run_id"]),
                    _new_run(run_id),  # type: ignore[arg-type]
                )
            if skip_rows:
                self._skips_in(conn, skip_rows)
            if failure_rows:
                conn.execute(_FAILURES.insert(), failure_rows)
            return ids

        if not (rows or cache_rows or skip_rows or failure_rows):
            return []
        return self._write("recording finished cases", write)  # type: ignore[no-any-return]

    def not_applicable(self, run_id: str) -> list[NotApplicable]:
        """The recorded not-applicable outcomes of ``run_id``, oldest first."""
        from llm_connect.values import NotApplicable

        stmt = select(_SKIPS).where(_SKIPS.c.run_id == run_id).order_by(_SKIPS.c.id)
        with self._read("reading not-applicable outcomes"), self._connect() as conn:
            return [
                NotApplicable(
                    case_id=rec["case_id"],
                    task=rec["task"],
                    grader_id=rec["grader_id"],
                    candidate=rec["candidate"],
                    field=rec["field"],
                    reason=rec["reason"],
                    candidate_model=rec["candidate_model"],
                )
                for rec in conn.execute(stmt).mappings()
            ]

    # -- calibrations ----------------------------------------------------------

    def record_calibration(
        self,
        *,
        judge_grader_id: str,
        references: Sequence[str],
        task: str | None,
        figures: Mapping[str, Any],
        verdict: str,
        passed: bool,
    ) -> int:
        """Store a calibration of ``judge_grader_id`` against ``references``; returns its id.

        ``figures`` must be JSON without NaN (an undefined statistic is ``None``).
        """
        if not judge_grader_id:
            raise LedgerError("judge_grader_id must be a non-empty string")
        row = {
            "created_at": utcnow(),
            "judge_grader_id": judge_grader_id,
            "reference_grader_ids": [str(r) for r in references],
            "task": task,
            "figures": _finite_json(dict(figures), "calibration figures"),
            "verdict": verdict,
            "passed": bool(passed),
            "llm_connect_version": __version__,
        }

        def write(conn: Connection) -> int:
            stmt = _CALIBRATIONS.insert().returning(_CALIBRATIONS.c.id)
            return int(conn.execute(stmt, row).scalar_one())

        return self._write("recording a calibration", write, single_statement=True)  # type: ignore[no-any-return]

    def calibrations(self, judge_grader_id: str | None = None) -> list[CalibrationRow]:
        """Stored calibrations, oldest first (of one judge when given)."""
        stmt = select(_CALIBRATIONS).order_by(_CALIBRATIONS.c.id)
        if judge_grader_id is not None:
            stmt = stmt.where(_CALIBRATIONS.c.judge_grader_id == judge_grader_id)
        with self._read("reading calibrations"), self._connect() as conn:
            return [_calibration_row(rec) for rec in conn.execute(stmt).mappings()]

    def latest_calibration(self, judge_grader_id: str, *, task: str | None = None) -> CalibrationRow | None:
        """The newest calibration of ``judge_grader_id`` for ``task``.

        With a task and no calibration for it, the newest task-less
        calibration (one over all tasks) is returned; ``None`` when neither
        exists.
        """
        c = _CALIBRATIONS.c
        with self._read("reading calibrations"), self._connect() as conn:
            for wanted in [task, None] if task is not None else [None]:
                cond = c.task.is_(None) if wanted is None else c.task == wanted
                stmt = (
                    select(_CALIBRATIONS)
                    .where(c.judge_grader_id == judge_grader_id, cond)
                    .order_by(c.created_at.desc(), c.id.desc())
                    .limit(1)
                )
                rec = conn.execute(stmt).mappings().first()
                if rec is not None:
                    return _calibration_row(rec)
        return None

    # -- routing decisions -----------------------------------------------------

    def record_decision(
        self,
        decision: RoutingDecision,
        *,
        evidence_snapshots: Sequence[tuple[str, str, Sequence[Any], Any]] = (),
        snapshot_settings: str = "",
    ) -> int:
        """Store a routing decision for audit; returns its id.

        ``evidence_snapshots`` ((candidate, grader id, (n, Σ, Σ²), evidence JSON) under
        ``snapshot_settings``) are upserted in the same transaction (see
        :meth:`evidence_snapshots`).
        """
        data = decision.to_dict()
        row = {
            "created_at": decision.created_at,
            "task": decision.task,
            "baseline_model": decision.baseline,
            "chosen_model": decision.model,
            "reason": decision.reason,
            "grader_ids": list(decision.grader_ids),
            "parameters": _finite_json(data["parameters"], "decision parameters"),
            "evidence": _finite_json(data, "decision evidence"),
            "llm_connect_version": __version__,
        }

        def write(conn: Connection) -> int:
            if conn.dialect.name == "postgresql":
                # An audit row: skip waiting for the WAL flush (a server crash may lose the
                # last fraction of a second of decisions, never corrupt them).
                conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
            if snapshots:
                write_evidence_snapshots(conn, snapshots)
            return int(conn.execute(_DECISIONS.insert().returning(_DECISIONS.c.id), row).scalar_one())

        snapshots = (
            evidence_snapshot_rows(decision.task, decision.baseline, snapshot_settings, evidence_snapshots)
            if evidence_snapshots
            else []
        )
        if self._dialect_name() == "postgresql" and self.engine.dialect.driver == "psycopg":
            # The same transaction in one round trip (it is most of what a decision costs).
            from llm_connect.ledger._pipeline import pg_record_decision

            with self._read("recording a routing decision"):
                return pg_record_decision(self.engine, row, snapshots)
        return self._write("recording a routing decision", write)  # type: ignore[no-any-return]

    def decisions(self, task: str | None = None, *, limit: int | None = None) -> list[RoutingDecision]:
        """Stored routing decisions, oldest first (the newest ``limit`` when given)."""
        from llm_connect.values import RoutingDecision

        stmt = select(_DECISIONS.c.id, _DECISIONS.c.evidence).order_by(_DECISIONS.c.id.desc())
        if task is not None:
            stmt = stmt.where(_DECISIONS.c.task == task)
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._read("reading routing decisions"), self._connect() as conn:
            recs = conn.execute(stmt).all()
        return [RoutingDecision.from_dict(evidence, decision_id=rid) for rid, evidence in reversed(recs)]


def _cache_rows(entries: Sequence[tuple[str, str, LLMResponse]]) -> list[dict[str, Any]]:
    """``response_cache`` rows, the first entry of each key."""
    first: dict[str, dict[str, Any]] = {}
    now = utcnow()
    for key, adapter_id, response in entries:
        if key not in first:
            first[key] = {
                "key": key,
                "adapter_id": adapter_id,
                "response": response.to_dict(),
                "created_at": now,
            }
    return list(first.values())


def _failure_row(
    run_id: str, case_id: str, task: str, stage: str, error_type: str, message: str, adapter_id: str | None
) -> dict[str, Any]:
    return {
        "created_at": utcnow(),
        "run_id": run_id,
        "case_id": case_id,
        "task": task,
        "stage": stage,
        "error_type": error_type,
        "message": mask_secrets(message),
        "adapter_id": adapter_id,
    }


def _skip_rows(run_id: str, outcomes: Sequence[NotApplicable]) -> list[dict[str, Any]]:
    rows = []
    for i, na in enumerate(outcomes):
        if not na.candidate_model:
            raise GradingValidationError(f"item {i}: a not-applicable outcome needs its candidate_model")
        rows.append(
            {
                "created_at": utcnow(),
                "run_id": run_id,
                "case_id": na.case_id,
                "task": na.task,
                "grader_id": na.grader_id,
                "candidate_model": na.candidate_model,
                "candidate": na.candidate,
                "field": na.field,
                "reason": mask_secrets(na.reason),
            }
        )
    return rows


def _new_run(run_id: str) -> dict[str, Any]:
    """The ``runs`` row registered for a run first seen through a failure or a skip."""
    return {"run_id": run_id, "status": "running", "started_at": utcnow(), "llm_connect_version": __version__}


def _calibration_row(rec: Mapping[Any, Any]) -> CalibrationRow:
    return CalibrationRow(
        id=rec["id"],
        created_at=rec["created_at"],
        judge_grader_id=rec["judge_grader_id"],
        references=tuple(rec["reference_grader_ids"]),
        task=rec["task"],
        figures=rec["figures"],
        verdict=rec["verdict"],
        passed=bool(rec["passed"]),
    )
