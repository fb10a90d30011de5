"""Human output of ``llm-connect grade``: the stats table or lines, routing, failures, sessions.

Rich is imported only on a terminal; piped output is plain lines.
"""

from __future__ import annotations

from typing import Any

import typer

from llm_connect.cli._common import stdout_is_tty

__all__ = ["emit", "grade_json", "print_human"]


class _Out:
    """Styled output on a terminal (rich, markup escaped), plain lines otherwise (rich not imported)."""

    def __init__(self) -> None:
        self.tty = stdout_is_tty()
        self.console: Any = None
        if self.tty:
            from rich.console import Console

            self.console = Console(highlight=False)

    def line(self, *parts: tuple[str, str | None]) -> None:
        """Print ``parts``: (text, rich style or None); text is never parsed as markup."""
        if self.console is None:
            typer.echo("".join(text for text, _ in parts))
            return
        from rich.text import Text

        self.console.print(Text.assemble(*[(t, style or "") for t, style in parts]))


def judge_calls(outcome: Any) -> int:
    """The requests the run's judges sent to their models (LLM and pairwise judges; every
    refused rung of the response-format ladder counts), beside the sides' ``model_calls``."""
    return sum(int(getattr(getattr(j, "reply_format", None), "requests", 0)) for j in outcome.judges)


def _fairness(outcome: Any) -> tuple[dict[str, dict[str, int]], dict[str, tuple[int, int]]]:
    """The recorded run settings that applied (:func:`~llm_connect.grading.recorded_summary`) and
    the candidate answers a token cap cut where the baseline's was not
    (:func:`~llm_connect.grading.capped_answers`)."""
    from llm_connect.grading import capped_answers, recorded_summary

    config = getattr(outcome, "run_config", None)
    summary = {} if config is None else recorded_summary(config, outcome.suite.cases)
    return summary, capped_answers(outcome.report.results)


def fairness_lines(outcome: Any) -> list[str]:
    """What the run asked the models with, when cases carry recorded production settings, and a
    note per candidate whose answers hit a token cap the baseline's did not."""
    summary, capped = _fairness(outcome)
    lines = []
    if summary.get("applied"):
        used = ", ".join(f"{k} ({n} cases)" for k, n in summary["applied"].items())
        lines.append(f"asked with the run settings recorded with the cases: {used}")
    if summary.get("replaced"):
        kept = ", ".join(f"--{k.replace('_', '-')}" for k in summary["replaced"])
        lines.append(f"the command line's {kept} replaced the recorded value on some cases")
    for cand, (n, total) in capped.items():
        lines.append(
            f"note: {n} of {total} answers of {cand} stopped at the token cap (finish_reason 'length') "
            "where the baseline's answer did not: the comparison is unfair to it (--max-tokens)"
        )
    return lines


def fairness_json(outcome: Any) -> dict[str, Any]:
    """``recorded_settings`` and ``token_capped`` for ``grade --json``."""
    summary, capped = _fairness(outcome)
    return {
        "recorded_settings": summary,
        "token_capped": {c: {"capped": n, "answers": t} for c, (n, t) in capped.items()},
    }


