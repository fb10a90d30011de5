"""``llm-connect route``: which model should serve a task, from the ledger's evidence."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from llm_connect.cli._common import DbOption, JsonOption, fail, handle_errors, stdout_is_tty

__all__ = ["route"]


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
    min_quality: Annotated[
        float,
        typer.Option(
            "--min-quality",
            min=0.0,
            max=1.0,
            metavar="Q",
            help="Quality a candidate must be proven to reach.",
        ),
    ] = 0.9,
    min_samples: Annotated[
        int,
        typer.Option(
            "--min-samples", min=2, metavar="N", help="Distinct cases needed per candidate and judge."
        ),
    ] = 30,
    confidence: Annotated[
        float,
        typer.Option(
            "--confidence",
            min=0.5,
            max=0.9999,
            metavar="LEVEL",
            help="Confidence per decision (split over the candidates, Bonferroni).",
        ),
    ] = 0.95,
    allow_uncalibrated: Annotated[
        bool,
        typer.Option(
            "--allow-uncalibrated",
            help="Use LLM judges' grades without a passing calibration (--target human needs none).",
        ),
    ] = False,
    min_stability: Annotated[
        str | None,
        typer.Option(
            "--min-stability",
            help="Also require the newest stored stability analysis (llm-connect stability --task) "
            "of a candidate on the task to be SAFE (or RISKY or better).",
            metavar="SAFE|RISKY",
            show_default=False,
        ),
    ] = None,
    target: Annotated[
        str,
        typer.Option(
            "--target",
            help="judge: bound the judges' mean grade; human: bound what people would say, from the "
            "judges' grades corrected by people's labels of the cases the sampler chose "
            "(llm-connect labels queue).",
            metavar="judge|human",
        ),
    ] = "judge",
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Decide which model serves a task, from the grades in the ledger.

    Picks the cheapest candidate whose lower confidence bound of mean quality
    reaches --min-quality with at least --min-samples grades on every judge;
    otherwise keeps the baseline. The decision is stored in the ledger. The
    first output line is the chosen model.
    """
    from llm_connect.cli._common import echo_err, open_ledger
    from llm_connect.cli._names import ungraded
    from llm_connect.routing import Router, judge_and_people

    if not grader_id:
        fail("give at least one --judge GRADER_ID (see `llm-connect ledger summary`)")
    if min_stability is not None and min_stability.upper() not in ("SAFE", "RISKY"):
        fail(f"--min-stability must be SAFE or RISKY, not {min_stability!r}")
    with open_ledger(db) as ledger:
        # Routing code may ask about a candidate not graded yet; a person more likely mistyped it.
        for line in ungraded(ledger, task, baseline=baseline, candidates=candidate, graders=grader_id):
            echo_err(f"note: {line}")
        decision = Router(ledger).decide(
            task,
            baseline=baseline,
            candidates=candidate,
            grader_id=grader_id,
            min_quality=min_quality,
            confidence=confidence,
            min_samples=min_samples,
            allow_uncalibrated=allow_uncalibrated,
            min_stability=None if min_stability is None else min_stability.upper(),
            target=target,
        )
    if json_out:
        out = decision.to_dict()
        out["decision_id"] = decision.decision_id
        typer.echo(json.dumps(out, indent=2, default=str))
        return
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=not stdout_is_tty())
    console.print(f"{decision.model}", markup=False)
    console.print(decision.reason, markup=False)
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
