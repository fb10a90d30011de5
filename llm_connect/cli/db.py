"""``llm-connect db upgrade|current``: the ledger's schema (Alembic migrations)."""

from __future__ import annotations

import json

import typer

from llm_connect.cli._common import DbOption, FastHelpCommand, FastHelpGroup, JsonOption, handle_errors

__all__ = ["app"]

app = typer.Typer(
    cls=FastHelpGroup,
    help="Ledger database schema: migrate it, show its revision.",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)


def _display(db: str | None) -> str:
    from llm_connect.ledger import display_url, resolve_url

    return display_url(resolve_url(db))


@app.command("upgrade", cls=FastHelpCommand)
@handle_errors
def upgrade(db: str | None = DbOption, json_out: bool = JsonOption) -> None:
    """Migrate the ledger database to the newest schema (safe to repeat)."""
    from llm_connect.ledger import current_revision
    from llm_connect.ledger import upgrade as do_upgrade

    before = current_revision(db)
    after = do_upgrade(db)
    if json_out:
        typer.echo(json.dumps({"url": _display(db), "from": before, "to": after}))
    elif before == after:
        typer.echo(f"{_display(db)} is up to date (revision {after})")
    else:
        typer.echo(f"upgraded {_display(db)} from {before or 'an empty database'} to revision {after}")


@app.command("current", cls=FastHelpCommand)
@handle_errors
def current(db: str | None = DbOption, json_out: bool = JsonOption) -> None:
    """Show the ledger's schema revision and whether it is the newest."""
    from llm_connect.ledger import current_revision, head_revision

    rev = current_revision(db)
    head = head_revision()
    state = (
        "up to date" if rev == head else ("not migrated" if rev is None else "needs `llm-connect db upgrade`")
    )
    if json_out:
        typer.echo(json.dumps({"url": _display(db), "current": rev, "head": head, "up_to_date": rev == head}))
    else:
        typer.echo(f"{_display(db)}: revision {rev or '-'} (head {head}) {state}")
