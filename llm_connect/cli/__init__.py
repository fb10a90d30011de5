"""The ``llm-connect`` command line: one Typer app per command group.

Commands: ``grade`` (a suite or one prompt), ``route``, ``ledger
summary|show|failures|export|sql``, ``db upgrade|current`` and, when
installed, ``calibrate``. This package is the only place an exception becomes
an exit code, from one table for every command (``_exit.ExitCode``, printed by
every ``--help``): 0 ok, 1 a verdict against, 2 usage or input error, 3 work
incomplete (calls failed after retries), 4 unexpected error, 5 NOT SETTLED,
6 stability RISKY, 130 interrupted, 141 standard output closed.

Module level imports stay light (typer only) so ``llm-connect --help`` is
fast; every command's module is imported only when that command runs (or
prints its own help), and imports what it needs when it runs.
"""

from __future__ import annotations

from typing import Any

import typer

from llm_connect._version import __version__
from llm_connect.cli._common import FastHelpCommand, FastHelpGroup, set_debug

__all__ = ["app", "main"]

_LAZY_GROUPS = {
    # name -> (module holding a Typer ``app``, short help shown before it is imported); every
    # command is here, so running one imports (and builds the options of) that one alone
    "grade": (
        "llm_connect.cli.grade",
        "Grade candidates against a baseline on a suite; store every grade; route.",
    ),
    "route": ("llm_connect.cli.route", "Decide which model serves a task, from the grades in the ledger."),
    "ledger": (
        "llm_connect.cli.ledger",
        "Read the quality ledger: summaries, grades, failures, export, SQL.",
    ),
    "db": ("llm_connect.cli.db", "Ledger database schema: migrate it, show its revision."),
    "calibrate": (
        "llm_connect.cli.calibrate",
        "Calibrate an LLM judge against reference judges before routing trusts it.",
    ),
    "stability": ("llm_connect.cli.stability", "Send one request N times; the Ruvrics stability verdict."),
    # "module:attribute" when a module holds more than one command's app
    "report": (
        "llm_connect.cli.report",
        "Write one self-contained HTML report of the evidence and the cases.",
    ),
    "view": ("llm_connect.cli.report:view_app", "Serve the report of the ledger on 127.0.0.1, read-only."),
    "run": ("llm_connect.cli.run", "Shared (fleet) runs: cases done, claimed and left, workers, rate."),
    "labels": ("llm_connect.cli.labels", "Human labels: import, export, agreement between annotators."),
    "judges": ("llm_connect.cli.judges", "Judges as instruments: anchor sets, drift checks, identities."),
    "suite": (
        "llm_connect.cli.suite",
        "Suites from production traffic: import traces and request logs as cases.",
    ),
    "watch": (
        "llm_connect.cli.watch",
        "Follow trace or log files; grade a sampled share of new calls in shadow; route.",
    ),
}


class _LazyGroup(FastHelpGroup):
    """The root group: commands and command groups in ``_LAZY_GROUPS`` are imported only when run.

    ``--help`` lists them from a stub, so heavy modules behind them never load
    for help or ``--version``, and one command never builds another's options.
    """

    def _available(self) -> list[str]:
        import importlib.util

        found = []
        for name, (module, _) in _LAZY_GROUPS.items():
            if name not in self.commands and importlib.util.find_spec(module.partition(":")[0]) is not None:
                found.append(name)
        return found

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *self._available()]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None and cmd_name in self._available():
            summary = _LAZY_GROUPS[cmd_name][1]
            return FastHelpCommand(name=cmd_name, help=summary, short_help=summary)  # a stub for listings
        return cmd

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in _LAZY_GROUPS and args[0] not in self.commands and args[0] in self._available():
            return args[0], _load_group(args[0]), args[1:]
        if args and self.suggest_commands and not ctx.resilient_parsing and not args[0].startswith("-"):
            # Typer suggests from the commands it holds, none of which are the lazy ones
            from difflib import get_close_matches

            if matches := get_close_matches(args[0], self.list_commands(ctx)):
                ctx.fail(f"No such command {args[0]!r}. Did you mean {', '.join(map(repr, matches))}?")
        return super().resolve_command(ctx, args)


def _load_group(name: str) -> Any:
    import importlib

    module_name, _, attribute = _LAZY_GROUPS[name][0].partition(":")
    sub: Any = getattr(importlib.import_module(module_name), attribute or "app")
    command = typer.main.get_command(sub)
    command.name = name
    return command


app = typer.Typer(
    cls=_LazyGroup,
    name="llm-connect",
    help="Grade a candidate LLM against a baseline, keep the grades in SQL, route on them.",
    no_args_is_help=True,
    rich_markup_mode=None,
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
        False, "--debug", help="Show tracebacks for errors (also LLM_CONNECT_DEBUG=1)."
    ),
) -> None:
    """llm-connect: is the candidate model as good as the baseline on our prompts?"""
    set_debug(debug)


def main() -> None:
    """Console-script entry point (``llm-connect``, ``python -m llm_connect``)."""
    import sys

    from llm_connect.cli._common import report_exception
    from llm_connect.cli._exit import ExitCode

    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except Exception as exc:  # anything that escaped a command's own handling
        sys.exit(report_exception(exc))
