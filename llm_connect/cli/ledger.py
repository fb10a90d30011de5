"""``llm-connect ledger summary|show|failures|export|sql``: read the ledger."""

from __future__ import annotations

import json
import re
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
    stdout_is_tty,
)
from llm_connect.cli._policy import Confidence, MinQuality, MinSamples, build_policy

__all__ = ["app"]

app = typer.Typer(
    cls=FastHelpGroup,
    help="Read the quality ledger: summaries, grades, failures, export, SQL.",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)

_TaskOpt: Any = typer.Option(
    None, "--task", "-t", help="Only this task (repeatable).", show_default=False, metavar="TASK"
)
_RunOpt: Any = typer.Option(
    None, "--run-id", help="Only this run (repeatable).", show_default=False, metavar="ID"
)
_GraderOpt: Any = typer.Option(
    None,
    "--judge",
    "--grader-id",
    "-j",
    help="Only this grader id (repeatable).",
    show_default=False,
    metavar="JUDGE",
)
_CandOpt: Any = typer.Option(
    None,
    "--candidate",
    "-c",
    help="Only this candidate model (repeatable).",
    show_default=False,
    metavar="SPEC",
)
_BaseOpt: Any = typer.Option(
    None,
    "--baseline",
    "-b",
    help="Only this baseline model (repeatable).",
    show_default=False,
    metavar="SPEC",
)


def _f(values: list[str] | None) -> list[str] | None:
    return list(values) if values else None


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=not stdout_is_tty())


def _print_rows(columns: list[str], rows: list[list[Any]], *, title: str | None = None) -> None:
    """A rich table on a terminal, tab-separated text otherwise."""
    if stdout_is_tty():
        from rich.table import Table

        table = Table(*columns, title=title, title_justify="left")
        for row in rows:
            table.add_row(*["" if v is None else str(v) for v in row])
        _console().print(table)
        return
    typer.echo("\t".join(columns))
    for row in rows:
        typer.echo("\t".join("" if v is None else str(v).replace("\t", " ").replace("\n", " ") for v in row))


