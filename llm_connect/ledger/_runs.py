"""The runs store: runs, their failures and not-applicable pairs, and the response cache."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Table, select, update

from llm_connect._secrets import mask_secrets, redact_request
from llm_connect._version import __version__
from llm_connect.errors import GradingValidationError, LedgerError
from llm_connect.ledger._cases import chunks
from llm_connect.ledger._engine import Store, dialect_insert, read, reading, write
from llm_connect.ledger._models import ResponseCacheEntry, Run, RunFailure, RunSkip
from llm_connect.ledger._rows import FailureRow, RunRow
from llm_connect.types import Conversation, LLMResponse, Prompt, RunConfig, utcnow

if TYPE_CHECKING:
    from llm_connect.values import NotApplicable


_CACHE = cast(Table, ResponseCacheEntry.__table__)
_RUNS = cast(Table, Run.__table__)
_FAILURES = cast(Table, RunFailure.__table__)
_SKIPS = cast(Table, RunSkip.__table__)
_SKIP_KEY = ["run_id", "case_id", "grader_id", "candidate_model"]


def finite_json(value: Any, what: str) -> Any:
    """``value`` as plain JSON types; NaN or infinity is refused (the ledger never stores NaN)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except ValueError as exc:
        raise LedgerError(
            f"{what} must be JSON without NaN or infinity ({exc}); store None instead"
        ) from None
    except TypeError as exc:
        raise LedgerError(f"{what} must be JSON-serialisable: {exc}") from None


