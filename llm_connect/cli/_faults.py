"""What ``grade`` says when the ledger's database failed under it, or went away for a while.

A pause ridden out (a restart shorter than ``--db-patience``) is one line on stderr and
``db_unreachable_s`` in ``--json``. A fault that stops the run (the database away past the
patience, a full disk, a read-only ledger, a permission lost) exits 3 (``ExitCode.INCOMPLETE``:
the work is incomplete, nothing of the user's command was wrong) with the cause in plain words,
where the answers received but not recorded were kept, and the command that goes on.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

import typer

from llm_connect.cli._common import echo_err
from llm_connect.cli._exit import ExitCode
from llm_connect.ledger import when_writable

__all__ = ["pause_json", "pause_line", "stop_on_fault"]


def pause_json(ledger: Any) -> dict[str, Any]:
    """``--json``'s fields: seconds the database was unreachable and pauses ridden out."""
    patience = ledger.patience
    return {"db_unreachable_s": round(patience.unreachable_s, 1), "db_pauses": len(patience.outages)}


def pause_line(ledger: Any) -> str | None:
    """The stderr line for pauses ridden out (``None`` when the database never went away)."""
    patience = ledger.patience
    if not patience.outages:
        return None
    n = len(patience.outages)
    pauses = "" if n == 1 else f" in {n} pauses"
    return (
        f"note: the database at {ledger.url} was unreachable for {patience.unreachable_s:.1f} s{pauses}; "
        "the run waited and went on"
    )


def _continue(opts: Any, run_id: str, started: bool) -> str:
    """The command that goes on with the run (a shared run: every worker's own command again)."""
    from llm_connect.cli._settings import resume_hint

    if opts.shared:
        return (
            f"start the workers again with the same command (--shared --run-id {run_id}): they re-join "
            "the run, record what this host's journal kept, and grade what is left"
        )
    if not started:
        return "nothing of the run was recorded: run the same command again"
    return resume_hint(opts, run_id)


def stop_on_fault(opts: Any, stopped: Any, *, json_out: bool) -> NoReturn:
    """Say why the run stopped (``stopped``: a ``RunFault``), what was kept and how to go on;
    exit 3."""
    fault = stopped.fault
    then = when_writable(fault.cause)
    how = _continue(opts, stopped.run_id, stopped.started)
    kept: str | None = None
    if fault.journaled and fault.journal:
        kept = (
            f"the answers of {fault.journaled} finished case(s) that could not be recorded are kept in "
            f"{fault.journal}; going on records them first, without asking the models again"
        )
    elif fault.journal:
        kept = f"answers kept earlier are still in {fault.journal}; going on records them first"
    if fault.journal_error:
        kept = (kept + "; " if kept else "") + (
            f"the answers of some finished cases could not be kept either ({fault.journal_error}): "
            "those cases will be asked again"
        )
    if json_out:
        payload = {
            "run_id": stopped.run_id,
            "error": str(fault),
            "cause": fault.cause,
            "journal": fault.journal,
            "journaled": fault.journaled,
            "journal_error": fault.journal_error,
            "resume": how,
            "exit_code": int(ExitCode.INCOMPLETE),
        }
        typer.echo(json.dumps(payload, indent=2))
    echo_err(f"error: the run stopped: {fault}")
    if kept is not None:
        echo_err(f"kept: {kept}")
    echo_err(f"{then}, continue it with: {how}" if not opts.shared else f"{then}, {how}")
    raise typer.Exit(ExitCode.INCOMPLETE)
