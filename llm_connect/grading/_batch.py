"""The batch engine: grade a whole suite, fast, frugal and resumable.

:class:`BatchGrader` grades every case of a :class:`~llm_connect.grading.Suite`
with one baseline side, one or more candidate sides and one or more judges:

* **bounded concurrency** — at most ``concurrency`` cases in flight and (through
  the shared :class:`~llm_connect.grading._retry.CallLimit` of
  :class:`~llm_connect.grading._retry.ResilientAdapter`, sync and async calls alike)
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
  a fake score;
* **not applicable** — a rule judge that has no data for a case (it raises
  :class:`~llm_connect.errors.CaseDataError` and the case lacks the field it
  names, e.g. ``schema`` on a case without ``expected.schema``) neither grades
  nor fails: the pair goes to ``BatchReport.not_applicable``. Present but
  unusable data (a schema file that does not exist) stays a failure.
* **stopping early** — ``shuffle_seed`` grades the cases in a seeded random
  order; ``settled`` names the (task, candidate spec) pairs whose decision is
  settled, asked after commits: their cases not yet started get no call for
  that candidate (see :class:`BatchGrader`).

Library code: nothing here prints or exits; the CLI turns the report into
output and an exit code. Sides live in ``_sides``, the report types in
``_report``, the writer thread in ``_writer``, one case's calls and judging in
``_case_grading`` and batched judging in ``_judge_batch``; this module re-exports
their public names.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import nullcontext, suppress
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from llm_connect.adapters import run_in_own_loop
from llm_connect.errors import ConfigurationError, LedgerError, LedgerFaultError
from llm_connect.grading._case_grading import grade_case
from llm_connect.grading._judge_batch import JudgeBatcher
from llm_connect.grading._protocols import Case, Judge
from llm_connect.grading._recorded import with_recorded
from llm_connect.grading._report import (
    BatchReport,
    BatchResult,
    CaseFailure,
    NotApplicable,
)
from llm_connect.grading._samples import check_samples
from llm_connect.grading._sides import RECORDED_PREFIX, LiveSide, RecordedSide, Side, side_from_spec
from llm_connect.grading._suite import Suite
from llm_connect.grading._writer import LedgerWriter, SettledCheck, merge_conflicts, unsettled_sides
from llm_connect.types import LLMResponse, RunConfig

if TYPE_CHECKING:
    from llm_connect.grading._fleet import FleetSource
    from llm_connect.ledger import QualityLedger

__all__ = [
    "RECORDED_PREFIX",
    "BatchGrader",
    "BatchReport",
    "BatchResult",
    "CaseFailure",
    "LiveSide",
    "NotApplicable",
    "RecordedSide",
    "Side",
    "grade_suite",
    "new_run_id",
    "side_from_spec",
]


def new_run_id() -> str:
    """A fresh, sortable run id: ``run-YYYYmmdd-HHMMSS-xxxxxx``."""
    import uuid

    return f"run-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


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
        concurrency: cases in flight (live adapters should share a ``CallLimit`` of
            the same size; :func:`grade_suite` and the CLI arrange it).
        use_cache: read and fill the ledger's response cache for live sides.
        resume: continue ``run_id``: skip grades it already holds.
        run_info: JSON-safe description of the run stored with ``start_run``
            (never secrets).
        on_progress: ``fn(done, total)`` called on the event loop after each case
            (``total``: the suite's cases less those skipped as settled, so a bar ends full).
        judge_batch_size: most pairs handed to one ``judge_many`` call.
        shuffle_seed: grade the cases in the order ``random.Random(shuffle_seed).shuffle``
            gives the suite's case list (``None``: file order). A resumed run keeps the
            order and skips what is done.
        settled: stop early (needs a ledger): ``fn() -> {(task, candidate spec)}``, the pairs
            whose decision is settled. A candidate is named by its side's :attr:`Side.spec`,
            as in :attr:`BatchResult.candidate` and :attr:`BatchReport.stopped`
            (``openai:gpt-4o-mini``, ``recorded:gold``), never by its model; pairs naming
            no candidate of the run are ignored, but a candidate named by its model is a
            :class:`~llm_connect.errors.ConfigurationError`. It is called in a worker thread,
            before the first case and then after every ``check_every`` newly committed cases
            (while cases remain to start), always after the writer committed everything
            finished so far, and while it runs no case starts. A case not yet started gets
            no call for its settled candidates; a case whose every candidate still to grade
            is settled is not started at all (no baseline call). Cases in flight finish and
            are recorded. An exception from it stops the run: no case starts any more, the
            cases in flight finish, everything finished is committed, the run is marked
            ``failed`` and the exception is raised from :meth:`arun` (resume continues it).
        check_every: newly committed cases between two ``settled`` calls.
        fleet: grade a shared run (:class:`~llm_connect.grading._fleet.FleetSource`): cases
            come from the leases this worker claims in the ledger, not from the suite's list,
            and each commit writes only the cases this worker still holds. Not with
            ``settled``/``shuffle_seed``.
        samples: answers per case and side (``--samples K``): sample k of the baseline is
            paired with sample k of each candidate, each judge grades every pair, and the
            K grades become one grade of the case (:func:`merge_samples`). Each sample is its
            own response-cache entry. A case is graded for a candidate only when all K
            samples of both sides answered (else it is a failure, and resume retries it).
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
        shuffle_seed: int | None = None,
        settled: Callable[[], Collection[tuple[str, str]]] | None = None,
        check_every: int = 10,
        samples: int = 1,
        fleet: FleetSource | None = None,
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
        by_model: dict[str, str] = {}
        for c in candidates:  # grades are keyed by the requested model: two sides may not share one
            if c.model in by_model:
                raise ConfigurationError(
                    f"candidates {by_model[c.model]!r} and {c.spec!r} both ask for model {c.model!r}; "
                    "their grades would share one key (grade them in separate runs)"
                )
            by_model[c.model] = c.spec
        if settled is not None and ledger is None:
            raise ConfigurationError("stopping early (settled=) needs a ledger to read the evidence from")
        if isinstance(check_every, bool) or not isinstance(check_every, int) or check_every < 1:
            raise ConfigurationError(f"check_every must be an integer >= 1, not {check_every!r}")
        if shuffle_seed is not None and (isinstance(shuffle_seed, bool) or not isinstance(shuffle_seed, int)):
            raise ConfigurationError(f"shuffle_seed must be an integer or None, not {shuffle_seed!r}")
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
        self.shuffle_seed = shuffle_seed
        self.settled = settled
        self.check_every = check_every
        self.samples = check_samples(samples)
        if fleet is not None and (ledger is None or settled is not None or shuffle_seed is not None):
            raise ConfigurationError("a shared run needs a ledger and grades in claim order (no early stop)")
        self.fleet = fleet
        self._batchers = {
            id(j): JudgeBatcher(j, max_batch=judge_batch_size) for j in judges if hasattr(j, "judge_many")
        }

    def run(self, suite: Suite, *, stop: asyncio.Event | None = None) -> BatchReport:
        """Synchronous :meth:`arun` (starts its own event loop)."""
        return run_in_own_loop(self.arun(suite, stop=stop))

    # -- helpers ---------------------------------------------------------------

    def _config_for(self, case: Case) -> RunConfig:
        """The run config ``case`` is asked with: its own system prompt, and the settings its
        production call was recorded with where the command line set none (``_recorded``)."""
        config = self.run_config
        if case.system_prompt is not None and case.system_prompt != config.system_prompt:
            config = config.replace(system_prompt=case.system_prompt)
        return with_recorded(config, case.metadata)

    def _cache_key(self, side: Side, case: Case, sample: int = 0) -> str:
        from llm_connect.ledger import QualityLedger

        return QualityLedger.cache_key(
            side.adapter_id, case.request, self._config_for(case), endpoint=side.endpoint, sample=sample
        )

    def _missing(self, case: Case, done: set[tuple[str | None, str, str]]) -> bool:
        return any(self._needs(c, case, done) for c in self.candidates)

    def _needs(self, cand: Side, case: Case, done: set[tuple[str | None, str, str]]) -> bool:
        """Whether ``cand`` still lacks a grade of ``case`` (always, when nothing is done)."""
        if not done:
            return True
        model = cand.expected_model(case)
        return any((case.id, j.grader_id, model) not in done for j in self.judges)

    def _would_call(self, side: Side, case: Case, cached: Mapping[str, LLMResponse]) -> int:
        """How many of ``side``'s responses to ``case`` would be model calls (live, not cached)."""
        if not side.live:
            return 0
        if not self.use_cache:
            return self.samples
        return sum(self._cache_key(side, case, k) not in cached for k in range(self.samples))

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
            if self.resume and self.fleet is None:  # answers kept when the ledger failed: no call again
                report.journal_replayed = await asyncio.to_thread(ledger.replay_journal, self.run_id)
            if self.resume:
                done_keys = set(await asyncio.to_thread(ledger.completed_keys, self.run_id))
                # Pairs found not applicable before the restart stay in the report of the run.
                lines = {c.id: c.line for c in suite.cases}
                report.not_applicable.extend(
                    replace(na, line=lines.get(na.case_id))
                    for na in await asyncio.to_thread(ledger.not_applicable, self.run_id)
                )
            await asyncio.to_thread(ledger.start_run, self.run_id, suite=suite.path, config=self.run_info)
        fleet = self.fleet
        if fleet is not None:
            await asyncio.to_thread(fleet.register)
            report.journal_replayed = await asyncio.to_thread(fleet.replay_journal)
        order = [] if fleet is not None else list(suite.cases)
        if self.shuffle_seed is not None:  # the whole list: a resumed run keeps the order
            random.Random(self.shuffle_seed).shuffle(order)
        todo = [c for c in order if not done_keys or self._missing(c, done_keys)]
        # A shared run's cases come from claims: none is "skipped" up front.
        report.cases_skipped = 0 if fleet is not None else len(suite.cases) - len(todo)
        report.cases_done = report.cases_skipped

        cached: dict[str, LLMResponse] = {}
        live_sides = [s for s in (self.baseline, *self.candidates) if s.live]
        if self.use_cache and live_sides and todo and ledger is not None:
            keys = [self._cache_key(s, c, k) for c in todo for s in live_sides for k in range(self.samples)]
            cached = dict(await asyncio.to_thread(ledger.cache_get_many, keys))

        writer = (
            LedgerWriter(
                ledger,
                self.run_id,
                worker_id=None if fleet is None else fleet.worker_id,
                on_committed=None if fleet is None else fleet.committed,
            )
            if ledger is not None
            else None
        )
        if fleet is not None and ledger is not None:
            fleet.on_claim = lambda batch: self._prefetch(ledger, batch, cached)
        settling = (
            SettledCheck(self.settled, writer, self.check_every, self.candidates)
            if self.settled is not None and writer is not None
            else None
        )
        pending: asyncio.Queue[Case] = asyncio.Queue()
        for case in todo:
            pending.put_nowait(case)
        self._progress(report)

        async def worker() -> None:
            while (settling is None or settling.error is None) and (writer is None or writer.fault is None):
                if fleet is not None:
                    claimed = await fleet.next()
                    if claimed is None:
                        return
                    case = claimed
                else:
                    try:
                        case = pending.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                active: list[Side] | None = self.candidates
                if settling is not None:
                    await settling.wait()  # a check under way may spare this case
                    if settling.error is not None:
                        return
                    active = unsettled_sides(self, case, settling.pairs, cached, done_keys, report)
                    if active is None:  # neither done nor failed: skipped as settled
                        report.cases_settled_skipped += 1
                        self._progress(report)
                        continue
                work = await grade_case(self, case, cached, done_keys, report, active)
                if writer is not None:
                    writer.submit(work)
                report.cases_done += 1
                self._progress(report)
                if settling is not None and settling.committed() and not pending.empty():
                    await settling.refresh()

        workers: list[asyncio.Task[None]] = []

        async def run_all() -> None:
            if settling is not None and todo:
                await settling.refresh()
            if fleet is not None:
                fleet.start()
                beat = asyncio.create_task(fleet.heartbeats(report))
                workers.extend(asyncio.create_task(worker()) for _ in range(self.concurrency))
                try:
                    await asyncio.gather(*workers)
                finally:
                    beat.cancel()
                return
            workers.extend(asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(todo))))
            await asyncio.gather(*workers)

        main = asyncio.create_task(run_all())
        stopper = asyncio.create_task(stop.wait()) if stop is not None else None
        error: BaseException | None = None
        try:
            if stopper is None:
                await main
            else:
                finished, _ = await asyncio.wait([main, stopper], return_when=asyncio.FIRST_COMPLETED)
                if stopper in finished and not main.done():
                    report.interrupted = True
                    main.cancel()
                    for w in workers:
                        w.cancel()
                    await asyncio.gather(main, *workers, return_exceptions=True)
                else:
                    main.result()
            if settling is not None and settling.error is not None:
                raise settling.failure(report)
        except BaseException as exc:
            error = exc
            raise
        finally:
            if stopper is not None:
                stopper.cancel()
            for task in (main, *workers):
                if not task.done():
                    task.cancel()
            if writer is not None:
                try:
                    await asyncio.to_thread(writer.close)
                except LedgerFaultError:
                    pass  # raised below, saying where the journal kept the cases
                finally:
                    merge_conflicts(report, writer, suite)
                error = writer.with_journal(error)
            if fleet is not None:
                with suppress(LedgerError) if error is not None else nullcontext():
                    await fleet.close()
                    await fleet.heartbeat(
                        calls=report.model_calls, failures=len(report.failures), cases_done=report.cases_done
                    )
            if isinstance(error, LedgerFaultError):  # the run stays "running": its resume goes on
                raise error
            if ledger is not None and self.run_id is not None:
                status = "completed"
                if report.interrupted or isinstance(error, (asyncio.CancelledError, KeyboardInterrupt)):
                    status = "interrupted"
                elif report.failures or error is not None:
                    status = "failed"
                if fleet is None or status != "completed" or await asyncio.to_thread(fleet.all_done):
                    await asyncio.to_thread(ledger.finish_run, self.run_id, status)
            rank = {c.id: i for i, c in enumerate(suite.cases)}
            once = {(na.case_id, na.grader_id, na.candidate): na for na in report.not_applicable}
            report.not_applicable = sorted(once.values(), key=lambda na: rank.get(na.case_id, len(rank)))
            report.elapsed_s = time.perf_counter() - started
        return report

    def _prefetch(self, ledger: QualityLedger, batch: list[Case], cached: dict[str, LLMResponse]) -> None:
        """Read the cached responses of a claimed batch (in a worker thread)."""
        live = [s for s in (self.baseline, *self.candidates) if s.live]
        if self.use_cache and live and batch:
            keys = [self._cache_key(s, c, k) for c in batch for s in live for k in range(self.samples)]
            cached.update(ledger.cache_get_many(keys))

    def _progress(self, report: BatchReport) -> None:
        if self.on_progress is not None:
            self.on_progress(report.cases_done, report.cases_total - report.cases_settled_skipped)


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
