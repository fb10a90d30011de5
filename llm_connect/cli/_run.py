"""The orchestration behind ``llm-connect grade``: options -> validated run -> report.

Order matters and is part of the contract: the suite is loaded and validated,
the sides and judges are built, and the ledger is opened, all before the first
model call or write; any problem there is a usage error (exit 2) and leaves
the ledger unchanged.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llm_connect.adapters import run_in_own_loop
from llm_connect.cli._common import fail, ride_out
from llm_connect.errors import ConfigurationError, LedgerFaultError
from llm_connect.values import RoutingPolicy

__all__ = ["GradeOptions", "Outcome", "RunFault", "execute"]

_POLICY = RoutingPolicy()
"""The policy's defaults: a run's routing settings start from them."""


@dataclass
class GradeOptions:
    """Everything ``llm-connect grade`` was asked to do."""

    suite_path: str | None = None
    prompt: str | None = None
    baseline: str | None = None
    candidates: list[str] = field(default_factory=list)
    judges: list[str] = field(default_factory=lambda: ["exact"])
    judge_model: str | None = None
    task: str | None = None
    system_prompt: str | None = None
    concurrency: int = 8
    rpm: float | None = None
    tpm: float | None = None
    shared: bool = False
    """Grade the run together with other workers (PostgreSQL; cases claimed with a lease)."""
    lease_s: float = 60.0
    db_patience: float = 60.0
    """Seconds to wait for a database that went away before the run stops (0: not at all)."""
    run_id: str | None = None
    resume: bool = False
    db: str | None = None
    use_cache: bool = True
    base_url: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    timeout: float | None = None
    max_retries: int = 4
    pricing: dict[str, dict[str, float]] = field(default_factory=dict)
    route_on: list[str] = field(default_factory=list)
    until_decided: bool = False
    """Grade in a seeded random order and stop calling a candidate once its decision is settled."""
    order_seed: int = 0
    """The seed of that order."""
    check_judges_every: int | None = None
    """Run ``judges check`` for every anchored judge after every N graded cases."""
    samples: int = 1
    """Answers per case and side; a case's grade is the mean over its samples."""
    min_quality: float = _POLICY.min_quality
    min_samples: int = _POLICY.min_samples
    confidence: float = _POLICY.confidence
    allow_uncalibrated: bool = _POLICY.allow_uncalibrated
    target: str = _POLICY.target
    """``judge`` or ``human``: what routing bounds (``RoutingPolicy.target``)."""
    min_stability: str | None = _POLICY.min_stability
    prefer: str = _POLICY.prefer
    label_rate: float | None = None
    """After grading, send this share of newly graded cases to people (``choose_for_labels``)."""
    label_strategy: str = "uniform"
    """``uniform`` or ``active``: how the label sampler sets each case's probability."""
    gate: bool = False
    """Whether ``--min-quality`` was given: the quality gate decides the exit code."""
    given: set[str] = field(default_factory=set)
    """The fields set on the command line (``--resume`` restores the others from the run)."""

    def run_info(self, grader_ids: list[str]) -> dict[str, Any]:
        """What is stored with the run (never the API key or the base URL's credentials).

        ``settings`` holds everything ``--resume`` restores (``cli/_settings.py``);
        the other keys are kept for readers of older runs.
        """
        from llm_connect.cli._settings import settings_of

        return {
            "settings": settings_of(self),
            "baseline": self.baseline,
            "candidates": list(self.candidates),
            "judges": list(self.judges),
            "grader_ids": grader_ids,
            "judge_model": self.judge_model,
            "task": self.task,
            "concurrency": self.concurrency,
            "rpm": self.rpm,
            "use_cache": self.use_cache,
            "max_retries": self.max_retries,
            "pricing": self.pricing,
            "samples": self.samples,
            "shared": self.shared,
            "lease_s": self.lease_s if self.shared else None,
            "tpm": self.tpm,
        }

    def policy(self, route_on: list[str] | None = None) -> RoutingPolicy:
        """The run's :class:`RoutingPolicy` (``route_on``: the resolved routing grader ids);
        routing, the gate, ``--until-decided``, JUnit and the report all decide under it."""
        return RoutingPolicy(
            # unstated (no --min-quality, now or when the run began): the target's default
            # None: unstated (the field is float once built; RoutingPolicy resolves None itself)
            min_quality=self.min_quality if self.gate else None,  # type: ignore[arg-type]
            confidence=self.confidence,
            min_samples=self.min_samples,
            target=self.target,
            route_on=tuple(route_on or ()),
            allow_uncalibrated=self.allow_uncalibrated,
            min_stability=self.min_stability,
            prefer=self.prefer,
        )


