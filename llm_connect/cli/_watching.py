"""The loop behind ``llm-connect watch``: follow, sample, grade in shadow, store, decide, repeat.

Each round reads the new complete lines of the followed files (``traffic.Follower``), settles the
calls it will not grade (unusable: counted by reason, the first few named; no task; not sampled;
graded before), grades the rest in shadow with the batch engine (``grading.BatchGrader``, the
engine ``grade`` runs) as the watch's own run, stores how far each file is settled, then asks the
one ``Router`` what serves each task graded. Production's answer is the side that served (named by
the trace where it names one of the two models, else by the decision), and the other side is
asked now. A rollback is said on stderr and handed to ``--on-rollback``.

Stopping: the first SIGTERM or Ctrl-C lets the calls in flight finish and be recorded, stores
the offsets and ends (0 after SIGTERM, 130 after Ctrl-C); a second one abandons the calls in
flight, which are not settled, so the next start grades them.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_connect.cli._common import echo_err
from llm_connect.cli._exit import ExitCode
from llm_connect.errors import LedgerFaultError

__all__ = ["EXAMPLES", "Tally", "WatchPlan", "Watcher"]

EXAMPLES = 5
"""How many skipped records and failed cases of each reason a watch names (the rest are counted)."""
_PRODUCTION = "production"


@dataclass
class WatchPlan:
    """What a watch was asked to do, checked, with the sides' model names resolved."""

    name: str
    files: list[str]
    baseline: str
    """The baseline's spec (``openai:gpt-4o``)."""
    candidate: str
    baseline_model: str
    candidate_model: str
    judges: list[Any]
    policy: Any
    """The ``RoutingPolicy`` the decisions are taken under (``route_on``: the judges)."""
    run_config: Any
    make_adapter: Callable[[str], Any]
    task_key: tuple[str, str] | None
    """``("meta"|"tag", NAME)`` of ``--task-from``."""
    task: str | None
    sample_rate: float
    format: str | None
    once: bool
    poll_s: float
    concurrency: int
    use_cache: bool
    start_at_end: bool
    on_rollback: str | None
    run_info: dict[str, Any] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        """The watch's own run: every grade and failure it records is under it."""
        return f"watch-{self.name}"


