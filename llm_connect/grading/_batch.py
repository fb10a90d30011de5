"""The batch engine: grade a whole suite, fast, frugal and resumable.

:class:`BatchGrader` grades every case of a :class:`~llm_connect.grading.Suite`
with one baseline side, one or more candidate sides and one or more judges:

* **bounded concurrency** — at most ``concurrency`` cases in flight and (through
  the shared semaphore of :class:`~llm_connect.grading._retry.ResilientAdapter`)
  at most ``concurrency`` model calls in flight, optionally an rpm limit;
* **one call per side per case** — the baseline answers once however many
  candidates and judges there are; each candidate answers once;
* **batched judging** — judges with ``judge_many`` (the embedding judge) get
  pairs from many cases at once, in a worker thread; other judges run through
  :func:`~llm_connect.grading.judge_async` (CPU-bound ones in a thread);
* **response cache** — live responses are looked up in, and added to, the
  ledger's response cache (one query for the whole suite up front);
* **commit as you go** — a writer thread commits every finished case (grades,
  cache entries, failures) in one transaction, draining whatever else finished
  meanwhile, so the event loop never waits on the database and a crash loses
  at most the cases still in flight;
* **resume** — with ``resume=True`` the run's completed (case, grader,
  candidate model) keys are skipped; the ledger's idempotent writes make a
  repeated grade impossible anyway;
* **failures** — a side that still fails after retries, or a judge that cannot
  grade, becomes a :class:`CaseFailure` (written with ``record_failure``), never
  a fake score.

Library code: nothing here prints or exits; the CLI turns the report into
output and an exit code.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError, LedgerError
from llm_connect.grading._paired import judge_async
from llm_connect.grading._protocols import Case, Judge, JudgePair
from llm_connect.grading._results import GradingResult
from llm_connect.grading._suite import Suite
from llm_connect.types import LLMResponse, RunConfig

if TYPE_CHECKING:
    from llm_connect.adapters import LLMAdapter
    from llm_connect.ledger import QualityLedger, RecordItem

__all__ = [
    "BatchGrader",
    "BatchReport",
    "BatchResult",
    "CaseFailure",
    "LiveSide",
    "RecordedSide",
    "Side",
    "grade_suite",
    "new_run_id",
    "side_from_spec",
]

RECORDED_PREFIX = "recorded:"


def new_run_id() -> str:
    """A fresh, sortable run id: ``run-YYYYmmdd-HHMMSS-xxxxxx``."""
    import uuid

    return f"run-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


# -- sides ---------------------------------------------------------------------


class Side:
    """Where one side's responses come from (a live adapter or a suite's recordings)."""

    spec: str
    """The spec as the user gave it (``openai:gpt-4o-mini``, ``recorded:gold``)."""
    adapter_id: str
    """Stored with every grade; live sides also key the response cache on it."""
    live: bool = False

    def expected_model(self, case: Case) -> str:  # pragma: no cover - abstract
        """The model name this side's response for ``case`` is expected to carry."""
        raise NotImplementedError


class LiveSide(Side):
    """A side answered by a (usually remote) :class:`~llm_connect.adapters.LLMAdapter`."""

    live = True

    def __init__(self, spec: str, adapter: LLMAdapter) -> None:
        self.spec = spec
        self.adapter = adapter
        self.adapter_id = adapter.adapter_id
        _, _, model = adapter.adapter_id.partition(":")
        self._model = str(getattr(adapter, "model", None) or model or adapter.adapter_id)

    def __repr__(self) -> str:
        return f"LiveSide({self.spec!r})"

    def expected_model(self, case: Case) -> str:
        """The model the adapter asks for (the server may report a more precise name)."""
        return self._model