@dataclass
class Outcome:
    """The finished run: the engine's report plus the run's grades from the ledger."""

    report: Any
    rows: list[Any]
    ledger: Any
    suite: Any
    grader_ids: list[str]
    gating_ids: list[str] = field(default_factory=list)
    """The grader ids routing and the quality gate use (all judges unless --route-on)."""
    judges: list[Any] = field(default_factory=list)
    """The run's judges (the sessions report embeds with the persona judge's embedder)."""
    judge_context: Any = None
    """The judges' context: its embedders count texts embedded and read from the embedding cache."""
    label_queue: list[dict[str, Any]] = field(default_factory=list)
    """With ``--label-rate``: per task, candidate and routing judge, the chosen cases awaiting a
    label in the order to label them (``{"task", "candidate", "judge", "rate", "strategy", "cases"}``)."""
    run_config: Any = None
    """The run config from the command line (each case adds its recorded settings to it)."""
    judge_checks: list[dict[str, Any]] = field(default_factory=list)
    """Drift checks run during the run (``--check-judges-every``) or for a changed identity."""
    identity_changes: list[dict[str, Any]] = field(default_factory=list)
    """Judges whose grades in this run name a served model their earlier grades of the task do not."""

    def route(
        self,
        policy: RoutingPolicy,
        *,
        label_rate: float | None = None,
        label_strategy: str = "uniform",
        label_seed: int | None = None,
    ) -> list[Any]:
        """One routing decision per task of the run under ``policy`` (stored in the ledger).

        ``policy.min_samples`` (distinct cases) is used as given, never lowered to the
        size of a small suite: below it the evidence says "insufficient". The routing judges
        are the run's gating judges graded on the task. With ``label_rate``, the label
        sampler first decides the newly graded cases of each task x candidate x routing judge
        (``choose_for_labels``).
        """
        from llm_connect.cli._report import task_sides
        from llm_connect.routing import Router

        router = Router(self.ledger)
        decisions = []
        for task, (baseline, candidates) in task_sides(self.rows).items():
            graders = {r.grader_id for r in self.rows if r.task == task}
            if label_rate is not None:
                from llm_connect.labels import choose_for_labels

                for cand in candidates:
                    for gid in (g for g in self.gating_ids if g in graders):
                        waiting = choose_for_labels(
                            self.ledger, task=task, candidate=cand, grader_id=gid, rate=label_rate,
                            strategy=label_strategy, seed=label_seed,
                        )  # fmt: skip
                        self.label_queue.append(
                            {"task": task, "candidate": cand, "judge": gid, "rate": label_rate,
                             "strategy": label_strategy, "cases": waiting}
                        )  # fmt: skip
            # The run's routing judges graded on this task, as the report narrows them.
            decisions.append(
                router.decide(
                    task, baseline=baseline, candidates=candidates, policy=policy.for_judges(graders)
                )
            )
        return decisions


def settled_check(
    ledger: Any,
    tasks: list[str],
    baseline_model: str,
    candidates: list[tuple[str, str]],
    policy: RoutingPolicy,
) -> Callable[[], set[tuple[str, str]]]:
    """What ``--until-decided`` asks after each committed batch: the (task, candidate spec) pairs
    whose decision under ``policy`` (narrowed to the task's judges, ``RoutingPolicy.for_judges``,
    as routing after the run does) is settled (``Router.evaluate``, the one decision function:
    proven on every usable routing judge, or ruled out on one; with ``target="human"``, on what
    people would say).

    Stopping there keeps the guarantee because the bounds are anytime-valid: looking after every
    batch is allowed.
    """
    from llm_connect.routing import Router
    from llm_connect.values import SETTLED

    models = [model for _, model in candidates]
    router = Router(ledger)

    def check() -> set[tuple[str, str]]:
        done: set[tuple[str, str]] = set()
        for task in tasks:
            totals = ledger.grade_totals(task=task, baseline_model=baseline_model, candidate_model=models)
            narrowed = policy.for_judges([t.grader_id for t in totals])
            decision = router.evaluate(task, baseline=baseline_model, candidates=models, policy=narrowed)
            if not decision.used_grader_ids:
                continue  # nothing can settle a candidate: grade everything
            status = {c.model: c.status for c in decision.candidates}
            done.update((task, spec) for spec, model in candidates if status.get(model) in SETTLED)
        return done

    return check


def resolve_route_on(route_on: list[str], specs: list[str], grader_ids: list[str]) -> list[str]:
    """The grader ids that ``--route-on`` names (all of them when it names none).

    Each entry may be a grader id (``embedding:all-MiniLM-L6-v2``), a judge spec
    exactly as given to ``--judge``, or a judge name (``embedding``).
    """
    if not route_on:
        return list(grader_ids)
    chosen: list[str] = []
    for entry in route_on:
        matched = [
            gid
            for spec, gid in zip(specs, grader_ids, strict=True)
            if entry in (gid, spec, spec.partition(":")[0])
        ]
        if not matched:
            raise ConfigurationError(
                f"--route-on {entry!r} names none of the run's judges ({', '.join(grader_ids)})"
            )
        chosen.extend(g for g in matched if g not in chosen)
    return chosen


