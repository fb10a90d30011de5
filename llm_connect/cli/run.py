"""``llm-connect run status RUN_ID``: where a shared (fleet) run stands.

Cases done, failed, claimed (and leases past their time), pending; the workers
with their hosts, pids, last heartbeats, calls and failures; the fleet's calls,
failures and rate. ``--watch`` refreshes until Ctrl-C (in place on a terminal,
reprinted every interval otherwise). Shared runs live in PostgreSQL only.
"""

from __future__ import annotations

import json
import time
from typing import Any

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
from llm_connect.cli._exit import ExitCode

__all__ = ["app", "render_status"]

app = typer.Typer(
    cls=FastHelpGroup,
    help="Shared (fleet) runs: where a run stands, its cases and workers.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.callback()
def _group() -> None:
    """Shared (fleet) runs: where a run stands, its cases and workers."""


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f}s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def render_status(status: Any) -> list[str]:
    """The lines ``run status`` prints for a :class:`~llm_connect.ledger.FleetStatus`."""
    s = status
    expired = f" ({s.expired} lease{'s' if s.expired != 1 else ''} expired)" if s.expired else ""
    lines = [
        f"run {s.run_id}: {s.done + s.failed} of {s.total} cases finished, {s.left} left",
        f"  cases: {s.done} done, {s.failed} failed, {s.claimed} claimed{expired}, {s.pending} pending",
        f"  workers: {s.workers_alive} alive of {len(s.workers)}",
    ]
    if s.workers:
        rows = []
        for w in s.workers:
            state = "stopped" if w.stopped_at is not None else ("alive" if w.alive else "silent")
            beat = _ago((s.as_of - w.heartbeat_at).total_seconds())
            rows.append(
                (
                    w.worker_id,
                    w.host,
                    f"pid {w.pid}",
                    state,
                    f"heartbeat {beat}",
                    f"calls {w.calls}",
                    f"failures {w.failures}",
                    f"cases {w.cases_done}",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += [
            "    " + "  ".join(v.ljust(n) for v, n in zip(r, widths, strict=True)).rstrip() for r in rows
        ]
    lines.append(f"  calls: {s.calls}, failures: {s.failures}, rate: {s.rate_per_min:.1f} cases/min")
    return lines


def _text(status: Any, json_out: bool) -> str:
    if json_out:
        return json.dumps(status.to_dict())
    return "\n".join(render_status(status))


@app.command("status", cls=FastHelpCommand)
@handle_errors
def status(
    run_id: str = typer.Argument(..., metavar="RUN_ID", help="The shared run (grade --shared --run-id)."),
    db: str | None = DbOption,
    json_out: bool = JsonOption,
    watch: bool = typer.Option(False, "--watch", help="Refresh until Ctrl-C."),
    interval: float = typer.Option(
        2.0, "--interval", min=0.1, metavar="S", help="Seconds between refreshes."
    ),
) -> None:
    """Cases done/claimed/left, workers alive, calls, failures and the rate of a shared run."""
    from llm_connect.cli._common import open_ledger
    from llm_connect.ledger import display_url, resolve_url

    url = resolve_url(db)
    if url.get_backend_name() != "postgresql":
        fail(
            f"{display_url(url)} is not PostgreSQL: shared runs need PostgreSQL (SQLite allows one writer "
            "at a time and has no row locks), so there is no shared run here; pass --db postgresql+psycopg://..."
        )
    with open_ledger(db) as ledger:
        first = ledger.run_status(run_id)  # an unknown run: LedgerError naming it, exit 2
        if not watch:
            typer.echo(_text(first, json_out))
            return
        try:
            if stdout_is_tty() and not json_out:
                _watch_live(ledger, run_id, first, interval)
            else:
                current = first
                while True:
                    typer.echo(_text(current, json_out) + ("" if json_out else "\n"))
                    time.sleep(interval)
                    current = ledger.run_status(run_id)
        except KeyboardInterrupt:
            raise typer.Exit(ExitCode.OK) from None  # --watch ends on Ctrl-C: not an interruption


def _watch_live(ledger: Any, run_id: str, first: Any, interval: float) -> None:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    def view(current: Any) -> Text:
        stamp = current.as_of.strftime("%H:%M:%S UTC")
        return Text("\n".join([*render_status(current), f"  (as of {stamp}; Ctrl-C to stop)"]))

    with Live(view(first), console=Console(highlight=False), auto_refresh=False) as live:
        while True:
            time.sleep(interval)
            live.update(view(ledger.run_status(run_id)), refresh=True)
