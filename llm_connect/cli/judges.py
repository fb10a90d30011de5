"""``llm-connect judges list|anchor|check|accept``: judges as instruments (issue 37).

A judge's grades are measurements; the judge behind a name can change. ``anchor`` freezes the
judge's grades of a set of cases, ``check`` asks it again on them and says whether it drifted
(an anytime-valid test over every check, so checking from cron keeps its false-alarm rate),
``accept`` takes the judge's new behaviour as the reference (a new anchor set), ``list`` shows
each judge with the identities its grades recorded.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from llm_connect.cli._common import (
    ApiKeyOption,
    BaseUrlOption,
    DbOption,
    FastHelpCommand,
    FastHelpGroup,
    JsonOption,
    fail,
    handle_errors,
    open_ledger,
)
from llm_connect.cli._exit import ExitCode

__all__ = ["CHECK_CODES", "app"]

app = typer.Typer(
    cls=FastHelpGroup,
    help="Judges as instruments: anchor sets, drift checks, identities.",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)

CHECK_CODES = {"stable": ExitCode.OK, "drifted": ExitCode.FAILED, "not settled": ExitCode.NOT_SETTLED}
"""``judges check``'s verdicts; an incomplete check (a judge call failed) is ``ExitCode.INCOMPLETE``."""

_Judge = Annotated[str, typer.Option("--judge", "-j", help="The judge (its grader id).", metavar="JUDGE")]
_Task = Annotated[str, typer.Option("--task", "-t", help="The task.", metavar="TASK")]


def _known(ledger: Any, judge: str, task: str | None) -> str:
    """The grader id ``judge`` names on ``task`` (a grader id, or a judge spec such as
    ``llm:openai:gpt-4o-mini``); exit 2 naming the judge and the task when it has no grade there."""
    from llm_connect.calibration import resolve_grader
    from llm_connect.errors import CalibrationError

    try:
        return resolve_grader(ledger, judge, task=task)[0]
    except CalibrationError:
        where = f" on task {task!r}" if task else ""
        judges = sorted({s.grader_id for s in ledger.summary(task=task)})
        fail(f"no grades by judge {judge!r}{where} (judges with grades: {', '.join(judges) or 'none'})")


@app.command("anchor", cls=FastHelpCommand)
@handle_errors
def anchor(
    judge: _Judge,
    task: _Task,
    size: Annotated[int, typer.Option("--size", min=1, help="Cases in the anchor set.")] = 100,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of the draw (default: random, stored).")
    ] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace the active anchor set.")] = False,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Freeze the judge's grades of up to SIZE cases of the task (labelled cases first)."""
    from llm_connect.calibration import freeze_anchor

    ledger = open_ledger(db)
    judge = _known(ledger, judge, task)
    row = freeze_anchor(ledger, judge, task, size=size, seed=seed, replace=replace)
    labelled = sum(c.labelled for c in row.cases)
    if json_out:
        out = {
            "anchor_id": row.id, "judge": judge, "task": task, "cases": len(row.cases), "labelled": labelled,
            "seed": row.seed, "identity": dict(row.identity), "replaced": replace, "note": row.note,
        }  # fmt: skip
        typer.echo(json.dumps(out, indent=2))
        return
    what = "replaced the active one" if replace else "first for this judge and task"
    typer.echo(
        f"anchor set {row.id} for {judge} on {task}: {len(row.cases)} cases ({labelled} labelled by people), "
        f"seed {row.seed} ({what})"
    )
    calls = "about 2 judge calls per case (both orders)" if "pairwise" in judge else "one judge call per case"
    typer.echo(f"each `llm-connect judges check` asks the judge again on these cases: {calls}")