def _run_config(opts: GradeOptions) -> Any:
    from llm_connect.types import RunConfig

    return RunConfig(
        temperature=opts.temperature,
        max_tokens=opts.max_tokens,
        system_prompt=opts.system_prompt,
        model_params={} if opts.seed is None else {"seed": opts.seed},
        timeout_s=opts.timeout,
    )


def _progress(total: int) -> tuple[Any, Callable[[int, int], None]]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:.1f} cases/s")

    bar = Progress(
        TextColumn("grading"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        transient=True,
    )
    task_id = bar.add_task("grading", total=total)

    def update(done: int, total_: int) -> None:
        bar.update(task_id, completed=done, total=total_)

    return bar, update


def execute(
    opts: GradeOptions,
    *,
    pick_sides: Callable[[str | None, list[str], set[str]], tuple[str, list[str]]],
    progress: bool = False,
) -> Outcome:
    """Validate everything, run the batch engine, read back the run's grades."""
    from llm_connect.grading import (
        BatchGrader,
        CallLimit,
        JudgeContext,
        RateLimiter,
        ResilientAdapter,
        RetryPolicy,
        Suite,
        build_judge,
        load_suite,
        side_from_spec,
    )

    # 0. a resumed run's stored settings (a changed pinned setting -> exit 2, before any call)
    ledger: Any = None
    if opts.resume and not opts.shared:
        from llm_connect.cli._common import open_ledger
        from llm_connect.cli._settings import restore_settings

        assert opts.run_id is not None
        ledger = open_ledger(opts.db)
        stored = ledger.run(opts.run_id)
        if stored is None:
            fail(f"--resume {opts.run_id}: no such run in {ledger.url}")
        restore_settings(opts, opts.run_id, stored.config, opts.given)

    # 1. the suite (SuiteError -> exit 2, before anything else)
    if opts.prompt is not None:
        suite = Suite.single(opts.prompt, task=opts.task)
    else:
        assert opts.suite_path is not None
        suite = load_suite(opts.suite_path, default_task=opts.task)
    baseline_spec, candidate_specs = pick_sides(opts.baseline, opts.candidates, suite.recorded_names())
    opts.baseline, opts.candidates = baseline_spec, candidate_specs
    if baseline_spec in candidate_specs:
        fail(f"{baseline_spec} is both the baseline and a candidate")

    # 2. sides and judges, sharing one retry policy, rate limiter and call limit (sync and async calls)
    run_config = _run_config(opts)
    policy = RetryPolicy(max_retries=opts.max_retries)
    shared_ledger = _shared_ledger(opts) if opts.shared else None
    limiter: Any = RateLimiter(opts.rpm) if opts.rpm else None
    if shared_ledger is not None and (opts.rpm or opts.tpm):
        from llm_connect.grading import SharedRateLimiter

        limiter = SharedRateLimiter(shared_ledger, key=f"run:{opts.run_id}", rpm=opts.rpm, tpm=opts.tpm)
    elif opts.tpm:
        fail("--tpm needs --shared (a token budget shared by the fleet, kept in PostgreSQL)")
    calls = CallLimit(opts.concurrency)

    def make_adapter(spec: str) -> Any:
        from llm_connect.adapters import adapter_from_spec

        adapter = adapter_from_spec(
            spec, base_url=opts.base_url, api_key=opts.api_key, pricing=opts.pricing or None
        )
        return ResilientAdapter(adapter, policy=policy, limiter=limiter, semaphore=calls)

    baseline = side_from_spec(baseline_spec, suite, make_adapter=make_adapter)
    candidates = [side_from_spec(s, suite, make_adapter=make_adapter) for s in candidate_specs]
    context = JudgeContext(make_llm_adapter=make_adapter, default_judge_model=opts.judge_model)
    judges = [build_judge(spec, context) for spec in opts.judges]
    grader_ids = [j.grader_id for j in judges]
    gating_ids = resolve_route_on(opts.route_on, opts.judges, grader_ids)

    # 3. the ledger (LedgerError -> exit 2)
    from llm_connect.cli._common import open_ledger

    if shared_ledger is not None:
        ledger = shared_ledger
    elif ledger is None:
        ledger = open_ledger(opts.db)
    ride_out(ledger, opts.db_patience)
    context.use_embedding_store(ledger if opts.use_cache else None)  # --no-cache: embed every text
    if opts.shared or opts.resume:
        pass  # a shared run is joined by every worker; a resumed run was checked above
    elif opts.run_id is not None and ledger.run(opts.run_id) is not None:
        fail(f"run {opts.run_id} already exists in {ledger.url}; continue it with --resume {opts.run_id}")

    # Cases are graded in a seeded random order (not the file's): the anytime bounds treat the
    # cases in the order they arrive as exchangeable draws, and a suite grouped by topic or
    # difficulty would otherwise let its first group prove what the whole suite does not.
    early: dict[str, Any] = {} if opts.shared else {"shuffle_seed": opts.order_seed}
    if opts.until_decided:
        early = {
            "shuffle_seed": opts.order_seed,
            "settled": settled_check(
                ledger,
                sorted({c.task for c in suite.cases}),
                baseline.model,
                [(side.spec, side.model) for side in candidates],
                opts.policy(gating_ids),
            ),
        }
    bar, update = _progress(len(suite.cases)) if progress else (None, None)
    from llm_connect.cli._judge_watch import JudgeWatch

    watch = JudgeWatch(
        ledger, sorted({c.task for c in suite.cases}), grader_ids, base_url=opts.base_url,
        api_key=opts.api_key, every=opts.check_judges_every,
    )  # fmt: skip
    if opts.check_judges_every:
        shown = update

        def update(done: int, total: int) -> None:
            if shown is not None:
                shown(done, total)
            watch.on_progress(done)

    grader = BatchGrader(
        baseline=baseline,
        candidates=candidates,
        judges=judges,
        run_config=run_config,
        ledger=ledger,
        run_id=opts.run_id,
        concurrency=opts.concurrency,
        use_cache=opts.use_cache,
        resume=opts.resume,
        run_info=opts.run_info(grader_ids),
        on_progress=update,
        samples=opts.samples,
        fleet=_fleet(opts, ledger, suite) if opts.shared else None,
        **early,
    )

    async def main() -> Any:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_sigint() -> None:
            if stop.is_set():  # a second Ctrl-C aborts at once
                raise KeyboardInterrupt
            stop.set()
            from llm_connect.cli._common import echo_err

            echo_err("stopping: committing finished cases (Ctrl-C again to abort)")

        try:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
            installed = True
        except (NotImplementedError, RuntimeError, ValueError):
            installed = False
        try:
            return await grader.arun(suite, stop=stop)
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)

    try:
        if bar is not None:
            with bar:
                report = run_in_own_loop(main())
        else:
            report = run_in_own_loop(main())
    except LedgerFaultError as fault:
        if fault.journal is None and grader.run_id is not None:  # kept by an earlier process, still there
            files = ledger.journal(grader.run_id).files()
            fault.journal = ", ".join(str(f) for f in files) or None
        raise RunFault(fault, str(grader.run_id), started=_registered(ledger, grader.run_id)) from fault
    rows = list(ledger.results(run_id=grader.run_id))
    watch.finish(rows)
    return Outcome(
        report=report,
        rows=rows,
        ledger=ledger,
        suite=suite,
        grader_ids=grader_ids,
        gating_ids=gating_ids,
        judges=judges,
        judge_context=context,
        run_config=run_config,
        judge_checks=watch.to_json(),
        identity_changes=watch.identity_changes,
    )


