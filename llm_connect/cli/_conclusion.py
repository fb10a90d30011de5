"""What a finished ``grade`` run concludes: statistics, sessions, routing, the gate, the exit code.

One step of ``llm-connect grade`` (options -> plan and run -> **conclusion** -> output): it
reads the run's grades back through the evidence module and decides, and nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from llm_connect.cli._exit import ExitCode

__all__ = ["Conclusion", "conclude"]


@dataclass
class Conclusion:
    """Everything the output step shows about a run."""

    stats: list[Any]
    """One ``RunStats`` per (task, candidate, judge): the evidence module's figures."""
    sessions: Any
    """The sessions report (persona judges on a suite with sessions), else ``None``."""
    decisions: list[Any]
    """One stored ``RoutingDecision`` per task (none when interrupted)."""
    routing_error: str | None
    """Why routing could not run (the grades are kept)."""
    gate: Any
    """The ``GateResult`` when ``--min-quality`` was given, else ``None``."""
    code: ExitCode
    """The exit code."""
    verdicts: list[Any] = field(default_factory=list)
    """``stats`` with each routing judge's evidence as the decision judged it (with ``--target
    human``, what people would say): what JUnit writes, as the gate reads it."""


def exit_code(report: Any, gate: Any, *, allow_unsettled: bool) -> ExitCode:
    """130 interrupted, then 3 failed cases, then 1 gate FAILED, then 5 NOT SETTLED, else 0."""
    from llm_connect.routing import GATE_FAILED, GATE_NOT_SETTLED

    if report.interrupted:
        return ExitCode.INTERRUPTED
    if report.failures:
        return ExitCode.INCOMPLETE
    if gate is not None and gate.outcome == GATE_FAILED:
        return ExitCode.FAILED
    if gate is not None and gate.outcome == GATE_NOT_SETTLED and not allow_unsettled:
        return ExitCode.NOT_SETTLED
    return ExitCode.OK


def _gate_items(decisions: list[Any], stats: list[Any]) -> list[tuple[str, str, Any]]:
    """The (task, candidate, evidence) the gate judges: each routing decision's evidence on its
    usable routing judges (the judges' own figures, or with ``target="human"`` what people would
    say), each candidate named by its spec as the run's table names it. None when routing
    failed, which leaves the gate not settled."""
    spec = {(s.task, s.candidate_model): s.candidate for s in stats}
    return [
        (d.task, spec.get((d.task, c.model), c.model), ev)
        for d in decisions
        for c in d.candidates
        for ev in c.graders
        if ev.grader_id in d.used_grader_ids
    ]


def conclude(opts: Any, outcome: Any, *, allow_unsettled: bool) -> Conclusion:
    """The statistics, sessions, routing decisions and gate of the run in ``outcome``."""
    from llm_connect.cli import _report, _sessions
    from llm_connect.routing import quality_gate

    report = outcome.report
    policy = opts.policy(outcome.gating_ids)
    stats = _report.run_stats(outcome.rows, outcome.ledger, policy=policy, routing_ids=outcome.gating_ids)
    sessions = _sessions.session_report(
        report.results,
        outcome.suite.cases,
        outcome.judges,
        baseline=str(opts.baseline),
        partial=report.cases_done - report.cases_skipped < report.cases_total,
    )
    decisions: list[Any] = []
    routing_error: str | None = None
    if not report.interrupted and stats:
        try:
            decisions = outcome.route(
                policy,
                label_rate=opts.label_rate,
                label_strategy=opts.label_strategy,
                label_seed=opts.seed,
            )
        except Exception as exc:  # routing is advice: a failure there does not lose the grades
            routing_error = f"{type(exc).__name__}: {exc}"
    verdicts = stats
    if decisions:
        # A judge routes when the decision used it (an LLM judge without a passing calibration
        # is left out there), so the table, --json and JUnit mark the judges the decision used.
        used = {d.task: set(d.used_grader_ids) for d in decisions}
        stats = [replace(s, routes=s.grader_id in used.get(s.task, set())) for s in stats]
        judged = {
            (d.task, c.model, ev.grader_id): ev for d in decisions for c in d.candidates for ev in c.graders
        }
        verdicts = [
            replace(s, evidence=judged.get((s.task, s.candidate_model, s.grader_id), s.evidence))
            for s in stats
        ]
    # The gate reads the routing decisions (one decision function, one policy): passed only when
    # every candidate is proven on every usable routing judge, failed when one is ruled out, not
    # settled otherwise. An LLM judge the decision ignored (no passing calibration) is not counted.
    # With --target human the gate reads what people would say (the decisions' human evidence),
    # never the judge's own figures: no human labels yet is not settled, not passed.
    ignored = [g.why for d in decisions for g in d.ignored_graders]
    gate = (
        quality_gate(_gate_items(decisions, stats), min_quality=policy.min_quality, ignored=ignored)
        if opts.gate
        else None
    )
    return Conclusion(
        stats=stats,
        sessions=sessions,
        decisions=decisions,
        routing_error=routing_error,
        gate=gate,
        code=exit_code(report, gate, allow_unsettled=allow_unsettled),
        verdicts=verdicts,
    )
