"""``llm-connect report`` (one self-contained HTML file) and ``llm-connect view`` (a local viewer).

Both read the ledger only: the ledger is opened without migrating it, and
nothing is written to it, except the human labels ``view``'s Label page stores
(``record_labels``; none with ``view --no-label``). An unknown run id or an
empty selection is exit 2 and writes no file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from llm_connect.cli._common import DbOption, DbPatienceOption, FastHelpCommand, fail, handle_errors, ride_out
from llm_connect.cli._policy import (
    AllowUncalibrated,
    Confidence,
    MinQuality,
    MinSamples,
    MinStability,
    Prefer,
    RouteOn,
    Target,
    build_policy,
)

__all__ = ["app", "view_app"]

app = typer.Typer(rich_markup_mode=None, add_completion=False)
view_app = typer.Typer(rich_markup_mode=None, add_completion=False)


def _open(db: str | None) -> Any:
    from llm_connect.cli._common import open_ledger

    return open_ledger(db, auto_migrate=False)


@app.command("report", cls=FastHelpCommand)
@handle_errors
def report(
    output: Annotated[
        Path, typer.Option("--output", "-o", metavar="FILE", help="The HTML file to write.")
    ] = Path("report.html"),
    run: Annotated[
        list[str] | None,
        typer.Option(
            "--run", "--run-id", metavar="RUN_ID", show_default=False, help="Only this run (repeatable)."
        ),
    ] = None,
    task: Annotated[
        list[str] | None,
        typer.Option("--task", "-t", metavar="TASK", show_default=False, help="Only this task (repeatable)."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", metavar="ISO", show_default=False, help="Only grades from this time on (UTC)."
        ),
    ] = None,
    min_quality: MinQuality = None,
    min_samples: MinSamples = None,
    confidence: Confidence = None,
    allow_uncalibrated: AllowUncalibrated = None,
    min_stability: MinStability = None,
    prefer: Prefer = None,
    max_cases: Annotated[
        int | None,
        typer.Option(
            "--max-cases",
            min=1,
            metavar="N",
            show_default=False,
            help="Grades embedded in the case browser at most (default 5000; above: worst and best per "
            "task, candidate and judge).",
        ),
    ] = None,
    route_on: RouteOn = None,
    target: Target = None,
    db: str | None = DbOption,
) -> None:
    """Write one self-contained HTML report (inline CSS, JS and SVG; opens offline).

    It shows the routing decision per task with its reason, every candidate x
    judge figure (cases, mean and bounds, paired difference, cost and latency
    against the baseline, verdict), a cost-quality chart per task, score
    distributions, calibrations and stability analyses when stored, and a case
    browser with both answers side by side and a word diff.
    """
    from llm_connect.report import write_report

    policy = build_policy(
        min_quality=min_quality, confidence=confidence, min_samples=min_samples, target=target,
        route_on=route_on, allow_uncalibrated=allow_uncalibrated, min_stability=min_stability, prefer=prefer,
    )  # fmt: skip
    if output.is_dir():
        fail(f"-o {output} is a directory; name the HTML file to write")
    info = write_report(
        _open(db),
        output,
        run_ids=list(run or []),
        tasks=list(task or []),
        since=since,
        policy=policy,
        max_cases=max_cases,
    )
    typer.echo(str(info.path))
    held = f"{info.cases_embedded} of {info.grades} grades in the case browser" + (
        " (truncated: worst and best per task, candidate and judge)" if info.truncated else ""
    )
    typer.echo(f"{info.bytes / 1e6:.2f} MB; {len(info.tasks)} task(s); {held}", err=True)
    for decision in info.decisions:
        verb = f"route to {decision.model}" if decision.routed else _keep(decision.baseline)
        typer.echo(f"  {decision.task}: {verb}", err=True)


def _keep(baseline: str) -> str:
    """``keep the baseline M``; one "baseline" when the baseline model is named so."""
    return "keep the baseline" if baseline == "baseline" else f"keep the baseline {baseline}"


@view_app.command("view", cls=FastHelpCommand)
@handle_errors
def view(
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, metavar="PORT", help="0: any free port.")
    ] = 8765,
    host: Annotated[str, typer.Option("--host", metavar="HOST", help="Address to listen on.")] = "127.0.0.1",
    min_quality: MinQuality = None,
    min_samples: MinSamples = None,
    confidence: Confidence = None,
    allow_uncalibrated: AllowUncalibrated = None,
    min_stability: MinStability = None,
    prefer: Prefer = None,
    route_on: RouteOn = None,
    target: Target = None,
    no_label: Annotated[
        bool,
        typer.Option(
            "--no-label",
            help="Serve the report read-only: no labelling page and no write route at all.",
        ),
    ] = False,
    db: str | None = DbOption,
    db_patience: float = DbPatienceOption,
) -> None:
    """Serve the report of the whole ledger on 127.0.0.1, paging cases from SQL, with a labelling page.

    The report answers GET and HEAD only; the server's one write is a human label (POST
    /api/label, with the token of the Label page's URL). The Label page shows two answers blind,
    keys 1 / 2 / 3 store a human label in the ledger; it is opened with the URL printed (it holds
    a per-start token every write needs) and listens on 127.0.0.1 only. --no-label serves the
    report alone, read-only: it never writes. Stop with Ctrl-C.

    A database restart holds a request (a read or a label) until the database is back (up to
    --db-patience, said on stderr); a fault past it (the database away too long, a full disk, a
    read-only ledger) answers 503 naming the cause, and the Label page keeps the case to label
    again.
    """
    import threading

    from llm_connect.report import require_plot, serve

    require_plot("view")

    policy = build_policy(
        min_quality=min_quality, confidence=confidence, min_samples=min_samples, target=target,
        route_on=route_on, allow_uncalibrated=allow_uncalibrated, min_stability=min_stability, prefer=prefer,
    )  # fmt: skip
    if host not in ("127.0.0.1", "localhost", "::1"):
        if not no_label:
            fail(f"the labelling page listens on 127.0.0.1 only, not on {host}: add --no-label")
        typer.echo(f"warning: listening on {host}, not only on this machine", err=True)
    ledger = _open(db)
    ride_out(ledger, db_patience)
    server = serve(
        ledger,
        host=host,
        port=port,
        policy=policy,
        quiet=True,
        warm=True,
        label=not no_label,
    )
    if server.label_url is None:
        typer.echo(f"serving {server.url} (read-only; Ctrl-C to stop)")
    else:
        typer.echo(f"serving {server.url} (Ctrl-C to stop)")
        typer.echo(f"label cases at {server.label_url}")
    try:
        threading.Event().wait()
    finally:
        server.shutdown()
