"""``llm-connect route``: which model should serve a task, from the ledger's evidence."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from llm_connect.cli._common import DbOption, FastHelpCommand, JsonOption, fail, handle_errors, stdout_is_tty
from llm_connect.cli._policy import (
    AllowUncalibrated,
    Confidence,
    MinQuality,
    MinSamples,
    MinStability,
    Prefer,
    Target,
    build_policy,
)
from llm_connect.cli._slices import SliceBy

__all__ = ["app", "route"]


@handle_errors
def route(
    task: Annotated[str, typer.Option("--task", "-t", help="The task to route.", metavar="TASK")],
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            "-b",
            help="Baseline model (as recorded in the grades).",
            metavar="SPEC",
            show_default=False,
        ),
    ] = None,
    candidate: Annotated[
        list[str] | None,
        typer.Option(
            "--candidate", "-c", help="Candidate model (repeatable).", metavar="SPEC", show_default=False
        ),
    ] = None,
    grader_id: Annotated[
        list[str] | None,
        typer.Option(
            "--judge",
            "--grader-id",
            "-j",
            help="Grader id whose grades count (repeatable; a candidate must pass each).",
            show_default=False,
            metavar="JUDGE",
        ),
    ] = None,
    min_quality: MinQuality = None,
    min_samples: MinSamples = None,
    confidence: Confidence = None,
    allow_uncalibrated: AllowUncalibrated = None,
    min_stability: MinStability = None,
    target: Target = None,
    prefer: Prefer = None,
    slice_by: SliceBy = None,
    history: Annotated[
        bool,
        typer.Option(
            "--history",
            help="List the task's stored decisions and rollbacks over time instead of deciding "
            "(runs of the same decision folded into one line; --limit the newest).",
        ),
    ] = False,
    limit: Annotated[
        int,
        typer.Option("--limit", min=1, help="--history: read the newest N decisions.", metavar="N"),
    ] = 1000,
    on_rollback: Annotated[
        str | None,
        typer.Option(
            "--on-rollback",
            help="A command run (through the shell) with the decision as JSON on stdin when this "
            "decision rolls a candidate back (a pager, a gateway's config reload).",
            metavar="CMD",
            show_default=False,
        ),
    ] = None,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Decide which model serves a task, from the grades in the ledger.

    Picks the cheapest candidate whose anytime-valid lower bound of mean per-case
    quality reaches --min-quality with at least --min-samples cases on every judge;
    otherwise keeps the baseline. The decision is stored in the ledger. The
    first output line is the chosen model. With --slice-by, a table of the decision per
    slice of the task follows (e-BH across the slices), stored with the decision.

    A routed candidate is watched: when its cases graded since it was routed show its mean
    fell below --min-quality (an e-detector), the decision rolls it back to the baseline until
    it is proven again on later cases, and --on-rollback runs. --history lists the task's
    decisions and rollbacks instead.
    """
    from llm_connect.cli._common import echo_err, open_ledger
    from llm_connect.cli._history import run_rollback_hook
    from llm_connect.cli._names import ungraded
    from llm_connect.routing import Router, judge_and_people, scale_note

    if history:
        _history(task, db, limit, json_out)
        return
    if baseline is None or not candidate:
        fail("give --baseline SPEC and at least one --candidate SPEC (or --history)")
    if not grader_id:
        fail("give at least one --judge GRADER_ID (see `llm-connect ledger summary`)")
    policy = build_policy(
        min_quality=min_quality,
        confidence=confidence,
        min_samples=min_samples,
        target=target,
        route_on=grader_id,
        allow_uncalibrated=allow_uncalibrated,
        min_stability=min_stability,
        prefer=prefer,
        slice_by=slice_by,
    )
    sliced = None
    with open_ledger(db) as ledger:
        # Routing code may ask about a candidate not graded yet; a person more likely mistyped it.
        for line in ungraded(ledger, task, baseline=baseline, candidates=candidate, graders=grader_id):
            echo_err(f"note: {line}")
        router = Router(ledger)
        if policy.slice_by is None:
            decision = router.decide(task, baseline=baseline, candidates=candidate, policy=policy)
        else:
            sliced = router.decide_slices(task, baseline=baseline, candidates=candidate, policy=policy)
            decision = sliced.whole
    news = (
        sliced.new_rollbacks()
        if sliced is not None
        else [(None, decision.rollback)]
        if decision.rollback is not None and decision.rollback.new
        else []
    )
    for name, back in news:
        echo_err(f"rollback{'' if name is None else f' (slice {name})'}: {back.why}")
    if news and on_rollback:
        problem = run_rollback_hook(on_rollback, decision if sliced is None else sliced)
        if problem is not None:
            echo_err(f"warning: {problem}")
    if json_out:
        out = decision.to_dict() if sliced is None else sliced.to_dict()
        out["decision_id"] = decision.decision_id
        typer.echo(json.dumps(out, indent=2, default=str))
        return
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=not stdout_is_tty())
    console.print(f"{decision.model}", markup=False)
    console.print(decision.reason, markup=False)
    if (note := scale_note(decision)) is not None:
        console.print(note, markup=False)
    for cand in decision.candidates:
        for g in cand.graders:
            # The status itself: an unsettled candidate has not failed anything yet.
            console.print(
                f"  {cand.model}  {g.status or ('proven' if g.passed else 'not proven')}  {g.why}",
                markup=False,
            )
            side = judge_and_people(g)
            if side is not None:
                console.print(f"  {cand.model}  {g.grader_id}: {side}", markup=False)
        if decision.min_stability is not None:
            mark = "pass" if cand.stability_ok else "fail"
            console.print(
                f"  {cand.model}  {mark}  stability {cand.stability or 'not analysed'}", markup=False
            )
    if sliced is not None:
        from llm_connect.cli._slices import slice_lines

        for line in slice_lines(sliced):
            console.print(line, markup=False)


def _history(task: str, db: str | None, limit: int, json_out: bool) -> None:
    """``route --history``: the task's stored decisions folded into periods, oldest first."""
    from llm_connect.cli._common import open_ledger
    from llm_connect.cli._history import history_lines, periods

    with open_ledger(db) as ledger:
        rows = periods(ledger.decisions(task, limit=limit))
    if json_out:
        typer.echo(json.dumps({"task": task, "periods": [p.to_dict() for p in rows]}, indent=2))
        return
    for line in history_lines(task, rows):
        typer.echo(line)


app = typer.Typer(rich_markup_mode=None, add_completion=False)
"""The ``route`` command alone (``llm_connect.cli`` mounts it when it runs)."""
app.command("route", cls=FastHelpCommand)(route)