class RunStore(Store):
    """Runs, failures, not-applicable pairs and cached responses, over the ledger's engine."""

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
        """The cache key of one model call: SHA-256 of canonical JSON of the request."""
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
        payload = json.dumps(request, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def cache_get(self, key: str) -> LLMResponse | None:
        """The cached response for ``key``, or ``None``."""
        return self.cache_get_many([key]).get(key)

    def cache_get_many(self, keys: Iterable[str]) -> dict[str, LLMResponse]:
        """The cached responses among ``keys`` (absent keys are simply missing)."""
        wanted = list(dict.fromkeys(keys))

        def run(conn: Connection) -> dict[str, LLMResponse]:
            out: dict[str, LLMResponse] = {}
            for part in chunks(wanted):
                stmt = select(_CACHE.c.key, _CACHE.c.response).where(_CACHE.c.key.in_(part))
                out.update((key, LLMResponse.from_dict(response)) for key, response in conn.execute(stmt))
            return out

        return read(self.engine, "reading the response cache", run)  # run again after a restart

    def cache_put(self, key: str, adapter_id: str, response: LLMResponse) -> None:
        """Cache ``response`` under ``key``; an existing entry is kept as it is."""
        self.cache_put_many([(key, adapter_id, response)])

    def cache_put_many(self, entries: Sequence[tuple[str, str, LLMResponse]]) -> None:
        """Cache many ``(key, adapter_id, response)`` entries in one transaction."""
        if entries:
            write(self.engine, "writing the response cache", lambda conn: self.add_cache(conn, entries))

    def add_cache(self, conn: Connection, entries: Sequence[tuple[str, str, LLMResponse]]) -> None:
        """:meth:`cache_put_many` inside ``conn``'s transaction (the first entry of each key)."""
        now, firsts = utcnow(), dict[str, tuple[str, LLMResponse]]()
        for key, adapter_id, response in entries:
            firsts.setdefault(key, (adapter_id, response))
        rows = [
            dict(key=key, adapter_id=adapter_id, response=response.to_dict(), created_at=now)
            for key, (adapter_id, response) in firsts.items()
        ]
        stmt = dialect_insert(conn.dialect.name, _CACHE).on_conflict_do_nothing(index_elements=["key"])
        conn.execute(stmt, rows)  # one executemany: no parameter limit to stay under

    # -- runs ------------------------------------------------------------------

    def start_run(
        self, run_id: str, *, suite: str | None = None, config: Mapping[str, Any] | None = None
    ) -> None:
        """Register a run (idempotent). Starting a known run again marks it ``running``;
        its suite and config are kept. ``config`` is stored with secrets removed."""
        if not isinstance(run_id, str) or not run_id:
            raise LedgerError(f"run_id must be a non-empty string, not {run_id!r}")
        stored = None if config is None else finite_json(redact_request(config), "run config")
        row = {**_new_run(run_id), "suite": suite, "config": stored}

        def start(conn: Connection) -> None:
            if not self.add_run(conn, run_id, row):  # known: resume it
                conn.execute(
                    update(_RUNS).where(_RUNS.c.run_id == run_id).values(status="running", finished_at=None)
                )

        write(self.engine, "starting a run", start)

    def finish_run(self, run_id: str, status: str) -> None:
        """Mark a run finished with ``status`` (``completed``, ``failed``, ``interrupted``...)."""

        def finish(conn: Connection) -> None:
            done = conn.execute(
                update(_RUNS).where(_RUNS.c.run_id == run_id).values(status=status, finished_at=utcnow())
            )
            if done.rowcount == 0:
                raise LedgerError(f"no run {run_id!r} in the ledger (start_run was never called)")

        write(self.engine, "finishing a run", finish)

    def run(self, run_id: str) -> RunRow | None:
        """The stored run ``run_id``, or ``None``."""
        with reading(self.engine, "reading a run") as conn:
            rec = conn.execute(select(_RUNS).where(_RUNS.c.run_id == run_id)).mappings().first()
        return None if rec is None else RunRow(**dict(rec))

    def add_run(self, conn: Connection, run_id: str, row: Mapping[str, Any] | None = None) -> bool:
        """Register ``run_id`` in ``conn``'s transaction unless it is known; whether it was new.
        ``row``: its values (default: a run first seen through a failure or a skip)."""
        stmt = dialect_insert(conn.dialect.name, _RUNS).on_conflict_do_nothing(index_elements=["run_id"])
        return conn.execute(stmt.returning(_RUNS.c.run_id), row or _new_run(run_id)).first() is not None

    # -- failures and not-applicable pairs -------------------------------------

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
        """Record a case that could not be graded; returns the failure's id."""
        row = failure_row(run_id, case_id, task, stage, error_type, message, adapter_id)

        def insert(conn: Connection) -> int:
            self.add_run(conn, run_id)
            return int(conn.execute(_FAILURES.insert().returning(_FAILURES.c.id), row).scalar_one())

        return write(self.engine, "recording a failure", insert)

    def add_failures(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Store :func:`failure_row` rows in ``conn``'s transaction."""
        if rows:
            conn.execute(_FAILURES.insert(), list(rows))

    def failures(self, run_id: str | None = None) -> list[FailureRow]:
        """Recorded failures, oldest first; of one run when ``run_id`` is given."""
        stmt = select(_FAILURES).order_by(_FAILURES.c.id)
        if run_id is not None:
            stmt = stmt.where(_FAILURES.c.run_id == run_id)
        with reading(self.engine, "reading failures") as conn:
            return [FailureRow(**dict(rec)) for rec in conn.execute(stmt).mappings()]

    def record_not_applicable(self, run_id: str, outcomes: Sequence[NotApplicable]) -> int:
        """Record pairs of ``run_id`` that a judge had no case data for; returns how many were new."""
        rows = skip_rows(run_id, outcomes)
        if not rows:
            return 0

        def insert(conn: Connection) -> int:
            self.add_run(conn, run_id)
            return self.add_skips(conn, rows)

        return write(self.engine, "recording not-applicable outcomes", insert)

    def add_skips(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> int:
        """Store :func:`skip_rows` rows in ``conn``'s transaction; returns how many were new."""
        stmt = dialect_insert(conn.dialect.name, _SKIPS).on_conflict_do_nothing(index_elements=_SKIP_KEY)
        stmt = stmt.returning(_SKIPS.c.id)
        return sum(1 for row in rows if conn.execute(stmt, row).first() is not None)

    def not_applicable(self, run_id: str) -> list[NotApplicable]:
        """The recorded not-applicable outcomes of ``run_id``, oldest first."""
        from llm_connect.values import NotApplicable

        stmt = select(_SKIPS).where(_SKIPS.c.run_id == run_id).order_by(_SKIPS.c.id)
        fields = ("case_id", "task", "grader_id", "candidate", "field", "reason", "candidate_model")
        with reading(self.engine, "reading not-applicable outcomes") as conn:
            return [NotApplicable(**{f: rec[f] for f in fields}) for rec in conn.execute(stmt).mappings()]

    def skipped_keys(self, run_id: str) -> set[tuple[str, str, str]]:
        """``(case_id, grader_id, candidate_model)`` of the pairs of ``run_id`` recorded as not
        applicable."""
        c = _SKIPS.c
        stmt = select(c.case_id, c.grader_id, c.candidate_model).where(c.run_id == run_id)
        with reading(self.engine, "reading completed cases") as conn:
            return {(r[0], r[1], r[2]) for r in conn.execute(stmt)}


def failure_row(
    run_id: str, case_id: str, task: str, stage: str, error_type: str, message: str, adapter_id: str | None
) -> dict[str, Any]:
    row = dict(run_id=run_id, case_id=case_id, task=task, stage=stage, error_type=error_type)
    return {"created_at": utcnow(), **row, "message": mask_secrets(message), "adapter_id": adapter_id}


def skip_rows(run_id: str, outcomes: Sequence[NotApplicable]) -> list[dict[str, Any]]:
    fields = ("case_id", "task", "grader_id", "candidate_model", "candidate", "field")
    for i, na in enumerate(outcomes):
        if not na.candidate_model:
            raise GradingValidationError(f"item {i}: a not-applicable outcome needs its candidate_model")
    return [
        {
            "created_at": utcnow(),
            "run_id": run_id,
            **{f: getattr(na, f) for f in fields},
            "reason": mask_secrets(na.reason),
        }
        for na in outcomes
    ]


def _new_run(run_id: str) -> dict[str, Any]:
    """The ``runs`` row registered for a run first seen through a failure or a skip."""
    return {"run_id": run_id, "status": "running", "started_at": utcnow(), "llm_connect_version": __version__}