def print_human(
    outcome: Any,
    stats: list[Any],
    decisions: list[Any],
    routing_error: str | None,
    gate: Any,
    show_cases: bool,
    single: bool,
    sessions: Any = None,
    *,
    verbose: bool = False,
    allow_unsettled: bool = False,
    formats: dict[str, Any] | None = None,
    confidence: float,
) -> None:
    """The grade report for a person: per-case lines (asked, or one prompt), the statistics,
    one short routing line per task (the full reason with ``verbose``), the quality gate."""
    from llm_connect.cli import _report

    report = outcome.report
    out = _Out()
    if single or show_cases:
        for r in report.results:
            res = r.result
            out.line(
                (r.case_id, "bold"), (f" {r.candidate} ", None), (res.grader_id, "cyan"),
                (f" quality={res.quality_score:.3f}  {res.notes}", None),
            )  # fmt: skip
        if single and report.results:
            first = report.results[0].result.baseline_response
            out.line((f"baseline ({first.model}): ", "dim"), (first.text, None))
            seen = set()
            for r in report.results:
                if r.candidate not in seen:
                    seen.add(r.candidate)
                    cr = r.result.candidate_response
                    out.line((f"candidate {r.candidate} ({cr.model}): ", "dim"), (cr.text, None))
    parts = [f"run {report.run_id}", f"{report.cases_total} cases"]
    if report.cases_skipped:
        parts.append(f"{report.cases_skipped} already graded")
    judged = judge_calls(outcome)
    calls = f"{report.model_calls + judged} model calls" + (f" ({judged} by judges)" if judged else "")
    parts.append(f"{calls}, {report.cache_hits} cached")
    parts.append(f"{report.elapsed_s:.1f}s")
    title = " · ".join(parts)
    if out.console is not None:
        out.console.print(_report.stats_table(stats, title=title, confidence=confidence))
    else:
        out.line((title, None))
        for text in _report.stats_lines(stats, confidence=confidence):
            out.line((text, None))
    if stats:
        out.line((_report.CASES_NOTE, "dim"))
    from llm_connect.cli._embeddings import embedding_line

    if (embedded := embedding_line(outcome)) is not None:
        out.line((embedded, "dim"))
    for gid, used in (formats or {}).items():
        shown = ", ".join(f"{fmt} ({where})" for where, fmt in sorted(used.items()))
        out.line((f"judge {gid}", "dim"), (f" asked for structured output as {shown}", "dim"))
    if sessions is not None:
        from llm_connect.cli._sessions import session_lines

        for text in session_lines(sessions):
            out.line((text, None))
    for text in fairness_lines(outcome):
        out.line((text, "yellow" if text.startswith("note:") else "dim"))
    for spec, names in report.served_as().items():
        out.line(
            (f"{spec}", "dim"),
            (f" answered as {', '.join(names)}; its grades are stored under ", None),
            (f"{report.asked_models.get(spec)}", "bold"),
            (" (the served name is in the ledger's *_served_model columns)", "dim"),
        )
    for gid, info in report.not_applicable_by_judge().items():
        out.line(
            (f"judge {gid}", "yellow"),
            (f": not applicable to {info['cases']} of {report.cases_total} case(s), e.g. ", None),
            (f"{info['first_case']}: {info['reason']}", None),
        )
    stopped = getattr(report, "stopped", {}) or {}
    for cand, per_task in stopped.items():
        where = ", ".join(f"{n} of task {t}" for t, n in per_task.items() if n)
        if where:
            out.line((f"{cand}", "bold"), (f": settled early, not graded on {where}", None))
    if stopped:
        out.line((f"--until-decided saved {getattr(report, 'calls_saved', 0)} model call(s)", "green"))
    for change in outcome.identity_changes:
        out.line(
            ("judge identity: ", "bold"),
            (
                f"{change['judge']} on {change['task']} answered as {', '.join(change['served_now'])} "
                f"in this run; its earlier grades were served by {', '.join(change['served_before'])} "
                f"(llm-connect judges anchor / judges check tell whether it still grades the same)",
                "yellow",
            ),
        )
    for check in outcome.judge_checks:
        style = "red" if check["status"] == "drifted" else None
        out.line(
            (f"judge check ({check['why_run']}): ", None),
            (
                f"{check['grader_id']} on {check['task']}: {check['why']} ({check['calls']} judge calls)",
                style,
            ),
        )
    _print_decisions(out, decisions, verbose)
    _print_label_queue(out, outcome.label_queue, outcome.ledger)
    if routing_error:
        out.line((f"routing skipped: {routing_error}", None))
    if gate is not None:
        _print_gate(out, gate, allow_unsettled)


def _print_decisions(out: _Out, decisions: list[Any], verbose: bool) -> None:
    """One short line per task; the router's whole reason, wrapped, with ``verbose``."""
    import textwrap

    from llm_connect.routing import decision_sentence, judge_and_people, scale_note

    for d in decisions:
        arrow = "route to" if d.routed else "keep the" if d.model == "baseline" else "keep baseline"
        out.line((f"task {d.task}", "bold"), (f": {arrow} ", None), (d.model, "bold"))
        for text in textwrap.wrap(decision_sentence(d), width=100):
            out.line(("    " + text, None))
        for cand in d.candidates:  # routing on what people would say: the judge's and people's estimates
            for g in cand.graders:
                side = judge_and_people(g)
                if side is not None:
                    for text in textwrap.wrap(f"{cand.model} on {g.grader_id}: {side}", width=100):
                        out.line(("    " + text, None))
        if (note := scale_note(d)) is not None:
            for text in textwrap.wrap(note, width=100):
                out.line(("    " + text, "yellow"))
        if verbose:
            for text in textwrap.wrap(d.reason, width=100):
                out.line(("    " + text, "dim"))
    if decisions and not verbose:
        out.line(("(--verbose prints each decision's full reason)", "dim"))


