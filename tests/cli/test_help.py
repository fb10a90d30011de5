"""``--help`` and ``--version`` are cheap: they never import torch, sentence-transformers or openai."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from llm_connect import __version__
from tests.cli._util import invoke

HEAVY = ("torch", "sentence_transformers", "openai", "scipy", "sqlalchemy", "pydantic", "rich")


def imported_modules(*args: str) -> tuple[int, set[str], str]:
    """Run ``python -X importtime -m llm_connect ARGS``; return (rc, imported top-level modules, stdout)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "llm_connect", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return proc.returncode, names, proc.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["grade", "--help"],
        ["ledger", "--help"],
        ["ledger", "sql", "--help"],
        ["route", "--help"],
        ["db", "upgrade", "--help"],
        ["stability", "--help"],
        ["calibrate", "--help"],
    ],
)
def test_help_and_version_import_nothing_heavy(args: list[str]) -> None:
    rc, names, _ = imported_modules(*args)
    assert rc == 0
    assert "llm_connect" in names  # the parser saw the imports
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


def test_version_prints_the_package_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"llm-connect {__version__}"


def test_help_lists_every_command_group() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for name in ("grade", "route", "ledger", "db", "stability"):
        assert name in result.stdout
    grade_help = invoke("grade", "--help").stdout
    for option in (
        "--baseline",
        "--candidate",
        "--judge",
        "--concurrency",
        "--resume",
        "--min-quality",
        "--json",
    ):
        assert option in grade_help


def test_lazy_command_groups_load_only_when_run(tmp_path: object) -> None:
    """A group in ``_LAZY_GROUPS`` (like ``calibrate``) is listed by ``--help`` without
    importing it, and runs when called."""
    from pathlib import Path

    pkg = Path(str(tmp_path))
    (pkg / "llm_connect_demo_group.py").write_text(
        "import typer\napp = typer.Typer()\n"
        "@app.command()\ndef hello(name: str) -> None:\n    typer.echo(f'hello {name}')\n"
        "@app.command()\ndef other() -> None:\n    pass\n",
        encoding="utf-8",
    )
    script = (
        f"import sys; sys.path.insert(0, {str(pkg)!r})\n"
        "import llm_connect.cli as c\n"
        "c._LAZY_GROUPS['demo'] = ('llm_connect_demo_group', 'A demo group.')\n"
        "mode = sys.argv[1]\n"
        "try:\n"
        "    c.app(['--help'] if mode == 'help' else ['demo', 'hello', 'Ada'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('loaded' if 'llm_connect_demo_group' in sys.modules else 'not loaded')\n"
    )
    listed = subprocess.run(
        [sys.executable, "-c", script, "help"], capture_output=True, text=True, timeout=60
    )
    assert "A demo group." in listed.stdout and listed.stdout.strip().endswith("not loaded")
    ran = subprocess.run([sys.executable, "-c", script, "run"], capture_output=True, text=True, timeout=60)
    assert ran.stdout.splitlines() == ["hello Ada", "loaded"], ran.stderr


def _command_paths() -> list[list[str]]:
    """Every command and subcommand of the app, as the words that name it (the lazy groups'
    own apps read for their subcommands)."""
    import importlib

    import typer

    from llm_connect.cli import _LAZY_GROUPS, app

    def children(command: Any, parent: Any) -> list[str]:
        if not hasattr(command, "list_commands"):  # not a group (Typer vendors its own click)
            return []
        return list(command.list_commands(command.context_class(command, parent=parent)))

    root: Any = typer.main.get_command(app)
    ctx = root.context_class(root)
    paths: list[list[str]] = []
    for name in root.list_commands(ctx):
        command = root.get_command(ctx, name)
        if name in _LAZY_GROUPS:
            module, _, attr = _LAZY_GROUPS[name][0].partition(":")
            command = typer.main.get_command(getattr(importlib.import_module(module), attr or "app"))
        paths += [[name], *([name, child] for child in children(command, ctx))]
    return paths


def test_every_command_prints_plain_help_in_one_style() -> None:
    # Every command's --help is the same plain, wrapped text (no rich boxes, whose wrapping kept
    # the docstring's own line breaks: calibrate's help came out ragged).
    paths = _command_paths()
    assert ["calibrate"] in paths and ["labels", "queue"] in paths
    for path in paths:
        result = invoke(*path, "--help")
        assert result.exit_code == 0, (path, result.output)
        assert "╭" not in result.stdout and "Usage: " in result.stdout, path


def test_a_mistyped_command_gets_the_closest_names_though_commands_load_lazily() -> None:
    result = invoke("legder", "summary")
    assert result.exit_code == 2
    assert "No such command 'legder'. Did you mean 'ledger'?" in result.output
    assert "Did you mean 'calibrate'?" in invoke("calibrat").output
