"""``llm-connect labels import|export|status``: human labels in the ledger.

Module level imports stay light (typer and the CLI plumbing); each command
imports the ledger when it runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from llm_connect.cli._common import (
    DbOption,
    FastHelpCommand,
    FastHelpGroup,
    JsonOption,
    fail,
    handle_errors,
    open_ledger,
)

__all__ = ["app"]

app = typer.Typer(
    cls=FastHelpGroup,
    help="Human labels: import people's preferences and scores, export them, see how far they go.",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)

_FILTERS = "Filters"
_INPUT = "Input"
_OUTPUT = "Output"
_TaskOpt: Any = typer.Option(
    None, "--task", "-t", help="Only this task (repeatable).", show_default=False, metavar="TASK",
    rich_help_panel=_FILTERS,
)  # fmt: skip
_CandOpt: Any = typer.Option(
    None, "--candidate", "-c", help="Only this candidate model, as graded (repeatable).", show_default=False,
    metavar="MODEL", rich_help_panel=_FILTERS,
)  # fmt: skip


@app.callback()
def _group() -> None:
    """Human labels: import people's preferences and scores, export them, see how far they go."""


@app.command("import", cls=FastHelpCommand)
@handle_errors
def import_(
    file: Annotated[
        Path,
        typer.Argument(
            help="A JSON Lines or CSV file of labels (by extension, else by its first character).",
            metavar="FILE",
            show_default=False,
        ),
    ],
    annotator: Annotated[
        str | None,
        typer.Option(
            "--annotator",
            "-a",
            help="The annotator of lines that name none.",
            show_default=False,
            metavar="NAME",
            rich_help_panel=_INPUT,
        ),
    ] = None,
    file_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="jsonl or csv (default: from the file).",
            show_default=False,
            metavar="FORMAT",
            rich_help_panel=_INPUT,
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Overwrite stored labels that differ (else they are refused).",
            rich_help_panel=_INPUT,
        ),
    ] = False,
    sampled_uniformly: Annotated[
        float | None,
        typer.Option(
            "--sampled-uniformly",
            help=(
                "The file's cases were drawn at random, each graded case with this probability: "
                "record them as chosen by the sampler (and the other graded cases not yet decided "
                "as not chosen), so routing on what people would say can use these labels."
            ),
            show_default=False,
            metavar="RATE",
            rich_help_panel=_INPUT,
        ),
    ] = None,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Import labels from FILE: all or nothing, each naming a graded case and candidate.

    Fields: task, case_id, candidate (model or adapter id), preference (candidate, baseline,
    tie) or score (0..1), and optionally annotator, note, run_id, created_at. A labelling
    sheet (labels queue --sheet) is read by its better column (1, 2 or tie; blank rows wait).
    A bad line names file, line and field, and nothing of the file is written; a file with no
    label (empty, a header alone, every sheet row blank) is refused too. Labels of cases the
    sampler did not choose count for agreement with people but not for routing on what people
    would say, unless the file was drawn at random (--sampled-uniformly RATE).
    """
    from llm_connect.labels import import_labels

    with open_ledger(db) as ledger:
        result = import_labels(
            ledger,
            file,
            annotator=annotator,
            replace=replace,
            format=file_format,
            sampled_uniformly=sampled_uniformly,
        )
    if json_out:
        typer.echo(json.dumps({"file": str(file), **vars(result)}))
        return
    typer.echo(
        f"{file}: {result.written} written, {result.unchanged} unchanged (already stored), "
        f"{result.replaced} replaced"
    )
    if result.blank:
        typer.echo(
            f"{file}: {result.blank} row(s) with no 'better' yet: not labelled, left waiting", err=True
        )


@app.command("export", cls=FastHelpCommand)
@handle_errors
def export(
    task: list[str] | None = _TaskOpt,
    candidate: list[str] | None = _CandOpt,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write to this file (default: stdout).",
            show_default=False,
            metavar="FILE",
            rich_help_panel=_OUTPUT,
        ),
    ] = None,
    file_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="jsonl or csv (default: from -o's extension, else jsonl).",
            show_default=False,
            metavar="FORMAT",
            rich_help_panel=_OUTPUT,
        ),
    ] = None,
    db: str | None = DbOption,
) -> None:
    """Write the stored labels as JSON Lines or CSV, ready to import again."""
    from llm_connect.labels import LABEL_FORMATS, write_labels

    fmt = file_format or ("csv" if output is not None and output.suffix.lower() == ".csv" else "jsonl")
    if fmt not in LABEL_FORMATS:
        raise typer.BadParameter(f"{fmt!r} is not one of {', '.join(LABEL_FORMATS)}", param_hint="--format")
    with open_ledger(db) as ledger:
        labels = ledger.labels(task=task or None, candidate=candidate or None)
    if output is None:
        write_labels(labels, sys.stdout, fmt)
        return
    try:
        with open(output, "w", encoding="utf-8", newline="") as fh:
            count = write_labels(labels, fh, fmt)
    except OSError as exc:
        from llm_connect.errors import LabelError

        raise LabelError(f"cannot write the labels: {exc}", path=str(output)) from None
    typer.echo(f"{count} labels written to {output}", err=True)


def _kappa(row: Any) -> str:
    if row.kappa_method is None:
        return "-"
    value = "undefined" if row.kappa is None else f"{row.kappa:.3f}"
    return f"{value} ({row.kappa_method}, {row.cases_shared} cases)"


@app.command("status", cls=FastHelpCommand)
@handle_errors
def status(
    task: list[str] | None = _TaskOpt,
    candidate: list[str] | None = _CandOpt,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Per task and candidate: cases graded, labelled, annotators, labels, and their agreement;
    then, where the label sampler ran, per judge the cases it decided and chose and how many of
    those have a label or still wait for one.

    Agreement is kappa on the verdicts (candidate, baseline, tie; a score counts as the
    verdict it stands for, split at 0.5) over the cases two or more annotators labelled:
    Cohen's for two annotators, Fleiss' for more.
    """
    from llm_connect.labels import label_status

    with open_ledger(db) as ledger:
        rows = label_status(ledger, task=task or None, candidate=candidate or None)
    if json_out:
        typer.echo(json.dumps([row.to_dict() for row in rows]))
        return
    if not rows:
        typer.echo("no graded cases")
        return
    table = [["task", "candidate", "graded", "labelled", "annotators", "labels", "agreement (kappa)"]]
    table += [
        [
            r.task,
            r.candidate,
            str(r.cases_graded),
            str(r.cases_labelled),
            str(r.annotators),
            str(r.labels),
            _kappa(r),
        ]
        for r in rows
    ]
    _print_table(table)
    sampled = [["task", "candidate", "judge", "decided", "chosen", "labelled", "waiting"]]
    sampled += [
        [r.task, r.candidate, p.grader_id, str(p.decided), str(p.chosen), str(p.labelled), str(p.waiting)]
        for r in rows
        for p in r.sampling
    ]
    if len(sampled) > 1:
        typer.echo("")
        typer.echo(
            "chosen by the label sampler (route --target human reads their labels; "
            "labels queue lists those waiting):"
        )
        _print_table(sampled)