class RecordedSide(Side):
    """A side whose responses are recorded in the suite (``recorded:NAME``), per case.

    Responses are looked up by case id, never by prompt, so two cases that
    share a prompt keep their own recordings.
    """

    def __init__(self, name: str, suite: Suite) -> None:
        self.spec = RECORDED_PREFIX + name
        self.name = name
        self.adapter_id = self.spec
        self.suite = suite
        suite.check_recorded(name)  # SuiteError naming the first case without it

    def __repr__(self) -> str:
        return f"RecordedSide({self.name!r})"

    def response(self, case: Case) -> LLMResponse:
        """The recorded response of ``case``."""
        return self.suite.recorded(case, self.name)

    def expected_model(self, case: Case) -> str:
        return self.response(case).model


# -- report --------------------------------------------------------------------


@dataclass(frozen=True)
class CaseFailure:
    """A case (or one side or judge of it) that could not be graded."""

    case_id: str
    task: str
    stage: str
    """``baseline``, ``candidate`` or ``judge``."""
    error_type: str
    """The exception class name (``ServerError``, ``RateLimitError``...)."""
    message: str
    adapter_id: str | None = None
    """The side or judge that failed (adapter id, or the judge's grader id)."""
    line: int | None = None
    """The case's line in the suite file."""


@dataclass(frozen=True)
class BatchResult:
    """One grade produced by a run, with the case and side it belongs to."""

    case_id: str
    task: str
    candidate: str
    """The candidate side's spec."""
    result: GradingResult


@dataclass
class BatchReport:
    """What a batch run did. ``results`` holds only the grades made in this process."""

    run_id: str | None
    suite: str
    cases_total: int
    cases_done: int = 0
    """Cases finished in this process (graded, skipped as complete, or failed)."""
    cases_skipped: int = 0
    """Cases skipped because a resumed run already held all their grades."""
    results: list[BatchResult] = field(default_factory=list)
    failures: list[CaseFailure] = field(default_factory=list)
    model_calls: int = 0
    """Responses requested from live adapters (cache misses; retries not counted)."""
    cache_hits: int = 0
    elapsed_s: float = 0.0
    interrupted: bool = False
    """The run was stopped (Ctrl-C) before every case finished."""
    observed_models: dict[str, set[str]] = field(default_factory=dict)
    """Side spec -> model names its responses carried."""


# -- writer thread -------------------------------------------------------------


@dataclass
class _Work:
    records: list[RecordItem] = field(default_factory=list)
    cache: list[tuple[str, str, LLMResponse]] = field(default_factory=list)
    failures: list[CaseFailure] = field(default_factory=list)


