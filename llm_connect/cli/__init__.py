"""The ``llm-connect`` command line: one Typer app per command group.

This is the only place an exception becomes an exit code:
0 ok, 1 quality gate failed, 2 usage or input error, 3 some cases failed.
"""

from __future__ import annotations

import typer

from llm_connect._version import __version__

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
) -> None:
    """llm-connect: is the candidate model as good as the baseline on our prompts?"""


def main() -> None:
    """Console-script entry point."""
    app()
