"""Human output of ``llm-connect grade``: the stats table or lines, routing, failures, sessions.

Rich is imported only on a terminal; piped output is plain lines.
"""

from __future__ import annotations

from typing import Any

import typer

from llm_connect.cli._common import stdout_is_tty

__all__ = ["print_human"]


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


def print_human(
    outcome: Any,
    stats: list[Any],
    decisions: list[Any],
    routing_error: str | None,
    gate_failed: list[Any],
    min_quality: float | None,
    show_cases: bool,
    single: bool,
    sessions: Any = None,
) -> None:
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
    parts.append(f"{report.model_calls} model calls, {report.cache_hits} cached")
    parts.append(f"{report.elapsed_s:.1f}s")
    title = " · ".join(parts)
    if out.console is not None:
        out.console.print(_report.stats_table(stats, title=title, confidence=0.95))
    else:
        out.line((title, None))
        for text in _report.stats_lines(stats, confidence=0.95):
            out.line((text, None))
    from llm_connect.cli._embeddings import embedding_line

    if (embedded := embedding_line(outcome)) is not None:
        out.line((embedded, "dim"))
    if sessions is not None:
        from llm_connect.cli._sessions import session_lines

        for text in session_lines(sessions):
            out.line((text, None))
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
    for d in decisions:
        arrow = "route to" if d.routed else "keep baseline"
        out.line(
            (f"task {d.task}", "bold"), (f": {arrow} ", None), (d.model, "bold"), (f". {d.reason}", None)
        )
    if routing_error:
        out.line((f"routing skipped: {routing_error}", None))
    if min_quality is not None:
        if gate_failed:
            names = ", ".join(
                f"{s.candidate} on {s.grader_id} in {s.task} (upper bound {s.evidence.upper_bound:.3f})"
                for s in gate_failed
            )
            out.line((f"quality gate FAILED (min {min_quality:g}): ", "bold red"), (names, None))
        else:
            out.line((f"quality gate passed (min {min_quality:g})", "green"))
