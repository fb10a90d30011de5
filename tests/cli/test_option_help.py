"""Every option of every command says what it does; ``grade --help`` groups its options."""

from __future__ import annotations

from typing import Any

import typer

from llm_connect.cli import _LAZY_GROUPS, _load_group, app
from tests.cli._util import invoke


def _commands() -> list[tuple[str, Any]]:
    root = typer.main.get_command(app)
    context_type = type(root.make_context("llm-connect", [], resilient_parsing=True))
    found: list[tuple[str, Any]] = []

    def walk(command: Any, path: str, ctx: Any) -> None:
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                # the root lists lazily loaded commands and groups from stubs: load the real ones
                sub = (
                    _load_group(name)
                    if ctx.parent is None and name in _LAZY_GROUPS
                    else command.get_command(ctx, name)
                )
                walk(sub, f"{path} {name}", context_type(sub, parent=ctx))
        else:
            found.append((path, command))

    walk(root, "llm-connect", context_type(root))
    return found


def test_every_option_of_every_command_has_help_text() -> None:
    commands = _commands()
    assert len(commands) > 10  # the lazily loaded groups are walked too
    missing = [
        f"{path} {param.opts[0]}"
        for path, command in commands
        for param in command.params
        if param.param_type_name == "option" and not param.help
    ]
    assert missing == []


def test_grade_help_groups_its_options_in_panels() -> None:
    text = invoke("grade", "--help", env={"COLUMNS": "200"}).stdout
    for panel in ("Suite and models", "Judges and the gate", "Model calls", "Runs and the ledger", "Output"):
        assert panel in text
    assert "--max-tokens" in text and "Most tokens one answer may generate" in text


def test_grade_help_lists_every_built_in_judge() -> None:
    from llm_connect.grading.judges import BUILTIN_JUDGES

    text = " ".join(invoke("grade", "--help", env={"COLUMNS": "200"}).stdout.split())
    assert (
        f"Judge spec NAME[:ARG][,k=v...] (repeatable): {', '.join(BUILTIN_JUDGES)}, or an installed" in text
    )
    assert "pairwise" in BUILTIN_JUDGES and ", pairwise," in text