class _LedgerWriter:
    """Commits finished cases from a thread, batching whatever is queued."""

    def __init__(
        self, ledger: QualityLedger, run_id: str | None, max_batch: int = 512, linger_s: float = 0.05
    ) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.max_batch = max_batch
        self.linger_s = linger_s
        self.error: BaseException | None = None
        self._queue: queue.Queue[_Work | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="llm-connect-ledger-writer", daemon=True)
        self._thread.start()

    def submit(self, work: _Work) -> None:
        if self.error is not None:
            raise LedgerError(f"the ledger writer failed: {self.error}") from self.error
        self._queue.put(work)

    def close(self) -> None:
        """Commit everything queued and stop the thread; re-raise a write error."""
        self._queue.put(None)
        self._thread.join()
        if self.error is not None:
            err = self.error
            raise err if isinstance(err, LedgerError) else LedgerError(f"ledger write failed: {err}")

    def _loop(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            batch: list[_Work] = []
            if item is None:
                stop = True
            else:
                batch.append(item)
                # Let cases finishing meanwhile join this transaction: one commit per
                # ~50 ms instead of one per case, and the GIL stays with the event loop.
                time.sleep(self.linger_s)
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            if batch and self.error is None:
                try:
                    self._write(batch)
                except BaseException as exc:  # kept and re-raised by close()/submit()
                    self.error = exc

    def _write(self, batch: list[_Work]) -> None:
        records = [r for w in batch for r in w.records]
        if records:
            self.ledger.record_batch(records)
        cache = [c for w in batch for c in w.cache]
        if cache:
            put_many = getattr(self.ledger, "cache_put_many", None)
            if put_many is not None:
                put_many(cache)
            else:
                _cache_put_batch(self.ledger, cache)
        if self.run_id is not None:
            for f in (f for w in batch for f in w.failures):
                self.ledger.record_failure(
                    run_id=self.run_id,
                    case_id=f.case_id,
                    task=f.task,
                    stage=f.stage,
                    error_type=f.error_type,
                    message=f.message,
                    adapter_id=f.adapter_id,
                )


def _cache_put_batch(ledger: QualityLedger, entries: list[tuple[str, str, LLMResponse]]) -> None:
    """Write many cache entries in one transaction (``cache_put`` semantics: first entry wins).

    Stop-gap until the ledger offers ``cache_put_many``: one transaction per
    response would cost the writer thread a commit per model call.
    """
    try:
        from llm_connect.ledger._models import ResponseCacheEntry, utcnow

        table = ResponseCacheEntry.__table__
        insert = ledger._insert
        write = ledger._write
    except (ImportError, AttributeError):  # a ledger without these internals: one by one
        for key, adapter_id, response in entries:
            ledger.cache_put(key, adapter_id, response)
        return
    now = utcnow()
    rows = [
        {"key": k, "adapter_id": a, "response": r.to_dict(), "created_at": now}
        for k, a, r in dict((e[0], e) for e in reversed(entries)).values()
    ]
    stmt = insert(table).on_conflict_do_nothing(index_elements=["key"])
    write("writing the response cache", lambda conn: conn.execute(stmt, rows))


# -- batch judging ---------------------------------------------------------------


class _JudgeBatcher:
    """Collects pairs for a ``judge_many`` judge across cases; judges them in a thread."""

    def __init__(self, judge: Any, *, max_batch: int = 64, linger_s: float = 0.005) -> None:
        self.judge = judge
        self.max_batch = max_batch
        self.linger_s = linger_s
        self._pending: list[tuple[JudgePair, asyncio.Future[GradingResult]]] = []
        self._task: asyncio.Task[None] | None = None

    async def submit(self, pair: JudgePair) -> GradingResult:
        fut: asyncio.Future[GradingResult] = asyncio.get_running_loop().create_future()
        self._pending.append((pair, fut))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        while self._pending:
            if len(self._pending) < self.max_batch:
                await asyncio.sleep(self.linger_s)  # let other finished cases join the batch
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            live = [(p, f) for p, f in batch if not f.done()]
            if not live:
                continue
            try:
                results = await asyncio.to_thread(self.judge.judge_many, [p for p, _ in live])
                if len(results) != len(live):
                    raise ValueError(f"judge_many returned {len(results)} results for {len(live)} pairs")
            except Exception:
                # Isolate the pair(s) at fault: judge one by one.
                for pair, fut in live:
                    try:
                        res = await asyncio.to_thread(
                            self.judge.judge,
                            pair.baseline_response,
                            pair.candidate_response,
                            prompt=pair.prompt,
                            run_config=pair.run_config,
                            case=pair.case,
                        )
                    except Exception as exc:
                        if not fut.done():
                            fut.set_exception(exc)
                    else:
                        if not fut.done():
                            fut.set_result(res)
                continue
            for (_, fut), res in zip(live, results, strict=True):
                if not fut.done():
                    fut.set_result(res)


# -- the engine ----------------------------------------------------------------


ProgressCallback = Callable[[int, int], None]


class BatchGrader:
    """Grades a suite: one baseline, candidates, judges, bounded and resumable.

    Args:
        baseline: the baseline side.
        candidates: one or more candidate sides.
        judges: judges, built before the run (every grade of every judge is kept).
        run_config: the base run config; a case's ``system_prompt`` replaces its own.
        ledger: where grades, failures, cache entries and the run go (``None``:
            nothing is stored, no cache, no resume).
        run_id: the run's id (a fresh one when ``None`` and a ledger is given).
        concurrency: cases in flight (live adapters should share a semaphore of
            the same size; :func:`grade_suite` and the CLI arrange it).
        use_cache: read and fill the ledger's response cache for live sides.
        resume: continue ``run_id``: skip grades it already holds.
        run_info: JSON-safe description of the run stored with ``start_run``
            (never secrets).
        on_progress: ``fn(done, total)`` called on the event loop after each case.
        judge_batch_size: most pairs handed to one ``judge_many`` call.
    """

    def __init__(
        self,
        *,
        baseline: Side,
        candidates: Sequence[Side],
        judges: Sequence[Judge],
        run_config: RunConfig | None = None,
        ledger: QualityLedger | None = None,
        run_id: str | None = None,
        concurrency: int = 8,
        use_cache: bool = True,
        resume: bool = False,
        run_info: Mapping[str, Any] | None = None,
        on_progress: ProgressCallback | None = None,
        judge_batch_size: int = 64,
    ) -> None:
        if not candidates:
            raise ConfigurationError("at least one candidate is needed")
        if not judges:
            raise ConfigurationError("at least one judge is needed")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigurationError(f"concurrency must be an integer >= 1, not {concurrency!r}")
        grader_ids = [j.grader_id for j in judges]
        if len(set(grader_ids)) != len(grader_ids):
            raise ConfigurationError(f"two judges share a grader id: {grader_ids}")
        specs = [c.spec for c in candidates]
        if len(set(specs)) != len(specs):
            raise ConfigurationError(f"a candidate is given twice: {specs}")
        if resume and (ledger is None or run_id is None):
            raise ConfigurationError("resume needs a ledger and a run id")
        self.baseline = baseline
        self.candidates = list(candidates)
        self.judges = list(judges)
        self.run_config = run_config or RunConfig()
        self.ledger = ledger
        self.run_id = run_id if run_id is not None else (new_run_id() if ledger is not None else None)
        self.concurrency = concurrency
        self.use_cache = use_cache and ledger is not None
        self.resume = resume
        self.run_info = dict(run_info or {})
        self.on_progress = on_progress
        self._batchers = {
            id(j): _JudgeBatcher(j, max_batch=judge_batch_size) for j in judges if hasattr(j, "judge_many")
        }

    def run(self, suite: Suite, *, stop: asyncio.Event | None = None) -> BatchReport:
        """Synchronous :meth:`arun` (starts its own event loop)."""
        return asyncio.run(self.arun(suite, stop=stop))

    # -- helpers ---------------------------------------------------------------

    def _config_for(self, case: Case) -> RunConfig:
        if case.system_prompt is not None and case.system_prompt != self.run_config.system_prompt:
            return self.run_config.replace(system_prompt=case.system_prompt)
        return self.run_config

    def _cache_key(self, side: Side, case: Case) -> str:
        from llm_connect.ledger import QualityLedger

        return QualityLedger.cache_key(side.adapter_id, case.prompt, self._config_for(case))

    def _missing(self, case: Case, done: set[tuple[str | None, str, str]]) -> bool:
        return any(
            (case.id, j.grader_id, c.expected_model(case)) not in done
            for c in self.candidates
            for j in self.judges
        )

    # -- the run ---------------------------------------------------------------

    async def arun(self, suite: Suite, *, stop: asyncio.Event | None = None) -> BatchReport:
        """Grade ``suite``; returns when every case finished or ``stop`` was set.

        When ``stop`` is set, cases in flight are cancelled (not written),
        everything finished is committed, and the report says ``interrupted``.
        """
        started = time.perf_counter()
        report = BatchReport(run_id=self.run_id, suite=suite.path, cases_total=len(suite.cases))
        ledger = self.ledger
        done_keys: set[tuple[str | None, str, str]] = set()
        if ledger is not None and self.run_id is not None:
            if self.resume:
                done_keys = set(await asyncio.to_thread(ledger.completed_keys, self.run_id))
            await asyncio.to_thread(ledger.start_run, self.run_id, suite=suite.path, config=self.run_info)
        todo = [c for c in suite.cases if not done_keys or self._missing(c, done_keys)]
        report.cases_skipped = len(suite.cases) - len(todo)
        report.cases_done = report.cases_skipped

        cached: dict[str, LLMResponse] = {}
        live_sides = [s for s in (self.baseline, *self.candidates) if s.live]
        if self.use_cache and live_sides and todo and ledger is not None:
            keys = [self._cache_key(s, c) for c in todo for s in live_sides]
            cached = dict(await asyncio.to_thread(ledger.cache_get_many, keys))

        writer = _LedgerWriter(ledger, self.run_id) if ledger is not None else None
        pending: asyncio.Queue[Case] = asyncio.Queue()
        for case in todo:
            pending.put_nowait(case)
        if self.on_progress is not None:
            self.on_progress(report.cases_done, report.cases_total)

        async def worker() -> None:
            while True:
                try:
                    case = pending.get_nowait()
                except asyncio.QueueEmpty:
                    return
                work = await self._grade_case(case, cached, done_keys, report)
                if writer is not None:
                    writer.submit(work)
                report.cases_done += 1
                if self.on_progress is not None:
                    self.on_progress(report.cases_done, report.cases_total)

        workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, max(1, len(todo))))]
        stopper = asyncio.create_task(stop.wait()) if stop is not None else None
        try:
            if stopper is None:
                await asyncio.gather(*workers)
            else:
                all_done: asyncio.Future[Any] = asyncio.gather(*workers)
                finished, _ = await asyncio.wait([all_done, stopper], return_when=asyncio.FIRST_COMPLETED)
                if stopper in finished and not all_done.done():
                    report.interrupted = True
                    for w in workers:
                        w.cancel()
                    await asyncio.gather(all_done, return_exceptions=True)
                else:
                    all_done.result()
        finally:
            if stopper is not None:
                stopper.cancel()
            for w in workers:
                if not w.done():
                    w.cancel()
            if writer is not None:
                await asyncio.to_thread(writer.close)
            if ledger is not None and self.run_id is not None:
                status = "completed"
                if report.interrupted:
                    status = "interrupted"
                elif report.failures:
                    status = "failed"
                await asyncio.to_thread(ledger.finish_run, self.run_id, status)
            report.elapsed_s = time.perf_counter() - started
        return report

    async def _respond(
        self, side: Side, case: Case, cached: Mapping[str, LLMResponse], report: BatchReport
    ) -> tuple[LLMResponse, str | None]:
        """The side's response for ``case`` and, for a fresh live call, its cache key."""
        if isinstance(side, RecordedSide):
            return side.response(case), None
        assert isinstance(side, LiveSide)
        key = self._cache_key(side, case) if self.use_cache else None
        if key is not None and key in cached:
            report.cache_hits += 1
            return cached[key], None
        report.model_calls += 1
        response = await side.adapter.acomplete(case.prompt, self._config_for(case))
        return response, key

    async def _judge(self, judge: Judge, pair: JudgePair) -> GradingResult:
        batcher = self._batchers.get(id(judge))
        if batcher is not None:
            return await batcher.submit(pair)
        return await judge_async(
            judge,
            pair.baseline_response,
            pair.candidate_response,
            prompt=pair.prompt,
            run_config=pair.run_config,
            case=pair.case,
        )

    async def _grade_case(
        self,
        case: Case,
        cached: Mapping[str, LLMResponse],
        done_keys: set[tuple[str | None, str, str]],
        report: BatchReport,
    ) -> _Work:
        work = _Work()
        rc = self._config_for(case)
        sides: list[Side] = [self.baseline, *self.candidates]
        outcomes = await asyncio.gather(
            *(self._respond(s, case, cached, report) for s in sides), return_exceptions=True
        )
        responses: dict[str, LLMResponse] = {}
        for side, outcome, stage in zip(
            sides, outcomes, ["baseline"] + ["candidate"] * len(self.candidates), strict=True
        ):
            if isinstance(outcome, asyncio.CancelledError):
                raise outcome
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome
                work.failures.append(_failure(case, stage, outcome, side.adapter_id))
                continue
            response, key = outcome
            responses[side.spec] = response
            report.observed_models.setdefault(side.spec, set()).add(response.model)
            if key is not None:
                work.cache.append((key, side.adapter_id, response))
        baseline = responses.get(self.baseline.spec)
        if baseline is not None:
            jobs: list[tuple[Side, Judge]] = []
            coros = []
            for cand in self.candidates:
                cand_resp = responses.get(cand.spec)
                if cand_resp is None:
                    continue
                pair = JudgePair(baseline, cand_resp, case.prompt, rc, case)
                for judge in self.judges:
                    if (case.id, judge.grader_id, cand_resp.model) in done_keys:
                        continue
                    jobs.append((cand, judge))
                    coros.append(self._judge(judge, pair))
            graded = await asyncio.gather(*coros, return_exceptions=True)
            for (cand, judge), res in zip(jobs, graded, strict=True):
                if isinstance(res, asyncio.CancelledError):
                    raise res
                if isinstance(res, BaseException):
                    if not isinstance(res, Exception):
                        raise res
                    work.failures.append(_failure(case, "judge", res, judge.grader_id))
                    continue
                report.results.append(BatchResult(case.id, case.task, cand.spec, res))
                work.records.append(self._record(case, cand, res))
        report.failures.extend(work.failures)
        return work

    def _record(self, case: Case, cand: Side, result: GradingResult) -> RecordItem:
        from llm_connect.ledger import RecordItem

        return RecordItem(
            result=result,
            task=case.task,
            run_id=self.run_id,
            case_id=case.id,
            tags=case.tags,
            baseline_adapter_id=self.baseline.adapter_id,
            candidate_adapter_id=cand.adapter_id,
        )


