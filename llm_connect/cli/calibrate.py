"""``llm-connect calibrate``: does a judge agree with people and non-LLM judges, and how is it biased?

Grades what the comparison lacks on the ledger's existing pairs with the judge under
test and every reference judge (no baseline or candidate model is called: the
responses are in the ledger; against people only the labelled cases; everything
else only with ``--grade-missing``), records those grades, computes the calibration,
stores it (routing reads it) and prints it. ``--against human`` compares the
judge's stored grades with people's labels (``llm-connect labels import``). Heavy modules load only when the
command runs.

Exit codes (the CLI's one table, ``_exit.ExitCode``): 0 the calibration passed, 1 it failed
or has insufficient data, 2 usage or input error (or a verdict would need grading beyond the
compared pairs without ``--grade-missing``), 3 some pairs could not be graded (listed), 4 an
unexpected error, 130 interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from llm_connect.cli._common import (
    DbOption,
    FastHelpCommand,
    JsonOption,
    echo_err,
    fail,
    handle_errors,
    open_ledger,
    stdout_is_tty,
)
from llm_connect.cli._exit import ExitCode

if TYPE_CHECKING:
    from collections.abc import Sequence

    from llm_connect.calibration import CalibrationReport, Estimate, FillPlan, FillReport
    from llm_connect.grading import Judge

__all__ = ["app", "calibrate_command"]

app = typer.Typer(
    name="calibrate",
    help="Calibrate a judge against people and reference judges before routing trusts it.",
    rich_markup_mode=None,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# One command and no callback: ``typer.main.get_command(app)`` is that command itself, so the
# root mounts it as ``llm-connect calibrate [OPTIONS]`` (no sub-command level).


def _est(e: Estimate, digits: int = 2) -> str:
    if e.value is None:
        return "—"
    text = f"{e.value:.{digits}f}"
    if e.ci_low is not None and e.ci_high is not None:
        text += f" [{e.ci_low:.{digits}f}, {e.ci_high:.{digits}f}]"
    return text


def _probe_rows(report: CalibrationReport) -> list[tuple[str, str, str]]:
    rows = []
    pos = report.position
    if pos is not None:
        figure = (
            f"consistency {_est(pos.consistency_rate)}, mean shift {_est(pos.mean_shift)} "
            f"(n={pos.n}, {pos.scale} scale, min {pos.min_consistency})"
            if pos.status == "ok"
            else pos.reason or pos.status
        )
        rows.append(("position", figure, "FLAGGED" if pos.flagged else "ok"))
    ln = report.length
    if ln is not None:
        if ln.status == "ok":
            refs = ", ".join(f"{k} {_est(v)}" for k, v in sorted(ln.references.items()))
            excess = "—" if ln.excess is None else f"{ln.excess:+.2f}"
            figure = (
                f"Spearman vs length ratio ({ln.unit}): judge {_est(ln.judge)}; "
                + (f"{refs}; " if refs else "")
                + f"excess {excess} (margin {ln.margin})"
            )
        else:
            figure = ln.reason or ln.status
        rows.append(("length", figure, "FLAGGED" if ln.flagged else "ok"))
    sp = report.self_preference
    if sp is not None:
        if sp.status == "ok":
            resid = ", ".join(f"vs {k} {_est(v)}" for k, v in sorted(sp.residual_difference.items()))
            figure = (
                f"family {sp.judge_family}: mean {_est(sp.mean_same)} (n={sp.n_same}) vs "
                f"{_est(sp.mean_other)} (n={sp.n_other}); difference {_est(sp.difference)}"
                + (f"; residual {resid}" if resid else "")
            )
        else:
            figure = sp.reason or sp.status
        rows.append(("self-preference", figure, "FLAGGED" if sp.flagged else "ok"))
    return rows


def _print_human(report: CalibrationReport, fill: FillReport | None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=not stdout_is_tty())
    title = f"Calibration of {report.judge}" + (f" (task {report.task})" if report.task else "")
    table = Table(title=title, title_justify="left")
    for col in ("reference", "n", "Pearson", "Spearman", "Kendall tau", "MAD", "kappa", "agree", "status"):
        table.add_column(col, justify="right" if col not in ("reference", "status") else "left")
    for ref in report.references:
        a = ref.agreement
        table.add_row(
            ref.reference,
            str(a.n),
            _est(a.pearson),
            _est(a.spearman),
            _est(a.kendall_tau),
            _est(a.mean_abs_diff),
            _est(a.cohen_kappa),
            _est(a.agreement_rate),
            ref.status,
        )
    if report.references or report.human is None:
        console.print(table)
    else:
        console.print(title, highlight=False)
    _print_people(console, report)
    for ref in report.references:
        cm = ref.agreement.confusion
        if cm is not None:
            console.print(
                f"  {ref.reference} at {cm.threshold}: both pass {cm.both_pass}, "
                f"judge pass/ref fail {cm.judge_pass_ref_fail}, "
                f"judge fail/ref pass {cm.judge_fail_ref_pass}, both fail {cm.both_fail}",
                highlight=False,
            )
        for why in (r for r in (ref.agreement.spearman.reason, ref.agreement.cohen_kappa.reason) if r):
            console.print(f"  {ref.reference}: {why}", highlight=False)
    probes = _probe_rows(report)
    if probes:
        ptable = Table(title="Bias probes", title_justify="left")
        ptable.add_column("probe")
        ptable.add_column("figure")
        ptable.add_column("flag")
        for row in probes:
            ptable.add_row(*row)
        console.print(ptable)
    for note in report.notes:
        console.print(f"note: {note}", highlight=False)
    if fill is not None:
        for gid, n in sorted(fill.graded.items()):
            console.print(
                f"graded {n} missing pair(s) with {gid} ({fill.already[gid]} already graded)", highlight=False
            )
        left = {gid: n for gid, n in sorted(fill.left_out.items()) if n}
        if left:
            console.print(
                "left ungraded, outside what this calibration compares: "
                + ", ".join(f"{n} pair(s) for {gid}" for gid, n in left.items())
                + " (--grade-missing grades them)",
                highlight=False,
            )
        if fill.skipped_no_text:
            console.print(
                f"{fill.skipped_no_text} pair(s) not gradable: the ledger holds only digests of their texts",
                highlight=False,
            )
    style = "green" if report.passed else "red"
    stored = f" (stored as calibration #{report.calibration_id})" if report.calibration_id is not None else ""
    console.print(f"verdict: [{style}]{report.verdict}[/{style}]{stored}", highlight=False)


def _print_people(console: Any, report: CalibrationReport) -> None:
    """The ``human`` reference: agreement with people, position and length, with intervals."""
    from rich.table import Table

    human = report.human
    if human is None:
        return
    a = human.agreement
    table = Table(title="Against people (human labels)", title_justify="left")
    table.add_column("figure")
    table.add_column("value [95% interval]", justify="right")
    table.add_column("n", justify="right")
    table.add_row("agreement (candidate / baseline / tie)", _est(a.agreement), str(a.n))
    table.add_row("agreement without ties", _est(a.agreement_non_tie), str(a.n_non_tie))
    table.add_row("Cohen's kappa", _est(a.cohen_kappa), str(a.n))
    if a.position_consistency is not None:
        table.add_row("position consistency", _est(a.position_consistency), str(a.n_position))
    if a.first_shown_rate is not None:
        table.add_row("answer shown first wins", _est(a.first_shown_rate), str(a.n_first_shown))
    ln = a.length_preference
    if ln.status == "ok":
        table.add_row("judge picks the longer answer", _est(ln.judge_rate), str(ln.n_judge))
        table.add_row("people pick the longer answer", _est(ln.human_rate), str(ln.n_human))
        flag = " FLAGGED" if ln.flagged else ""
        table.add_row(f"length preference (judge - people){flag}", _est(ln.difference), "")
    if a.scores is not None and a.scores.status == "ok":
        table.add_row("Spearman vs mean score", _est(a.scores.spearman), str(a.scores.n))
        table.add_row("Kendall tau vs mean score", _est(a.scores.kendall_tau), str(a.scores.n))
        table.add_row("mean |judge - score|", _est(a.scores.mean_abs_diff), str(a.scores.n))
        table.add_row(f"kappa at {report.threshold}", _est(a.scores.cohen_kappa), str(a.scores.n))
    console.print(table)
    console.print(
        f"  human: {human.status} ({a.n} of {human.labelled_cases} labelled cases graded by the judge, "
        f"{a.annotators} annotator(s))" + "".join(f"; {why}" for why in human.reasons),
        highlight=False,
    )


def _more_grading(plan: FillPlan, graders: Sequence[Judge]) -> str:
    """Why the compared pairs are too few, what ``--grade-missing`` would grade (LLM calls and,
    where the judge's grades recorded one, an estimated cost) and how to go on."""
    from llm_connect.grading.judges import judge_asks_llm

    parts = []
    for j in graders:
        gid = j.grader_id
        n = plan.missing.get(gid, 0) + plan.extra.get(gid, 0)
        text = f"{n} with {gid}"
        if n and judge_asks_llm(j):
            calls = n * (2 if getattr(j, "orders", None) == "both" else 1)
            cost = plan.cost_per_grade.get(gid)
            text += f" ({calls} LLM call(s), " + (
                f"about ${n * cost:.6f}".rstrip("0").rstrip(".") + " at the mean cost recorded on its grades)"
                if cost is not None
                else "cost unknown: no cost recorded on its grades)"
            )
        elif n:
            text += " (no LLM call)"
        parts.append(text)
    return (
        "more grading needed: "
        + "; ".join(plan.short)
        + ".\n--grade-missing would grade the stored pairs each has not graded: "
        + ", ".join(parts)
        + ".\nRun again with --grade-missing to grade them, or with --no-grade to calibrate on the "
        "grades already stored."
    )


class _CachedAdapter:
    """An LLM adapter whose calls go through the ledger's response cache.

    Re-running a calibration then pays for no judge call twice (the position
    probe's swapped gradings included). Keyed like every cached call:
    ``QualityLedger.cache_key(adapter_id, prompt, run_config, endpoint=...)``.
    The wrapped adapter's ``model`` and ``endpoint`` show through (the LLM judge
    remembers per endpoint and model which structured output the server accepts).
    """

    def __init__(self, adapter: Any, ledger: Any) -> None:
        self.adapter = adapter
        self.adapter_id: str = adapter.adapter_id
        self.model: str | None = getattr(adapter, "model", None)
        self.endpoint: str | None = getattr(adapter, "endpoint", None)
        self.ledger = ledger

    def complete(self, prompt: str, run_config: Any) -> Any:
        key = self.ledger.cache_key(self.adapter_id, prompt, run_config, endpoint=self.endpoint)
        cached = self.ledger.cache_get(key)
        if cached is not None:
            return cached
        response = self.adapter.complete(prompt, run_config)
        self.ledger.cache_put(key, self.adapter_id, response)
        return response

    async def acomplete(self, prompt: str, run_config: Any) -> Any:
        import asyncio

        return await asyncio.to_thread(self.complete, prompt, run_config)


@app.command("calibrate", cls=FastHelpCommand)
@handle_errors
def calibrate_command(
    judge: Annotated[
        str,
        typer.Option(
            "--judge",
            "-j",
            help="The judge under test: a spec (llm:openai:gpt-4o-mini) or a grader id in the ledger.",
            metavar="SPEC",
        ),
    ],
    against: Annotated[
        list[str],
        typer.Option(
            "--against",
            "-a",
            help="A reference judge (spec such as embedding, vrty, or a grader id), or human: people's "
            "labels in the ledger, which decide where they reach a verdict; repeatable.",
            metavar="SPEC|human",
        ),
    ],
    task: Annotated[
        str | None, typer.Option("--task", "-t", help="Only this task's pairs.", metavar="TASK")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only grades recorded at or after this ISO date/time.", metavar="WHEN"),
    ] = None,
    probe: Annotated[
        list[str] | None,
        typer.Option(
            "--probe",
            help="Bias probe to run: position (calls the judge), length, self_preference; repeatable. "
            "Default: length and self_preference.",
            metavar="NAME",
            show_default=False,
        ),
    ] = None,
    sample: Annotated[int, typer.Option("--sample", min=1, help="Pairs the position probe re-grades.")] = 50,
    threshold: Annotated[
        float, typer.Option("--threshold", min=0.0, max=1.0, help="A score passes when >= this.")
    ] = 0.5,
    scale: Annotated[
        str, typer.Option("--scale", help="How swapped scores mirror: relative (1.0 = as good) or symmetric.")
    ] = "relative",
    min_spearman: Annotated[
        float,
        typer.Option(
            "--min-spearman", min=-1.0, max=1.0, help="Smallest Spearman correlation with a reference."
        ),
    ] = 0.5,
    min_kappa: Annotated[
        float, typer.Option("--min-kappa", min=-1.0, max=1.0, help="Smallest Cohen's kappa with a reference.")
    ] = 0.4,
    min_n: Annotated[
        int, typer.Option("--min-n", min=1, help="Fewest pairs per reference for a verdict.")
    ] = 50,
    min_consistency: Annotated[
        float, typer.Option("--min-consistency", min=0.0, max=1.0, help="Smallest position consistency.")
    ] = 0.8,
    min_human_n: Annotated[
        int, typer.Option("--min-human-n", min=1, help="Fewest labelled cases for a verdict against people.")
    ] = 20,
    min_human_kappa: Annotated[
        float,
        typer.Option(
            "--min-human-kappa", min=-1.0, max=1.0, help="Smallest kappa of the verdicts vs people."
        ),
    ] = 0.4,
    min_human_agreement: Annotated[
        float,
        typer.Option(
            "--min-human-agreement", min=0.0, max=1.0, help="Smallest agreement with people without ties."
        ),
    ] = 0.7,
    no_grade: Annotated[
        bool, typer.Option("--no-grade", help="Use only the grades already in the ledger; call no judge.")
    ] = False,
    grade_missing: Annotated[
        bool,
        typer.Option(
            "--grade-missing",
            help="Grade every stored pair the judge and references have not graded, not only the "
            "pairs the calibration compares (LLM judge calls cost; they become evidence of their tasks).",
        ),
    ] = False,
    no_store: Annotated[bool, typer.Option("--no-store", help="Do not store the calibration.")] = False,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Neither read nor fill the response cache for judge calls.")
    ] = False,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, max=256, help="Judge calls in flight.")
    ] = 8,
    shared_run: Annotated[
        str | None,
        typer.Option(
            "--shared-run",
            help="Grade the missing pairs together with every other process given this run id "
            "(PostgreSQL): each claims pairs with a lease; each pair is graded once.",
            metavar="RUN_ID",
            show_default=False,
        ),
    ] = None,
    lease_s: Annotated[
        float, typer.Option("--lease-s", min=1.0, help="With --shared-run: the lease of a claimed batch.")
    ] = 60.0,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", help="Write a scatter plot, judge vs reference (.png or .html).", show_default=False
        ),
    ] = None,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="OpenAI-compatible server URL (default: $OPENAI_BASE_URL).", show_default=False
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            help="API key (default: $OPENAI_API_KEY). Never printed or stored.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Calibrate an LLM judge against reference judges on the pairs already in the ledger.

    First the judge and each reference grade the stored pairs the calibration compares that
    they have not graded yet: against people, the labelled cases; against a reference judge,
    the pairs the judge graded (no baseline or candidate model is called; judge calls go
    through the ledger's response cache). When the judge has fewer pairs than --min-n for a
    reference judge, the command says how many pairs and LLM calls (and, where the judge's
    grades recorded a cost, about what cost) grading the other stored pairs would take and
    exits 2: --grade-missing grades every pair any of them has not graded. Then agreement
    (Pearson, Spearman, Kendall tau, MAD, Cohen's kappa, each with a bootstrap 95% interval)
    and the bias probes are computed, stored in the ledger's calibrations table and printed.
    Routing uses an LLM judge's grades only after a passing calibration.

    --against human compares any judge's stored grades with people's labels (llm-connect
    labels import): agreement, agreement without ties, Cohen's kappa, position consistency,
    how often the answer shown first wins, and length preference, each with an interval.
    Where people's labels reach a verdict, they alone decide the calibration.

    A calibration with too little data fails; needing more grading than the compared pairs
    (without --grade-missing) is a usage error; pairs that could not be graded leave the work
    incomplete.
    """
    from llm_connect.calibration import (
        HUMAN,
        PLOT_SUFFIXES,
        PROBES,
        SCALES,
        CalibrationThresholds,
        calibrate,
        fill_missing_grades,
        plan_fill,
        rebuild_judge,
        write_plot,
    )
    from llm_connect.grading import JudgeContext
    from llm_connect.grading.judges import judge_asks_llm

    if plot is not None and plot.suffix.lower() not in PLOT_SUFFIXES:
        fail(f"--plot {plot}: the file must end in .png or .html")
    if not against:
        fail("give at least one reference judge with --against")
    probes = list(dict.fromkeys(probe)) if probe else None
    unknown = sorted(set(probes or ()) - set(PROBES))
    if unknown:
        fail(f"unknown probe(s) {', '.join(unknown)} (known: {', '.join(PROBES)})")
    if scale not in SCALES:
        fail(f"--scale: scale must be one of {', '.join(SCALES)}, not {scale!r}")
    thresholds = CalibrationThresholds(
        min_spearman=min_spearman,
        min_kappa=min_kappa,
        min_n=min_n,
        min_position_consistency=min_consistency,
        min_human_n=min_human_n,
        min_human_kappa=min_human_kappa,
        min_human_agreement=min_human_agreement,
    )

    ledger = open_ledger(db)
    if shared_run is not None and ledger.dialect != "postgresql":
        fail(
            f"--shared-run needs a PostgreSQL ledger, not {ledger.dialect}: "
            "processes claim pairs with row locks"
        )
    if shared_run is not None and no_grade:
        fail("--shared-run shares the grading step; with --no-grade there is nothing to share")
    if grade_missing and no_grade:
        fail("--grade-missing grades the missing pairs; --no-grade grades none: give one of them")

    def make_adapter(spec: str) -> Any:
        from llm_connect.adapters import adapter_from_spec

        adapter = adapter_from_spec(spec, base_url=base_url, api_key=api_key)
        return adapter if no_cache else _CachedAdapter(adapter, ledger)

    context = JudgeContext(make_llm_adapter=make_adapter, embedding_store=None if no_cache else ledger)
    try:
        needs_judge = not no_grade or (probes is not None and "position" in probes)
        judge_obj = rebuild_judge(ledger, judge, context, task=task, since=since) if needs_judge else None
        judge_id = judge_obj.grader_id if judge_obj is not None else judge
        references: list[str] = []
        fill = None
        if no_grade:
            references = list(against)
        else:
            ref_judges = [
                rebuild_judge(ledger, text, context, task=task, since=since)
                for text in against
                if text != HUMAN
            ]
            references = [r.grader_id for r in ref_judges] + ([HUMAN] if HUMAN in against else [])
            assert judge_obj is not None
            progress = None
            if not json_out and stdout_is_tty():

                def progress(gid: str, done: int, total: int) -> None:
                    echo_err(f"grading with {gid}: {done}/{total}")

            graders = [judge_obj, *ref_judges]
            plan = plan_fill(
                ledger,
                judge_obj.grader_id,
                [r.grader_id for r in ref_judges] + ([HUMAN] if HUMAN in against else []),
                task=task,
                since=since,
                min_n=min_n,
                asks_llm=[j.grader_id for j in graders if judge_asks_llm(j)],
            )
            if plan.needs_more and not grade_missing:
                fail(_more_grading(plan, graders))
            fill = fill_missing_grades(
                ledger,
                graders,
                task=task,
                since=since,
                concurrency=concurrency,
                progress=progress,
                shared_run=shared_run,
                lease_s=lease_s,
                pairs=None if grade_missing else plan.compare,
            )
        report = calibrate(
            ledger,
            judge=judge_id,
            against=references,
            task=task,
            since=since,
            threshold=threshold,
            thresholds=thresholds,
            probes=probes,
            judge_adapter=judge_obj if probes is not None and "position" in probes else None,
            sample=sample,
            scale=scale,
            concurrency=concurrency,
            record=not no_store,
        )
    finally:
        ledger.close()

    if plot is not None:
        write_plot(report, plot)
    if json_out:
        out = report.to_dict()
        out["grading"] = None if fill is None else fill.to_dict()
        typer.echo(json.dumps(out, indent=2, allow_nan=False))
    else:
        _print_human(report, fill)
        if plot is not None:
            echo_err(f"plot written to {plot}")
    failed = sum(len(v) for v in (fill.errors.values() if fill is not None else []))
    if failed:
        assert fill is not None
        for gid, messages in sorted(fill.errors.items()):
            for message in messages[:5]:
                echo_err(f"error: {gid}: {message}")
            if len(messages) > 5:
                echo_err(f"error: {gid}: ... and {len(messages) - 5} more")
        raise typer.Exit(ExitCode.INCOMPLETE)
    raise typer.Exit(ExitCode.OK if report.passed else ExitCode.FAILED)
