"""The ``llm-connect`` command line: one Typer app per command group.

Commands: ``grade`` (a suite or one prompt), ``route``, ``ledger
summary|show|failures|export|sql``, ``db upgrade|current`` and, when
installed, ``calibrate``. This package is the only place an exception becomes
an exit code: 0 ok, 1 quality gate failed, 2 usage or input error, 3 some
cases failed after retries, 4 unexpected error, 130 interrupted.

Module level imports stay light (typer only) so ``llm-connect --help`` is
fast; every command imports what it needs when it runs.
"""

from __future__ import annotations

import typer

from llm_connect._version import __version__
from llm_connect.cli._common import set_debug
from llm_connect.cli.db import app as db_app
from llm_connect.cli.grade import grade
from llm_connect.cli.ledger import app as ledger_app
from llm_connect.cli.route import route

__all__ = ["app", "main"]

app = typer.Typer(
    name="llm-connect",
    help="Grade a candidate LLM against a baseline, keep the grades in SQL, route on them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"llm-connect {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version and exit."
    ),
    debug: bool = typer.Option(
        False, "--debug", envvar="LLM_CONNECT_DEBUG", help="Show tracebacks for errors."
    ),
) -> None:
    """llm-connect: is the candidate model as good as the baseline on our prompts?"""
    set_debug(debug)


app.command("grade", no_args_is_help=False)(grade)
app.command("route")(route)
app.add_typer(ledger_app, name="ledger")
app.add_typer(db_app, name="db")


def _mount_calibrate() -> None:
    """``llm-connect calibrate ...`` when the calibration module is present."""
    import importlib.util

    if importlib.util.find_spec("llm_connect.cli.calibrate") is None:
        return
    try:
        from llm_connect.cli.calibrate import app as calibrate_app
    except ImportError:  # calibration's optional dependencies missing
        return
    app.add_typer(calibrate_app, name="calibrate")


_mount_calibrate()


def main() -> None:
    """Console-script entry point (``llm-connect``, ``python -m llm_connect``)."""
    import sys

    from llm_connect.cli._common import report_exception

    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # anything that escaped a command's own handling
        sys.exit(report_exception(exc))