def side_from_spec(
    spec: str, suite: Suite, *, make_adapter: Callable[[str], LLMAdapter] | None = None
) -> Side:
    """The side named by ``spec``: ``recorded:NAME`` reads the suite, anything else is live.

    Live specs go through ``make_adapter`` (default
    :func:`~llm_connect.adapters.adapter_from_spec`). Raises
    :class:`~llm_connect.errors.SuiteError` when a case lacks the recording and
    :class:`~llm_connect.errors.ConfigurationError` for a bad spec.
    """
    if spec.startswith(RECORDED_PREFIX):
        name = spec[len(RECORDED_PREFIX) :]
        if not name:
            raise ConfigurationError(f"adapter spec {spec!r} names no recording (recorded:NAME)")
        return RecordedSide(name, suite)
    if make_adapter is None:
        from llm_connect.adapters import adapter_from_spec

        make_adapter = adapter_from_spec
    return LiveSide(spec, make_adapter(spec))


def _failure(case: Case, stage: str, exc: Exception, adapter_id: str | None) -> CaseFailure:
    message = str(exc).strip() or type(exc).__name__
    return CaseFailure(
        case_id=case.id,
        task=case.task,
        stage=stage,
        error_type=type(exc).__name__,
        message=message.splitlines()[0][:500],
        adapter_id=adapter_id,
        line=case.line,
    )


def grade_suite(
    suite: Suite,
    *,
    baseline: Side,
    candidates: Sequence[Side],
    judges: Sequence[Judge],
    run_config: RunConfig | None = None,
    ledger: QualityLedger | None = None,
    run_id: str | None = None,
    concurrency: int = 8,
    use_cache: bool = True,
    resume: bool = False,
) -> BatchReport:
    """Grade ``suite`` synchronously with a :class:`BatchGrader` (see its arguments)."""
    grader = BatchGrader(
        baseline=baseline,
        candidates=candidates,
        judges=judges,
        run_config=run_config,
        ledger=ledger,
        run_id=run_id,
        concurrency=concurrency,
        use_cache=use_cache,
        resume=resume,
    )
    return grader.run(suite)