@app.command("check", cls=FastHelpCommand)
@handle_errors
def check(
    judge: _Judge,
    task: _Task,
    alpha: Annotated[float, typer.Option("--alpha", min=1e-6, max=0.5, help="False-alarm rate.")] = 0.05,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Judge calls at once.")] = 4,
    base_url: str | None = BaseUrlOption,
    api_key: str | None = ApiKeyOption,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Ask the judge again on its anchor set: stable (exit 0), drifted (1), not settled (5); a
    failed judge call leaves the check incomplete (3), never stable."""
    from llm_connect.calibration import anchor_store, check_judge, rebuild_judge
    from llm_connect.grading import JudgeContext

    ledger = open_ledger(db)
    judge = _known(ledger, judge, task)
    if anchor_store(ledger).active_anchor(judge, task) is None:
        fail(
            f"{judge} has no anchor set on task {task!r}: freeze one with "
            f"llm-connect judges anchor --judge {judge} --task {task}"
        )

    def make_adapter(spec: str) -> Any:
        from llm_connect.adapters import adapter_from_spec

        return adapter_from_spec(spec, base_url=base_url, api_key=api_key)

    judge_obj = rebuild_judge(ledger, judge, JudgeContext(make_llm_adapter=make_adapter), task=task)
    report = check_judge(ledger, judge_obj, task, alpha=alpha, concurrency=concurrency)
    if json_out:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        typer.echo(f"{judge} on {task}: {report.why}")
        if report.mean_change is not None:
            typer.echo(
                f"  {report.cases} anchored cases, {report.changed_share:.0%} changed grade, mean change "
                f"{report.mean_change:.3f} (at most {report.change_upper:.3f}), mean shift "
                f"{report.shift:+.3f} [{report.shift_low:+.3f}, {report.shift_high:+.3f}], "
                f"check {report.checks_so_far} of this anchor set"
            )
        people = report.people
        if people.get("labelled"):
            typer.echo(
                f"  against people on {people['labelled']} labelled anchor cases: mean |grade - people| "
                f"{people['frozen_mean_abs_diff']:.3f} frozen, {people['new_mean_abs_diff']:.3f} now"
            )
        typer.echo(f"  cost: {report.calls} judge call(s)")
    if report.status == "incomplete":
        raise typer.Exit(ExitCode.INCOMPLETE)
    raise typer.Exit(CHECK_CODES[report.status])


@app.command("bridge", cls=FastHelpCommand)
@handle_errors
def bridge(
    old: Annotated[
        str, typer.Option("--from", help="The judge being replaced (its grader id or spec).", metavar="OLD")
    ],
    new: Annotated[str, typer.Option("--to", help="The new judge (a judge spec).", metavar="NEW")],
    task: _Task,
    sample: Annotated[
        int, typer.Option("--sample", min=0, help="Graded cases drawn besides the anchor set.")
    ] = 200,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the draw.")] = 0,
    tolerance: Annotated[
        float, typer.Option("--tolerance", min=0.001, max=0.5, help="Largest expected difference per case.")
    ] = 0.05,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Judge calls at once.")] = 4,
    base_url: str | None = BaseUrlOption,
    api_key: str | None = ApiKeyOption,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Grade the old judge's anchor set and a sample of its cases with the new judge and compare:
    interchangeable (exit 0) or not interchangeable (1). Nothing is written."""
    from llm_connect.calibration import bridge_judges
    from llm_connect.grading import JudgeContext, build_judge

    ledger = open_ledger(db)
    old = _known(ledger, old, task)

    def make_adapter(spec: str) -> Any:
        from llm_connect.adapters import adapter_from_spec

        return adapter_from_spec(spec, base_url=base_url, api_key=api_key)

    judge_obj = build_judge(new, JudgeContext(make_llm_adapter=make_adapter))
    if judge_obj.grader_id == old:
        fail(f"--to {new} is the judge being replaced ({old})")
    report = bridge_judges(
        ledger, old, judge_obj, task, sample=sample, seed=seed, tolerance=tolerance, concurrency=concurrency
    )
    if json_out:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        typer.echo(f"{old} -> {report.new} on {task}: {report.why}")
        rho = "n/a" if report.spearman is None else (
            f"{report.spearman:.3f} [{report.spearman_low:.3f}, {report.spearman_high:.3f}]"
        )  # fmt: skip
        kappa = "" if report.kappa is None else (
            f", kappa {report.kappa:.3f} [{report.kappa_low:.3f}, {report.kappa_high:.3f}]"
        )  # fmt: skip
        typer.echo(
            f"  {report.cases} cases ({report.anchored} anchored), mean |new - old| "
            f"{report.mean_abs_diff:.3f} (at most {report.diff_upper:.3f}), mean shift {report.shift:+.3f}, "
            f"Spearman {rho}{kappa}"
        )
        if report.people.get("labelled"):
            typer.echo(
                f"  against people on {report.people['labelled']} labelled cases: mean |grade - people| "
                f"{report.people['old_mean_abs_diff']:.3f} old, "
                f"{report.people['new_mean_abs_diff']:.3f} new"
            )
        typer.echo(f"  cost: {report.calls} call(s) of the new judge")
    raise typer.Exit(ExitCode.OK if report.verdict == "interchangeable" else ExitCode.FAILED)


@app.command("accept", cls=FastHelpCommand)
@handle_errors
def accept(
    judge: _Judge,
    task: _Task,
    size: Annotated[int, typer.Option("--size", min=1, help="Cases in the new anchor set.")] = 100,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the draw (default: random).")] = None,
    db: str | None = DbOption,
) -> None:
    """Accept the judge's current behaviour: freeze a new anchor set from its latest grades
    (the drift test starts again; the old set and its checks stay in the ledger)."""
    from llm_connect.calibration import anchor_store, freeze_anchor

    ledger = open_ledger(db)
    judge = _known(ledger, judge, task)
    if anchor_store(ledger).active_anchor(judge, task) is None:
        fail(f"{judge} has no anchor set on task {task!r} to accept a change of; use `judges anchor`")
    row = freeze_anchor(ledger, judge, task, size=size, seed=seed, replace=True, note="accepted by the user")
    typer.echo(
        f"accepted: anchor set {row.id} for {judge} on {task} ({len(row.cases)} cases); checks start again"
    )


@app.command("list", cls=FastHelpCommand)
@handle_errors
def list_judges(
    task: Annotated[str | None, typer.Option("--task", "-t", help="Only this task.", metavar="TASK")] = None,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Each judge with grades: tasks, grade counts, the identities its grades recorded (a
    change of served model or fingerprint under one judge is flagged), its anchor set and last check."""
    from llm_connect.calibration import anchor_store, judge_identities

    ledger = open_ledger(db)
    rows = judge_identities(ledger, task=task)
    store = anchor_store(ledger)
    out = []
    for row in rows:
        anchor = store.active_anchor(row["judge"], row["task"])
        checks = store.checks(anchor.id) if anchor is not None else []
        row = {**row, "anchor_id": None if anchor is None else anchor.id,
               "last_check": None if not checks else checks[-1].status}  # fmt: skip
        out.append(row)
    if json_out:
        typer.echo(json.dumps(out, indent=2, default=str))
        return
    if not out:
        typer.echo("no judge has grades" + (f" on task {task!r}" if task else ""))
        return
    for row in out:
        flag = "  IDENTITY CHANGED" if len(row["identities"]) > 1 else ""
        anchor_text = "no anchor set" if row["anchor_id"] is None else f"anchor set {row['anchor_id']}"
        check_text = "" if row["last_check"] is None else f", last check {row['last_check']}"
        typer.echo(
            f"{row['judge']}  task={row['task']}  grades={row['grades']}  {anchor_text}{check_text}{flag}"
        )
        for ident in row["identities"]:
            served = ident.get("judge_model") or "-"
            mark = f"  fingerprint {ident['system_fingerprint']}" if ident.get("system_fingerprint") else ""
            span = f"{_when(ident['first'])} .. {_when(ident['last'])}"
            typer.echo(f"    served {served}{mark}  grades={ident['grades']}  {span}")


def _when(value: Any) -> str:
    """A timestamp to the minute (UTC), or the text as stored."""
    return value.strftime("%Y-%m-%d %H:%M UTC") if hasattr(value, "strftime") else str(value)