def _print_table(table: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@app.command("queue", cls=FastHelpCommand)
@handle_errors
def queue(
    task: Annotated[
        str, typer.Option("--task", "-t", help="The task.", metavar="TASK", rich_help_panel=_FILTERS)
    ],
    candidate: Annotated[
        str | None,
        typer.Option(
            "--candidate",
            "-c",
            help="The candidate model, as graded; default: every candidate graded on the task "
            "(then each line is CANDIDATE<TAB>CASE_ID).",
            show_default=False,
            metavar="MODEL",
            rich_help_panel=_FILTERS,
        ),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            "-j",
            help="The grader id whose grades the sampler reads (the routing judge); default: every "
            "judge that graded the candidate on the task (one seed: at one rate they choose the "
            "same cases).",
            show_default=False,
            metavar="GRADER_ID",
            rich_help_panel=_FILTERS,
        ),
    ] = None,
    rate: Annotated[
        float,
        typer.Option(
            "--rate", help="Share of graded cases to send to people, in (0, 1].", rich_help_panel=_INPUT
        ),
    ] = 0.2,
    strategy: Annotated[
        str,
        typer.Option(
            "--strategy",
            help="uniform (rate each) or active (more where the judge is unsure, never below --floor).",
            rich_help_panel=_INPUT,
        ),
    ] = "uniform",
    floor: Annotated[
        float | None,
        typer.Option(
            "--floor",
            help="active only: the least probability any case gets (default 0.9 x rate).",
            show_default=False,
            rich_help_panel=_INPUT,
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            help="Makes the draws reproducible (default: the candidate's stored seed, else a fresh one).",
            show_default=False,
            rich_help_panel=_INPUT,
        ),
    ] = None,
    sheet: Annotated[
        Path | None,
        typer.Option(
            "--sheet",
            help="Also write the chosen cases still unlabelled to this labelling sheet (.csv or "
            ".jsonl): prompt, both answers in a blind order, and a 'better' column to fill with 1, "
            "2 or tie; labels import reads it back.",
            show_default=False,
            metavar="FILE",
            rich_help_panel=_OUTPUT,
        ),
    ] = None,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Decide which newly graded cases go to people and print the chosen cases still unlabelled.

    Each graded case is decided once, with an inclusion probability fixed before any label of
    it exists (stored in the ledger); cases decided earlier keep their decision (a note says
    so when they were decided at another rate or strategy). Without
    --judge, every judge that graded the candidate on the task decides, and the cases any of
    them chose are listed; without --candidate, every candidate graded on the task. Label the
    cases in the order printed: routing on what people would say (route --target human) waits
    for the earliest missing label.
    """
    from llm_connect.cli._names import ungraded
    from llm_connect.labels import choose_for_labels
    from llm_connect.ledger import SamplingStore

    with open_ledger(db) as ledger:
        unknown = ungraded(
            ledger, task, candidates=[candidate] if candidate else [], graders=[judge] if judge else []
        )
        if unknown:  # nothing to decide: a slip in a name, not an empty queue
            fail("; ".join(unknown))
        store = SamplingStore(ledger.engine)
        candidates = (
            [candidate] if candidate else sorted({t.candidate_model for t in ledger.grade_totals(task=task)})
        )
        judges: dict[str, list[str]] = {}
        notes: list[str] = []
        for cand in candidates:
            judges[cand] = [g for g in store.graders(task, cand) if judge in (None, g)]
            note = _decided_earlier(store, task, cand, judge, judges[cand], rate, strategy)
            if note is not None:
                notes.append(note)
            for grader_id in judges[cand]:
                choose_for_labels(
                    ledger, task=task, candidate=cand, grader_id=grader_id, rate=rate, strategy=strategy,
                    seed=seed, floor=floor,
                )  # fmt: skip
        # Every chosen case still waiting, in the order the sampler met them (any of the judges).
        waiting = [(cand, case_id) for _, cand, case_id in store.waiting(task, candidate, judge)]
        written = None
        if sheet is not None:
            written = _write_sheet(ledger, sheet, [(task, cand, case_id) for cand, case_id in waiting])
    cases: list[Any] = [c for _, c in waiting] if candidate else [
        {"candidate": cand, "case_id": c} for cand, c in waiting
    ]  # fmt: skip
    for note in notes:
        typer.echo(note, err=True)
    if json_out:
        found: dict[str, Any] = {"task": task, "candidate": candidate, "judge": judge, "cases": cases}
        if not judge:
            found["judges"] = judges
        if sheet is not None:
            found["sheet"] = {"path": str(sheet), "rows": written}
        typer.echo(json.dumps(found))
        return
    for cand, case_id in waiting:
        typer.echo(case_id if candidate else f"{cand}\t{case_id}")
    whose = candidate if candidate else f"{len(candidates)} candidate(s)"
    typer.echo(f"{len(waiting)} chosen case(s) of {whose} on {task} await a label", err=True)
    if sheet is not None:
        typer.echo(
            f"{written} row(s) written to {sheet}: fill 'better' with 1, 2 or tie (and 'annotator'), "
            f"then llm-connect labels import {sheet}",
            err=True,
        )


def _cases(n: int) -> str:
    return "1 case" if n == 1 else f"{n} cases"


def _decided_earlier(
    store: Any, task: str, candidate: str, judge: str | None, judges: list[str], rate: float, strategy: str
) -> str | None:
    """A note when cases of ``candidate`` were decided earlier with another rate or strategy than
    asked now: they keep their decision (a case is decided once), only new cases get the new rate.
    Read before this call decides anything."""
    earlier = store.designs(task, candidate, judge)
    other = {design: n for design, n in earlier.items() if design != (strategy, float(rate))}
    if not other:
        return None

    def at(how: str, r: float) -> str:
        return f"rate {r:g}" + ("" if how == "uniform" else f" ({how})")

    total = sum(other.values())
    were = "was" if total == 1 else "were"
    first = f"{_cases(total)} of {candidate} on {task} {were} decided earlier at " + ", ".join(
        at(how, r) if len(other) == 1 else f"{at(how, r)}: {n}" for (how, r), n in sorted(other.items())
    )
    new = {c.case_id for gid in judges for c in store.undecided(task, candidate, gid)}
    then = (
        f"only the {_cases(len(new))} not decided yet {'is' if len(new) == 1 else 'are'} decided at"
        if new
        else "no case is left to decide at"
    )
    return (
        f"note: {first} and keep {'its' if total == 1 else 'their'} decision (a case is decided once); "
        f"{then} {at(strategy, rate)}"
    )


def _write_sheet(ledger: Any, path: Path, cases: list[tuple[str, str, str]]) -> int:
    """Write the labelling sheet of ``cases`` to ``path`` (format by its extension); exit 2 naming
    the file when it cannot be written."""
    from llm_connect.labels import detect_label_format
    from llm_connect.report import write_label_sheet

    fmt = detect_label_format(path, "")
    try:
        with path.open("w", encoding="utf-8", newline="") as out:
            return write_label_sheet(ledger, cases, out, fmt)
    except OSError as exc:
        fail(f"cannot write the labelling sheet {path}: {exc.strerror or exc}")