def _num(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


@app.command("summary", cls=FastHelpCommand)
@handle_errors
def summary(
    task: list[str] | None = _TaskOpt,
    baseline: list[str] | None = _BaseOpt,
    candidate: list[str] | None = _CandOpt,
    grader_id: list[str] | None = _GraderOpt,
    confidence: Confidence = None,
    min_quality: MinQuality = None,
    min_samples: MinSamples = None,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Case-level evidence per task, baseline, candidate and grader: the router's own figures.

    Cases (grades), the mean of per-case means, its anytime-valid bounds (one-sided
    at (1 - confidence) / k for the k candidates of the task and baseline), the
    verdict against --min-quality, the paired difference to the baseline where a
    judge scores each response on its own, and mean costs and latencies.
    """
    from llm_connect.cli._common import open_ledger
    from llm_connect.routing import gather, threshold_phrase

    policy = build_policy(min_quality=min_quality, confidence=confidence, min_samples=min_samples)
    min_quality, confidence = policy.min_quality, policy.confidence
    ledger = open_ledger(db)
    rows = ledger.summary(
        task=_f(task), baseline_model=_f(baseline), candidate_model=_f(candidate), grader_id=_f(grader_id)
    )
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in rows:
        groups.setdefault((r.task, r.baseline_model), []).append(r)
    out: list[tuple[Any, Any]] = []
    for (t, base), members in groups.items():
        # k counts every candidate of the task and baseline in the ledger, as a router asked about all
        # of them would; --candidate narrows what is shown, not the correction.
        everyone = {g.candidate_model for g in ledger.grade_totals(task=t, baseline_model=base)}
        found = gather(
            ledger,
            t,
            baseline=base,
            candidates=sorted(everyone | {m.candidate_model for m in members}),
            grader_ids=list(dict.fromkeys(m.grader_id for m in members)),
            min_quality={m.grader_id: policy.threshold(m.grader_id) for m in members},
            confidence=policy.confidence,
            min_samples=policy.min_samples,
        )
        out += [(m, found[(m.candidate_model, m.grader_id)]) for m in members]
    if json_out:
        payload = [
            {
                "task": r.task,
                "baseline_model": r.baseline_model,
                "candidate_model": r.candidate_model,
                **ev.to_dict(),
                "verdict": ev.status,
                "confidence": confidence,
                "baseline_mean_cost_usd": r.baseline_mean_cost_usd,
                "candidate_mean_cost_usd": r.candidate_mean_cost_usd,
                "baseline_mean_latency_ms": r.baseline_mean_latency_ms,
                "candidate_mean_latency_ms": r.candidate_mean_latency_ms,
            }
            for r, ev in out
        ]
        typer.echo(json.dumps(payload, indent=2, default=str))
        return
    _print_rows(
        ["task", "baseline", "candidate", "grader", "cases", "grades", "mean", "low", "high", "verdict",
         "delta", "base $", "cand $", "base ms", "cand ms"],
        [
            [
                r.task,
                r.baseline_model,
                r.candidate_model,
                ev.grader_id,
                ev.n,
                ev.n_grades,
                _num(ev.mean),
                _num(ev.lower_bound),
                _num(ev.upper_bound),
                ev.status,
                "-" if ev.delta_mean is None else f"{ev.delta_mean:+.3f}",
                _num(r.baseline_mean_cost_usd, 6),
                _num(r.candidate_mean_cost_usd, 6),
                _num(r.baseline_mean_latency_ms, 0),
                _num(r.candidate_mean_latency_ms, 0),
            ]
            for r, ev in out
        ],
        title=f"quality evidence (anytime-valid bounds, {confidence:.0%} per decision, min_quality "
        f"{threshold_phrase({ev.grader_id: ev.min_quality or min_quality for _, ev in out}) or min_quality})",
    )  # fmt: skip


@app.command("show", cls=FastHelpCommand)
@handle_errors
def show(
    task: list[str] | None = _TaskOpt,
    run_id: list[str] | None = _RunOpt,
    baseline: list[str] | None = _BaseOpt,
    candidate: list[str] | None = _CandOpt,
    grader_id: list[str] | None = _GraderOpt,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="Show at most this many grades (newest).", metavar="N")
    ] = 50,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Stored grades, newest last (with --json: every stored field)."""
    from collections import deque

    from llm_connect.cli._common import open_ledger

    rows = deque(
        open_ledger(db).results(
            task=_f(task),
            run_id=_f(run_id),
            baseline_model=_f(baseline),
            candidate_model=_f(candidate),
            grader_id=_f(grader_id),
        ),
        maxlen=limit,
    )
    if json_out:
        typer.echo(json.dumps([r.to_dict() for r in rows], indent=2, default=str))
        return
    _print_rows(
        ["id", "run", "case", "task", "candidate", "grader", "quality", "notes"],
        [
            [
                r.id,
                r.run_id,
                r.case_id,
                r.task,
                r.candidate_model,
                r.grader_id,
                _num(r.quality_score),
                (r.notes or "")[:80],
            ]
            for r in rows
        ],
    )


@app.command("failures", cls=FastHelpCommand)
@handle_errors
def failures(
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Only this run.", show_default=False, metavar="ID")
    ] = None,
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Cases that could not be graded (after retries), per run."""
    from dataclasses import asdict

    from llm_connect.cli._common import open_ledger

    rows = open_ledger(db).failures(run_id)
    if json_out:
        typer.echo(json.dumps([asdict(r) for r in rows], indent=2, default=str))
        return
    if not rows:
        typer.echo(f"no failures{f' in run {run_id}' if run_id else ''}", err=True)
        return
    if stdout_is_tty():
        _print_rows(
            ["run", "case", "task", "stage", "adapter", "error", "message"],
            [[r.run_id, r.case_id, r.task, r.stage, r.adapter_id, r.error_type, r.message] for r in rows],
        )
        return
    # Piped: one header line per failure, then its whole message (every line, as the server sent it;
    # stored masked and bounded), so nothing that explains it is cut off.
    for r in rows:
        typer.echo(f"{r.run_id}\t{r.case_id}\t{r.task}\t{r.stage}\t{r.adapter_id or ''}\t{r.error_type}")
        for line in r.message.splitlines() or [""]:
            typer.echo(f"    {line}")


@app.command("export", cls=FastHelpCommand)
@handle_errors
def export(
    path: Annotated[
        Path | None, typer.Argument(help="Output file (or -o FILE).", metavar="PATH", show_default=False)
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Output file (as PATH).", metavar="FILE", show_default=False),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help="jsonl or csv (default: from the file's extension, else jsonl).",
            metavar="FORMAT",
            show_default=False,
        ),
    ] = None,
    task: list[str] | None = _TaskOpt,
    run_id: list[str] | None = _RunOpt,
    baseline: list[str] | None = _BaseOpt,
    candidate: list[str] | None = _CandOpt,
    grader_id: list[str] | None = _GraderOpt,
    db: str | None = DbOption,
) -> None:
    """Write matching grades to a JSON Lines or CSV file (PATH or -o FILE, as labels export)."""
    from llm_connect.cli._common import open_ledger

    if path is not None and output is not None and path != output:
        fail(f"give the output file once: {path} or -o {output}, not both")
    target = output or path
    if target is None:
        fail("give the output file: llm-connect ledger export FILE (or -o FILE)")
    fmt = fmt or ("csv" if target.suffix.lower() == ".csv" else "jsonl")
    if fmt not in ("jsonl", "csv"):
        fail(f"--format must be jsonl or csv, not {fmt!r}")
    n = open_ledger(db).export(
        target,
        fmt,
        task=_f(task),
        run_id=_f(run_id),
        baseline_model=_f(baseline),
        candidate_model=_f(candidate),
        grader_id=_f(grader_id),
    )
    typer.echo(f"wrote {n} grade(s) to {target}", err=True)


_ONE_STATEMENT = re.compile(r";\s*\S")


@app.command("sql", cls=FastHelpCommand)
@handle_errors
def sql(
    query: Annotated[str, typer.Argument(help="One read-only SQL statement (SELECT, WITH, EXPLAIN...).")],
    db: str | None = DbOption,
    json_out: bool = JsonOption,
) -> None:
    """Run a read-only SQL query on the ledger and print its rows.

    Tables: grades, runs, run_failures, response_cache, calibrations,
    routing_decisions; view: quality_summary. The query runs in a read-only
    transaction that is rolled back; writes fail.
    """
    from llm_connect.cli._common import open_ledger

    text = query.strip().rstrip(";").strip()
    if not text:
        fail("empty query")
    if _ONE_STATEMENT.search(text):
        fail("give exactly one SQL statement (no ';' between statements)")
    ledger = open_ledger(db)
    columns, rows = _read_only_query(ledger, text)
    if json_out:
        typer.echo(json.dumps([dict(zip(columns, r, strict=True)) for r in rows], indent=2, default=str))
        return
    _print_rows(columns, [list(r) for r in rows])


def _read_only_query(ledger: Any, text: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    from sqlalchemy.exc import SQLAlchemyError

    from llm_connect.errors import LedgerError

    engine = ledger.engine
    conn = engine.connect()
    try:
        with conn.begin() as tx:
            if engine.dialect.name == "sqlite":
                conn.exec_driver_sql("PRAGMA query_only = ON")
            else:
                conn.exec_driver_sql("SET TRANSACTION READ ONLY")
            try:
                result = conn.exec_driver_sql(text)
                columns = list(result.keys()) if result.returns_rows else []
                rows = [tuple(r) for r in result] if result.returns_rows else []
            except SQLAlchemyError as exc:
                orig = getattr(exc, "orig", exc)
                raise LedgerError(f"query failed: {str(orig).strip().splitlines()[0]}") from None
            finally:
                tx.rollback()
        return columns, rows
    finally:
        conn.invalidate()  # never hand a read-only connection back to the pool
        conn.close()