def _print_label_queue(out: _Out, queue: list[dict[str, Any]], ledger: Any) -> None:
    """With ``--label-rate``: how many chosen cases await a label per task, candidate and judge,
    and the command that lists them in the order to label them."""
    import shlex

    # Judges of a candidate that chose the same cases (one seed, one rate: the usual case) share
    # a line: one label serves each of them.
    shared: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for group in queue:
        key = (group["task"], group["candidate"], group["rate"], group["strategy"], tuple(group["cases"]))
        shared.setdefault(key, []).append(group)
    for same in shared.values():
        group = same[0]
        n, task, cand, judge = len(group["cases"]), group["task"], group["candidate"], group["judge"]
        judges = ", ".join(g["judge"] for g in same)
        where = f"{cand} on {task} ({'judges' if len(same) > 1 else 'judge'} {judges})"
        if not n:
            out.line(("labels", "bold"), (f": no chosen case of {where} awaits a label", None))
            continue
        # The same rate and strategy: the queue decides cases graded later as this run did.
        args = ["labels", "queue", "-t", task, "-c", cand, "-j", judge, "--rate", f"{group['rate']:g}"]
        if group["strategy"] != "uniform":
            args += ["--strategy", group["strategy"]]
        command = shlex.join(["llm-connect", *args, "--db", ledger.url])
        out.line(("labels", "bold"), (f": {n} chosen case(s) of {where} await a label; list them: ", None),
                 (command, "dim"))  # fmt: skip
    if any(group["cases"] for group in queue):
        out.line(("label them in that order on the Label page of llm-connect view, or add --sheet "
                  "FILE to that command for a sheet to fill and llm-connect labels import FILE",
                  "dim"))  # fmt: skip


def _print_gate(out: _Out, gate: Any, allow_unsettled: bool) -> None:
    from llm_connect.routing import GATE_FAILED, GATE_PASSED

    style = {GATE_PASSED: "green", GATE_FAILED: "bold red"}.get(gate.outcome, "bold yellow")
    out.line((gate.headline(), style))
    for text in gate.lines() if gate.outcome != GATE_PASSED else []:
        out.line(("  " + text, None))
    if gate.outcome not in (GATE_PASSED, GATE_FAILED):
        tail = (
            " (--allow-unsettled: exit 0)" if allow_unsettled else " (exit 5; --allow-unsettled makes it 0)"
        )
        todo = "label the queued cases (llm-connect labels queue)" if gate.by_people else "grade more cases"
        out.line((f"not settled is neither a pass nor a failure: {todo}" + tail, "dim"))


def grade_json(
    outcome: Any,
    stats: list[Any],
    decisions: list[Any],
    routing_error: str | None,
    gate: Any,
    *,
    sessions: Any,
    code: int,
    resume: str,
    formats: dict[str, Any] | None,
    min_quality: float | None,
    show_cases: bool,
) -> dict[str, Any]:
    """What ``grade --json`` prints: the run, its statistics, routing, the gate, failures."""
    from llm_connect.cli._embeddings import embedding_json
    from llm_connect.cli._faults import pause_json

    report = outcome.report
    payload = {
        "run_id": report.run_id,
        "suite": report.suite,
        "cases": report.cases_total,
        "cases_done": report.cases_done,
        "cases_skipped": report.cases_skipped,
        "model_calls": report.model_calls,
        "judge_calls": judge_calls(outcome),
        "cache_hits": report.cache_hits,
        "elapsed_s": round(report.elapsed_s, 3),
        "interrupted": report.interrupted,
        "min_quality": min_quality,
        "gate": None if gate is None else gate.outcome,
        "gate_detail": None if gate is None else gate.to_dict(),
        "stats": [s.to_dict() for s in stats],
        "routing": [d.to_dict() for d in decisions],
        "routing_error": routing_error,
        "label_queue": outcome.label_queue,
        "judge_checks": outcome.judge_checks,
        "judge_identity_changes": outcome.identity_changes,
        "served_as": report.served_as(),
        **fairness_json(outcome),
        "stopped": getattr(report, "stopped", {}),
        "calls_saved": getattr(report, "calls_saved", 0),
        "embeddings": embedding_json(outcome),
        "response_formats": formats or {},
        "failures": [f.__dict__ for f in report.failures],
        "not_applicable": [
            {"grader_id": gid, **info} for gid, info in report.not_applicable_by_judge().items()
        ],
        "gate_failed": []
        if gate is None
        else [f"{i.task} / {i.candidate} / {i.evidence.grader_id}" for i in gate.ruled_out],
        "sessions": None if sessions is None else sessions.to_dict(),
        "resume": resume,
        **pause_json(outcome.ledger),
        "exit_code": code,
    }
    if show_cases:
        payload["case_results"] = [
            {
                "case_id": r.case_id,
                "task": r.task,
                "candidate": r.candidate,
                "grader_id": r.result.grader_id,
                "quality_score": r.result.quality_score,
                "notes": r.result.notes,
            }
            for r in report.results
        ]
    return payload