@dataclass
class Tally:
    """What a watch (or one round of it) read and did."""

    calls: int = 0
    sampled: int = 0
    graded: int = 0
    failed: int = 0
    not_sampled: int = 0
    already: int = 0
    """Calls read again (after a restart) that the run had settled before."""
    skipped: Counter[str] = field(default_factory=Counter)

    def add(self, other: Tally) -> None:
        """Add ``other``'s counts to these."""
        for name in ("calls", "sampled", "graded", "failed", "not_sampled", "already"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.skipped.update(other.skipped)

    def line(self) -> str:
        """The counts in one line."""
        parts = [f"{self.calls} call(s) read", f"{self.sampled} sampled", f"{self.graded} graded"]
        parts.append(f"{self.failed} failed")
        skipped = sum(self.skipped.values())
        if skipped:
            reasons = ", ".join(f"{reason}: {n}" for reason, n in self.skipped.most_common())
            parts.append(f"{skipped} skipped ({reasons})")
        else:
            parts.append("0 skipped")
        parts.append(f"{self.not_sampled} not sampled")
        if self.already:
            parts.append(f"{self.already} graded before")
        return ", ".join(parts)


class Watcher:
    """Runs a :class:`WatchPlan` against an open ledger (see the module docstring)."""

    def __init__(self, plan: WatchPlan, ledger: Any) -> None:
        from llm_connect.ledger import WatchStore
        from llm_connect.routing import Router

        self.plan = plan
        self.ledger = ledger
        self.store = WatchStore(ledger.engine)
        self.router = Router(ledger)  # one per process: it reads only what changed since
        self.total = Tally()
        self.serving: dict[str, str] = {}
        self.stopping: int | None = None
        self._abort = asyncio.Event()
        self._wake = asyncio.Event()
        self._named: Counter[str] = Counter()
        self.files = 0

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> ExitCode:
        """Watch until stopped (or, ``once``, until nothing new is left); the exit code."""
        from llm_connect.adapters import run_in_own_loop

        return run_in_own_loop(self._main())

    async def _main(self) -> ExitCode:
        from llm_connect.traffic import Follower

        plan = self.plan
        self._abort, self._wake = asyncio.Event(), asyncio.Event()
        installed = self._signals()
        kept = self.ledger.replay_journal(plan.run_id)  # answers kept when the ledger failed
        if kept:
            echo_err(f"note: recorded {kept} finished case(s) the journal kept from before")
        stored = self.store.offsets(plan.name)
        follower = Follower(plan.files, format=plan.format, positions=stored, start_at_end=plan.start_at_end)
        batch = max(8, 4 * plan.concurrency)
        try:
            while self.stopping is None:
                poll = follower.poll(batch)
                for note in poll.notes:
                    echo_err(f"note: {note}")
                tally, decided = await self._round(poll, follower)
                positions = follower.positions()
                self.store.save(plan.name, positions)
                self.files = len(positions)
                self.total.add(tally)
                if poll.lines or poll.calls:
                    echo_err(f"watch {plan.name}: {tally.line()}" + "".join(f"; {d}" for d in decided))
                if self.stopping is not None or self._abort.is_set():
                    break
                if not poll.lines and not poll.calls and not poll.notes:
                    if plan.once:
                        break
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), plan.poll_s)
        finally:
            follower.close()
            for sig in installed:
                asyncio.get_running_loop().remove_signal_handler(sig)
        self.ledger.finish_run(plan.run_id, "interrupted" if self.stopping is not None else "completed")
        if self.stopping is not None:
            return ExitCode.INTERRUPTED if self.stopping == signal.SIGINT else ExitCode.OK
        if plan.once and self.total.failed:
            return ExitCode.INCOMPLETE
        return ExitCode.OK

    def _signals(self) -> list[int]:
        loop = asyncio.get_running_loop()
        installed: list[int] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread (a test's runner): Ctrl-C ends it as any command
        return installed

    def _on_signal(self, sig: int) -> None:
        if self.stopping is not None:
            self._abort.set()
            echo_err("stopping now: the calls in flight are abandoned (the next start grades them)")
            return
        self.stopping = sig
        self._wake.set()
        echo_err("stopping: recording the calls in flight, then the offsets (again to abandon them)")

    # -- one round --------------------------------------------------------------------

    async def _round(self, poll: Any, follower: Any) -> tuple[Tally, list[str]]:
        from llm_connect.traffic import call_id, call_task, sampled, watch_case

        plan, tally = self.plan, Tally()
        for skip in poll.skips:
            self._skip(tally, skip.reason, skip.where, skip.detail)
        todo: dict[str, tuple[Any, dict[str, Any]]] = {}
        for item in poll.calls:
            call = item.call
            tally.calls += 1
            cid = call_id(call)
            task = call_task(call, *plan.task_key) if plan.task_key is not None else None
            task = task or plan.task
            if task is None:
                self._skip(
                    tally, "no task", call.where, f"{plan.task_key[1] if plan.task_key else ''} absent"
                )
                follower.settle(item)
                continue
            if not sampled(cid, plan.sample_rate):
                tally.not_sampled += 1
                follower.settle(item)
                continue
            if cid in todo:
                self._skip(tally, "the same call id twice", call.where, cid)
                follower.settle(item)
                continue
            case = watch_case(call, format=item.format, task=task, case_id=cid)
            if not isinstance(case, dict):
                self._skip(tally, case.reason, case.where, case.detail)
                follower.settle(item)
                continue
            todo[cid] = (item, case)
        if todo:
            for cid in self.store.settled_cases(plan.run_id, list(todo)):
                tally.already += 1
                follower.settle(todo.pop(cid)[0])
        tally.sampled = len(todo)
        if not todo:
            return tally, []
        tasks = await self._grade(todo, tally, follower)
        return tally, [self._decide(task) for task in sorted(tasks)]

    async def _grade(
        self, todo: dict[str, tuple[Any, dict[str, Any]]], tally: Tally, follower: Any
    ) -> set[str]:
        """Grade the sampled calls in shadow; settle what was recorded; the tasks graded."""
        from llm_connect.grading import BatchGrader, side_from_spec, suite_of

        plan = self.plan
        groups: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
        for item, case in todo.values():
            groups[self._candidate_served(item.call, case)].append(case)
        jobs = []
        for served, cases in groups.items():
            if not cases:
                continue
            model = plan.candidate_model if served else plan.baseline_model
            for case in cases:
                answer = case["responses"][_PRODUCTION]
                answer["requested_model"] = model  # the side that served: what grades are keyed by
                answer.setdefault("model", model)
            suite = suite_of(cases, path=f"watch:{plan.name}")
            recorded = side_from_spec(f"recorded:{_PRODUCTION}", suite)
            other = side_from_spec(
                plan.baseline if served else plan.candidate, suite, make_adapter=plan.make_adapter
            )
            baseline, candidate = (other, recorded) if served else (recorded, other)
            grader = BatchGrader(
                baseline=baseline,
                candidates=[candidate],
                judges=plan.judges,
                run_config=plan.run_config,
                ledger=self.ledger,
                run_id=plan.run_id,
                concurrency=plan.concurrency,
                use_cache=plan.use_cache,
                run_info=plan.run_info,
            )
            jobs.append(grader.arun(suite, stop=self._abort))
        outcomes = await asyncio.gather(*jobs, return_exceptions=True)
        reports: list[Any] = []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome  # a LedgerFaultError: what finished is journaled, nothing is settled
            reports.append(outcome)
        graded_tasks: set[str] = set()
        for report in reports:
            graded = {r.case_id for r in report.results}
            failed = {f.case_id for f in report.failures}
            settled = graded | failed | {na.case_id for na in report.not_applicable}
            for cid in settled:
                follower.settle(todo[cid][0])
            tally.graded += len(graded)
            tally.failed += len(failed)
            graded_tasks.update(r.task for r in report.results)
            for f in report.failures:
                where = todo[f.case_id][0].call.where
                self._name(
                    f"failed:{f.stage}",
                    f"failed: {where} [{f.case_id}]: {f.stage} {f.error_type}: {_first(f.message)}",
                )
        return graded_tasks

    def _candidate_served(self, call: Any, case: dict[str, Any]) -> bool:
        """Whether the candidate answered this call in production: the trace names it (asked or
        served), else the task's current decision routes to it."""
        plan = self.plan
        names = {call.requested_model, call.answer.model if call.answer is not None else None}
        if plan.candidate_model in names:
            return True
        if plan.baseline_model in names:
            return False
        return self._serving(case["task"]) == plan.candidate_model

    def _serving(self, task: str) -> str:
        """The model serving ``task``: the newest decision (this watch's or a stored one)."""
        if task not in self.serving:
            stored = self.ledger.decisions(task, limit=1)
            last = stored[-1] if stored else None
            self.serving[task] = (
                last.model if last is not None and last.baseline == self.plan.baseline_model
                else self.plan.baseline_model
            )  # fmt: skip
        return self.serving[task]

    def _decide(self, task: str) -> str:
        """Ask the router after the round's grades; say a rollback and run the hook."""
        from llm_connect.cli._history import run_rollback_hook

        plan = self.plan
        asked: dict[str, Any] = {
            "baseline": plan.baseline_model,
            "candidates": [plan.candidate_model],
            "policy": plan.policy,
        }
        if plan.policy.slice_by is None:
            decision = self.router.decide(task, **asked)
            news = (
                [(None, decision.rollback)] if decision.rollback is not None and decision.rollback.new else []
            )
            stored: Any = decision
        else:  # each slice watched on its own cases (a slice that got worse goes back alone)
            stored = self.router.decide_slices(task, **asked)
            decision, news = stored.whole, stored.new_rollbacks()
        self.serving[task] = decision.model
        for name, back in news:
            echo_err(f"rollback{'' if name is None else f' (slice {name})'}: {back.why}")
        if news and plan.on_rollback and (problem := run_rollback_hook(plan.on_rollback, stored)) is not None:
            echo_err(f"warning: {problem}")
        return f"{task}: {decision.model} serves"

    # -- saying what was left out -------------------------------------------------------

    def _skip(self, tally: Tally, reason: str, where: str, detail: str = "") -> None:
        tally.skipped[reason] += 1
        self._name(f"skip:{reason}", f"skipped: {where}: {reason}" + (f" ({detail})" if detail else ""))

    def _name(self, kind: str, line: str) -> None:
        """Name the first :data:`EXAMPLES` of each kind on stderr; count the rest."""
        self._named[kind] += 1
        if self._named[kind] <= EXAMPLES:
            echo_err(line)
        elif self._named[kind] == EXAMPLES + 1:
            echo_err(f"(more {kind.split(':', 1)[1]} are counted, not named)")


def _first(message: str, limit: int = 300) -> str:
    line = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def stop_on_fault(plan: WatchPlan, fault: LedgerFaultError) -> ExitCode:
    """Say why the watch stopped (the ledger's database failed under it) and what was kept."""
    from llm_connect.ledger import when_writable

    echo_err(f"error: the watch stopped: {fault}")
    if fault.journaled and fault.journal:
        echo_err(
            f"kept: the answers of {fault.journaled} finished case(s) that could not be recorded are kept "
            f"in {fault.journal}; the watch records them first when it starts again, asking no model"
        )
    then = when_writable(fault.cause)
    echo_err(
        f"{then}, start the same watch again (--name {plan.name}): it goes on from the offsets stored "
        "for every call recorded, and grades no call twice"
    )
    return ExitCode.INCOMPLETE


def check_settings(stored: dict[str, Any] | None, plan: WatchPlan, keys: Sequence[str]) -> str | None:
    """Why the watch's run cannot go on with ``plan`` (a setting that changes what is graded differs
    from the run's), or ``None``."""
    if not stored:
        return None
    for key in keys:
        if key in stored and stored[key] != plan.run_info.get(key):
            return (
                f"watch {plan.name} was started with {key} {stored[key]!r}, not {plan.run_info.get(key)!r}; "
                "give another --name for another watch"
            )
    return None
