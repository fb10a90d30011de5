"""``llm-connect suite import``: a suite from production traffic (traces, request logs).

Module level imports stay light (typer and the CLI plumbing); the command
imports :mod:`llm_connect.traffic` when it runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from llm_connect.cli._common import FastHelpCommand, FastHelpGroup, JsonOption, handle_errors

__all__ = ["app"]

app = typer.Typer(
    cls=FastHelpGroup,
    help="Suites from production traffic: import traces and request logs as cases.",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)

_INPUT = "Input"
_CASES = "Cases"
_SAMPLE = "Sampling"
_PRIVACY = "Privacy"
_OUTPUT = "Output"


@app.callback()
def _group() -> None:
    """Suites from production traffic: import traces and request logs as cases."""


@app.command("import", cls=FastHelpCommand)
@handle_errors
def import_(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Traffic files: OTLP JSON lines, OpenAI-style logs, or a Langfuse export (.gz read too).",
            metavar="FILE...",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="The suite to write (JSON Lines); SUITE.meta.json is written beside it.",
            metavar="SUITE",
            show_default=False,
            rich_help_panel=_OUTPUT,
        ),
    ],
    file_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="otlp-json, openai-log or langfuse (default: detected from the first file).",
            metavar="FORMAT",
            show_default=False,
            rich_help_panel=_INPUT,
        ),
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Any skipped record (bad JSON, no input messages, a refused conversation) "
            "is exit 2 with nothing written.",
            rich_help_panel=_INPUT,
        ),
    ] = False,
    join_window: Annotated[
        int,
        typer.Option(
            "--join-window",
            min=1,
            help="OTLP: spans that may wait at once for their log records "
            "(per-message events exported apart from the span).",
            metavar="N",
            rich_help_panel=_INPUT,
        ),
    ] = 10_000,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Processes reading a large plain OTLP JSON file "
            "(default: one per CPU, up to 8; 1: this process alone). The suite is the same either way.",
            metavar="N",
            show_default=False,
            rich_help_panel=_INPUT,
        ),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            "-t",
            help="The task of every case (default: --task-from, else the requested model).",
            metavar="TASK",
            show_default=False,
            rich_help_panel=_CASES,
        ),
    ] = None,
    task_from: Annotated[
        str | None,
        typer.Option(
            "--task-from",
            help="Take each case's task from this span attribute or metadata key "
            "(cases without it: the model).",
            metavar="KEY",
            show_default=False,
            rich_help_panel=_CASES,
        ),
    ] = None,
    response_name: Annotated[
        str,
        typer.Option(
            "--response-name",
            help="The recorded-response name of the production answer (grade with --baseline recorded:NAME).",
            metavar="NAME",
            rich_help_panel=_CASES,
        ),
    ] = "production",
    keep_duplicates: Annotated[
        bool,
        typer.Option(
            "--keep-duplicates",
            help="Keep exact duplicate conversations (default: only the first is kept).",
            rich_help_panel=_CASES,
        ),
    ] = False,
    sample: Annotated[
        int | None,
        typer.Option(
            "--sample",
            min=1,
            help="Keep a seeded random sample of N cases (reservoir sampling: streams).",
            metavar="N",
            show_default=False,
            rich_help_panel=_SAMPLE,
        ),
    ] = None,
    stratify_by: Annotated[
        str | None,
        typer.Option(
            "--stratify-by",
            help="task, tag, or a metadata/attribute KEY: sample within these strata, "
            "proportionally to their sizes.",
            metavar="task|tag|KEY",
            show_default=False,
            rich_help_panel=_SAMPLE,
        ),
    ] = None,
    per_stratum: Annotated[
        bool,
        typer.Option(
            "--per-stratum",
            help="N cases from every stratum instead of N split proportionally.",
            rich_help_panel=_SAMPLE,
        ),
    ] = False,
    seed: Annotated[
        int,
        typer.Option(
            "--seed",
            help="The sample's seed (same seed, same traffic: same sample).",
            metavar="S",
            rich_help_panel=_SAMPLE,
        ),
    ] = 0,
    redact: Annotated[
        bool,
        typer.Option(
            "--redact",
            help="Mask e-mail addresses, phone and card numbers (Luhn-checked) and IPs with "
            "stable placeholders ([EMAIL_1], ...). Credentials are always masked.",
            rich_help_panel=_PRIVACY,
        ),
    ] = False,
    json_out: bool = JsonOption,
) -> None:
    """Turn production traffic into a suite whose cases hold what users got (responses.production).

    Errored calls and empty answers are dropped, exact duplicate conversations removed,
    unusable records skipped; each is counted, and the first few skips are named. Nothing
    is sent anywhere. Then: llm-connect grade SUITE --baseline recorded:production
    --candidate openai:MODEL.
    """
    from llm_connect.traffic import ImportOptions, import_traffic

    options = ImportOptions(
        format=file_format,
        task=task,
        task_from=task_from,
        sample=sample,
        stratify_by=stratify_by,
        per_stratum=per_stratum,
        seed=seed,
        keep_duplicates=keep_duplicates,
        redact=redact,
        strict=strict,
        join_window=join_window,
        response_name=response_name,
    )
    report = import_traffic(files, output, options, workers=workers)
    if json_out:
        typer.echo(json.dumps(report.to_dict()))
    else:
        _print(report)
    for warning in report.warnings:
        typer.echo(f"warning: {warning}", err=True)


def _print(report: object) -> None:
    from llm_connect.traffic import ImportReport

    assert isinstance(report, ImportReport)
    spans = f" in {report.spans} spans" if report.spans is not None else ""
    typer.echo(
        f"{report.output}: {report.written} cases written ({report.format}; {report.calls} calls{spans}, "
        f"{report.eligible} after filters)"
    )
    left = [f"{n} {why}" for why, n in report.dropped.items()]
    if report.duplicates:
        left.append(f"{report.duplicates} duplicate conversations")
    if left:
        typer.echo("left out: " + ", ".join(left))
    if report.skipped:
        typer.echo("skipped: " + ", ".join(f"{n} {why}" for why, n in report.skipped.items()))
        for example in report.examples:
            typer.echo(f"  {example}")
    for name, s in report.strata.items():
        typer.echo(f"stratum {name or '(all)'}: {s['taken']} of {s['population']}")
    for what, n in report.notes.items():
        typer.echo(f"note: {n} {what}")
    typer.echo(f"sources and counts: {report.meta}")
