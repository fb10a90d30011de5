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

__all__ = ["app", "route"]


@handle_errors
def route(
    task: Annotated[str, typer.Option("--task", "-t", help="The task to route.", metavar="TASK")],
    baseline: Annotated[
        str,
        typer.Option("--baseline", "-b", help="Baseline model (as recorded in the grades).", metavar="SPEC"),
    ],
    candidate: Annotated[
        list[str], typer.Option("--candidate", "-c", help="Candidate model (repeatable).", metavar="SPEC")
    ],
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
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Decide which model serves a task, from the grades in the ledger.

    Picks the cheapest candidate whose anytime-valid lower bound of mean per-case
    quality reaches --min-quality with at least --min-samples cases on every judge;
    otherwise keeps the baseline. The decision is stored in the ledger. The
    first output line is the chosen model.
    """
    from llm_connect.cli._common import echo_err, open_ledger
    from llm_connect.cli._names import ungraded
    from llm_connect.routing import Router, judge_and_people, scale_note

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
    )
    with open_ledger(db) as ledger:
        # Routing code may ask about a candidate not graded yet; a person more likely mistyped it.
        for line in ungraded(ledger, task, baseline=baseline, candidates=candidate, graders=grader_id):
            echo_err(f"note: {line}")
        decision = Router(ledger).decide(task, baseline=baseline, candidates=candidate, policy=policy)
    if json_out:
        out = decision.to_dict()
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


app = typer.Typer(rich_markup_mode=None, add_completion=False)
"""The ``route`` command alone (``llm_connect.cli`` mounts it when it runs)."""
app.command("route", cls=FastHelpCommand)(route)