class RunFault(Exception):
    """A fault of the ledger's database stopped a run under way (``fault``); ``started``: whether
    the run is registered in the ledger (else nothing was graded: the same command starts it)."""

    def __init__(self, fault: LedgerFaultError, run_id: str, *, started: bool) -> None:
        super().__init__(str(fault))
        self.fault = fault
        self.run_id = run_id
        self.started = started


def _registered(ledger: Any, run_id: str | None) -> bool:
    """Whether ``run_id`` is in the ledger (assumed so when the ledger cannot say)."""
    try:
        return run_id is not None and ledger.run(run_id) is not None
    except Exception:
        return True


def _shared_ledger(opts: GradeOptions) -> Any:
    """The PostgreSQL ledger of a ``--shared`` run (usage errors exit 2, before any call)."""
    from llm_connect.cli._common import open_ledger

    if opts.run_id is None:
        fail("--shared needs --run-id R: every worker of the run is started with the same id")
    if opts.until_decided:
        fail("--shared grades in claim order; --until-decided is not available with it")
    ledger = open_ledger(opts.db)
    if ledger.dialect != "postgresql":
        fail(
            f"--shared needs a PostgreSQL ledger (--db postgresql+psycopg://...), not {ledger.dialect}: "
            "workers claim cases with row locks and leases, which SQLite does not have"
        )
    return ledger


def _fleet(opts: GradeOptions, ledger: Any, suite: Any) -> Any:
    """This worker's claim source for the shared run."""
    from llm_connect.grading import FleetSource

    assert opts.run_id is not None
    return FleetSource(ledger, opts.run_id, suite.cases, batch=max(1, opts.concurrency), lease_s=opts.lease_s)
