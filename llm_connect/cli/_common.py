"""Shared CLI plumbing: exceptions to exit codes (``_exit.ExitCode``), errors, options, lazy consoles.

Kept free of heavy imports: ``llm-connect --help`` loads this module.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup
from typer.exceptions import TyperException

from llm_connect.cli._exit import ExitCode, help_rows, returns_line

__all__ = [
    "ApiKeyOption",
    "BaseUrlOption",
    "DbOption",
    "FastHelpCommand",
    "FastHelpGroup",
    "JsonOption",
    "MaxTokensOption",
    "SeedOption",
    "TemperatureOption",
    "TimeoutOption",
    "debug_enabled",
    "fail",
    "format_exit_codes",
    "handle_errors",
    "set_debug",
]

_debug = False


def _fast_help(option: Any) -> Any:
    # Typer's help flag defaults to None, and a non-bool value makes Typer build a
    # Pydantic type adapter for it (~0.3 s of imports) on every invocation that
    # does not pass --help to that command. A False default skips that.
    if option is not None and option.default is None:
        option.default = False
    return option


def _command_path(ctx: Any) -> str:
    """The command's path under ``llm-connect`` (``"ledger show"``), the root's name left out."""
    names = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names))


def format_exit_codes(ctx: Any, formatter: Any) -> None:
    """The exit-code table (``_exit.ExitCode``, one for every command) as a help section, then
    the codes this command returns (for a command in ``_exit.COMMAND_CODES``)."""
    with formatter.section("Exit codes (the same for every llm-connect command)"):
        formatter.write_dl(help_rows())
        line = returns_line(_command_path(ctx))
        if line is not None:
            formatter.write_paragraph()
            formatter.write_text(line)


class FastHelpCommand(TyperCommand):
    """A Typer command whose ``--help`` flag never triggers Pydantic imports, whose plain
    (not rich) help lists options under their ``rich_help_panel`` headings, in order of first use,
    and ends with the exit-code table."""

    def get_help_option(self, ctx: Any) -> Any:
        return _fast_help(super().get_help_option(ctx))

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        super().format_epilog(ctx, formatter)
        format_exit_codes(ctx, formatter)

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args: list[tuple[str, str]] = []
        panels: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                args.append(record)
            else:
                panels.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        for title, records in panels.items():
            with formatter.section(title):
                formatter.write_dl(records)


class FastHelpGroup(TyperGroup):
    """A Typer group whose ``--help`` flag never triggers Pydantic imports, and whose help ends
    with the exit-code table its commands share."""

    def get_help_option(self, ctx: Any) -> Any:
        return _fast_help(super().get_help_option(ctx))

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        super().format_epilog(ctx, formatter)
        format_exit_codes(ctx, formatter)


F = TypeVar("F", bound=Callable[..., Any])

DbOption: Any = typer.Option(
    None,
    "--db",
    envvar="LLM_CONNECT_DATABASE_URL",
    help="Ledger database URL (default: sqlite:///llm_connect.db).",
    show_envvar=True,
    metavar="URL",
    rich_help_panel="Runs and the ledger",
)
DbPatienceOption: Any = typer.Option(
    60.0,
    "--db-patience",
    min=0.0,
    help="Seconds to wait for a database that went away (a restart) before the command stops with "
    "exit 3, every finished grade kept (grade: with a resume command); 0: do not wait. Default: "
    "$LLM_CONNECT_DB_PATIENCE, else 60.",
    metavar="SECONDS",
    envvar="LLM_CONNECT_DB_PATIENCE",
    show_default=False,
    rich_help_panel="Runs and the ledger",
)
JsonOption: Any = typer.Option(
    False, "--json", help="Print machine-readable JSON on stdout.", rich_help_panel="Output"
)

# The model-call options every command that calls a model takes, spelled once.
BaseUrlOption: Any = typer.Option(
    None, "--base-url", help="OpenAI-compatible server URL (default: $OPENAI_BASE_URL).", show_default=False,
    metavar="URL", rich_help_panel="Model calls",
)  # fmt: skip
ApiKeyOption: Any = typer.Option(
    None, "--api-key", help="API key (default: $OPENAI_API_KEY). Never printed or stored.",
    show_default=False, metavar="KEY", rich_help_panel="Model calls",
)  # fmt: skip
TemperatureOption: Any = typer.Option(
    None, "--temperature", min=0.0, show_default=False, metavar="T",
    help="Sampling temperature sent with every model call (default: the provider's).",
    rich_help_panel="Model calls",
)  # fmt: skip
MaxTokensOption: Any = typer.Option(
    None, "--max-tokens", min=1, show_default=False, metavar="N",
    help="Most tokens one answer may generate (default: the provider's).", rich_help_panel="Model calls",
)  # fmt: skip
SeedOption: Any = typer.Option(
    None, "--seed", help="Sent as model_params.seed (servers that support it answer more repeatably).",
    show_default=False, metavar="N", rich_help_panel="Model calls",
)  # fmt: skip
ConcurrencyOption: Any = typer.Option(
    8, "--concurrency", min=1, max=1024, help="Model calls in flight.", metavar="N",
    rich_help_panel="Model calls",
)  # fmt: skip
NoCacheOption: Any = typer.Option(
    False, "--no-cache", help="Neither read nor fill the response and embedding caches.",
    rich_help_panel="Model calls",
)  # fmt: skip
MaxRetriesOption: Any = typer.Option(
    4, "--max-retries", min=0, help="Retries of a failed call (429, timeouts, connection errors, 5xx).",
    metavar="N", rich_help_panel="Model calls",
)  # fmt: skip
TimeoutOption: Any = typer.Option(
    None, "--timeout", min=0.001, help="Per-call timeout in seconds.", show_default=False, metavar="SECONDS",
    rich_help_panel="Model calls",
)  # fmt: skip


def set_debug(value: bool) -> None:
    """Show tracebacks for errors (``--debug`` or ``LLM_CONNECT_DEBUG=1``)."""
    global _debug
    _debug = value


def debug_enabled() -> bool:
    """Whether ``--debug`` or ``LLM_CONNECT_DEBUG=1`` asked for tracebacks."""
    return _debug or os.environ.get("LLM_CONNECT_DEBUG", "").strip().lower() in ("1", "true", "yes")


def echo_err(message: str) -> None:
    """One line on stderr, credentials masked (:func:`llm_connect._secrets.mask_secrets`)."""
    from llm_connect._secrets import mask_secrets

    typer.echo(mask_secrets(message), err=True)


def ride_out(ledger: Any, patience_s: float) -> None:
    """Wait up to ``patience_s`` for a database that goes away (``--db-patience``), and say so on
    stderr as it happens (``note: the database at ... is unreachable ...``)."""
    ledger.patience.seconds = patience_s
    ledger.patience.on_pause = lambda line: echo_err(f"note: {line}")


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``."""
    echo_err(f"error: {message}")
    raise typer.Exit(code)


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code an exception maps to, for every command (the CLI's only such mapping)."""
    from llm_connect import errors

    if isinstance(exc, errors.LedgerFaultError):  # the database failed under the work: not the user's doing
        return ExitCode.INCOMPLETE
    usage = (errors.ConfigurationError, errors.SuiteError, errors.LedgerError, errors.CalibrationError)
    if isinstance(exc, (*usage, errors.StabilityInputError)):  # a malformed input or tools file too
        return ExitCode.USAGE
    failed_calls = (errors.AdapterError, errors.JudgeError, errors.BudgetExceededError)
    if isinstance(exc, (*failed_calls, errors.InsufficientRunsError, errors.StabilityEmbeddingError)):
        return ExitCode.INCOMPLETE
    return ExitCode.INTERNAL


def report_exception(exc: BaseException) -> ExitCode:
    """Print a one-line message for ``exc`` (a traceback in debug mode); return its exit code.

    Whatever is printed has its credentials masked: our errors mask their own
    messages, and a third-party exception's text or traceback is masked here.
    """
    from llm_connect._secrets import mask_secrets
    from llm_connect.errors import LLMConnectError

    code = exit_code_for(exc)
    if debug_enabled():
        import traceback

        sys.stderr.write(mask_secrets("".join(traceback.format_exception(exc))))
    if isinstance(exc, LLMConnectError):
        echo_err(f"error: {exc}")
    else:
        first = (str(exc).strip().splitlines() or [""])[0]
        hint = "" if debug_enabled() else " (run with --debug for the traceback)"
        echo_err(f"error: unexpected {type(exc).__name__}: {first}{hint}")
    return code


def handle_errors(fn: F) -> F:
    """Turn exceptions raised by a command into a one-line message and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        opened = len(_OPENED)
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            echo_err("interrupted")
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        except BrokenPipeError:
            _quiet_stdout()
            raise typer.Exit(ExitCode.BROKEN_PIPE) from None
        except TyperException:  # usage errors keep Typer's own message and exit code 2 (ExitCode.USAGE)
            raise
        except Exception as exc:
            raise typer.Exit(report_exception(exc)) from None
        finally:
            # The ledgers the command opened: their pooled connections are released when it ends
            # (the process may go on: a test's CliRunner, a program calling the app).
            while len(_OPENED) > opened:
                _OPENED.pop().close()

    return wrapper  # type: ignore[return-value]


def _quiet_stdout() -> None:
    """Point standard output at the null device, so that Python's last flush at exit does not
    fail on the closed pipe again (the Python docs' recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a test's runner)
        pass


def stdout_is_tty() -> bool:
    """Whether stdout is an interactive terminal (tables and progress bars only then)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def open_ledger(db: str | None, *, auto_migrate: bool = True) -> Any:
    """Open the ledger at ``db`` (LedgerError -> exit 2 through :func:`handle_errors`).

    A ``db`` that is ``$LLM_CONNECT_DATABASE_URL`` (``--db``'s environment variable) is left for
    the ledger to read, so that an error about it names the variable.
    """
    from llm_connect.ledger import ENV_VAR, QualityLedger

    ledger = QualityLedger(None if db and db == os.environ.get(ENV_VAR) else db, auto_migrate=auto_migrate)
    _OPENED.append(ledger)
    return ledger


_OPENED: list[Any] = []
"""Ledgers :func:`open_ledger` opened during the command running (closed by :func:`handle_errors`)."""