def response_formats(outcome: Any) -> dict[str, Any]:
    """Which structured-output format each LLM judge used, by grader id (empty without any)."""
    found: dict[str, Any] = {}
    for judge in outcome.judges:
        used = getattr(judge, "formats_used", None)
        if callable(used):
            formats = used()
            if formats:
                found[str(judge.grader_id)] = formats
    return found


def emit(
    opts: Any,
    outcome: Any,
    conclusion: Any,
    *,
    junit: Any,
    report_file: Any,
    json_out: bool,
    cases: bool,
    verbose: bool,
    allow_unsettled: bool,
    extra_json: dict[str, Any] | None = None,
    extra_lines: list[str] | None = None,
) -> None:
    """The output step: ``--junit``/``--report`` files, JSON or the human report on stdout, and
    on stderr the failures (whole messages) and the command that continues the run.
    ``extra_json`` / ``extra_lines`` (``--slice-by``'s ``slices`` and table) follow the rest."""
    import json

    from llm_connect.cli._artifacts import write_artifacts
    from llm_connect.cli._common import echo_err
    from llm_connect.cli._faults import pause_line
    from llm_connect.cli._settings import resume_hint

    report, c = outcome.report, conclusion
    write_artifacts(
        junit=junit, report_path=report_file, stats=c.verdicts, report=report, ledger=outcome.ledger,
        policy=opts.policy(outcome.gating_ids), gate=c.gate,
    )  # fmt: skip
    formats = response_formats(outcome)
    hint = resume_hint(opts, str(report.run_id))
    if json_out:
        payload = grade_json(
            outcome, c.stats, c.decisions, c.routing_error, c.gate, sessions=c.sessions, code=c.code,
            resume=hint, formats=formats, min_quality=opts.min_quality if opts.gate else None,
            show_cases=cases,
        )  # fmt: skip
        typer.echo(json.dumps(payload | (extra_json or {}), indent=2, default=str))
    else:
        print_human(
            outcome, c.stats, c.decisions, c.routing_error, c.gate, cases, opts.prompt is not None,
            sessions=c.sessions, verbose=verbose, allow_unsettled=allow_unsettled, formats=formats,
            confidence=opts.confidence,
        )  # fmt: skip
        for line in extra_lines or ():
            typer.echo(line)
    if (paused := pause_line(outcome.ledger)) is not None:  # a database restart ridden out
        echo_err(paused)
    if report.interrupted:
        echo_err(f"interrupted: {report.cases_done - report.cases_skipped} case(s) committed.")
        echo_err("continue it with: " + hint)
    elif report.failures:
        echo_err(f"{len(report.failures)} failure(s); the other grades are recorded. Failed cases:")
        for f in report.failures[:50]:
            where = f" (line {f.line})" if f.line is not None else ""
            echo_err(f"  {f.case_id}{where} [{f.stage} {f.adapter_id}] {f.error_type}: {f.message}")
        if len(report.failures) > 50:
            echo_err(f"  ... and {len(report.failures) - 50} more (llm-connect ledger failures)")
        echo_err("retry them with: " + hint)
