"""One exit-code table for every command (issue 36, item 2): in the code (``cli/_exit.py``), in
every ``--help`` and in ``contracts/cli.md``, and no code both a verdict and an error."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer

from llm_connect.cli import _LAZY_GROUPS, _load_group, app
from llm_connect.cli._exit import (
    COMMAND_CODES,
    ERRORS,
    STABILITY_VERDICT_CODES,
    VERDICTS,
    ExitCode,
    help_rows,
    returns_line,
)
from tests.cli._util import invoke

ROOT = Path(__file__).resolve().parents[2]
HEADING = "Exit codes (the same for every llm-connect command):"


def _commands() -> tuple[list[str], list[str]]:
    """Every group and every command of the CLI as paths under ``llm-connect`` (lazy ones too)."""
    groups: list[str] = [""]
    commands: list[str] = []

    def walk(cmd: Any, path: list[str]) -> None:
        for name in cmd.list_commands(None):
            sub = _load_group(name) if not path and name in _LAZY_GROUPS else cmd.get_command(None, name)
            if hasattr(sub, "list_commands"):
                groups.append(" ".join([*path, name]))
                walk(sub, [*path, name])
            else:
                commands.append(" ".join([*path, name]))

    walk(typer.main.get_command(app), [])
    return groups, commands


GROUPS, COMMANDS = _commands()


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_every_command_is_in_the_table() -> None:
    assert sorted(COMMANDS) == sorted(COMMAND_CODES), "a command without its codes in cli/_exit.py"
    for codes in COMMAND_CODES.values():
        assert {ExitCode.OK, ExitCode.USAGE, ExitCode.INTERNAL, ExitCode.INTERRUPTED} <= set(codes)
        assert list(codes) == sorted(codes)


@pytest.mark.parametrize("path", GROUPS + COMMANDS, ids=lambda p: p or "llm-connect")
def test_every_help_shows_the_table(path: str) -> None:
    result = invoke(*path.split(), "--help", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert HEADING in text
    table = _flat(text[text.index(HEADING) :])
    for code, meaning in help_rows():
        assert f"{code} {meaning}" in table, (code, meaning)
    line = returns_line(path)
    if path in COMMAND_CODES:
        assert line is not None and line in table
    else:
        assert line is None and "This command returns" not in table


def test_each_row_of_the_table_is_one_line_in_80_columns() -> None:
    text = invoke("ledger", "show", "--help", env={"COLUMNS": "80"}).stdout
    rows = text[text.index(HEADING) :].splitlines()[1 : 1 + len(ExitCode)]
    assert [row.split()[0] for row in rows] == [str(int(code)) for code in ExitCode]
    assert all(len(row) <= 80 for row in rows)


def test_the_codes_grade_documents_are_kept() -> None:
    """CI scripts written for ``grade`` keep working: its codes did not move."""
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0,
        "FAILED": 1,
        "USAGE": 2,
        "INCOMPLETE": 3,
        "INTERNAL": 4,
        "NOT_SETTLED": 5,
        "RISKY": 6,
        "INTERRUPTED": 130,
        "BROKEN_PIPE": 141,
    }


def test_no_code_is_both_a_verdict_and_an_error() -> None:
    assert not VERDICTS & ERRORS
    assert VERDICTS | ERRORS | {ExitCode.OK} == set(ExitCode)
    assert set(STABILITY_VERDICT_CODES.values()) - {ExitCode.OK} <= VERDICTS
    assert STABILITY_VERDICT_CODES["DO_NOT_SHIP"] == ExitCode.FAILED  # the verdict against, as grade's gate
    assert ExitCode.RISKY in COMMAND_CODES["stability"]


def test_the_contract_holds_the_same_table() -> None:
    text = (ROOT / "contracts" / "cli.md").read_text(encoding="utf-8")
    section = text[text.index("### Exit codes") :]
    section = section[: section.index("\n## ")]
    codes = dict(re.findall(r"^\| (\d+) \| `([A-Z_]+)` \|", section, flags=re.M))
    assert {int(c): name for c, name in codes.items()} == {int(code): code.name for code in ExitCode}
    commands = re.findall(r"^\| `([a-z ]+)` \| ([\d, ]+) \|$", section, flags=re.M)
    assert {name: [int(c) for c in codes.split(", ")] for name, codes in commands} == {
        name: [int(c) for c in codes] for name, codes in COMMAND_CODES.items()
    }


def test_the_readme_lists_the_same_codes() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    line = next(p for p in text.split("\n\n") if p.startswith("Exit codes (every command)"))
    assert [int(c) for c in re.findall(r"\*\*(\d+)\*\*", line)] == [int(code) for code in ExitCode]


def test_no_command_exits_with_a_bare_number() -> None:
    """Every exit code in ``llm_connect/cli/`` is an ``ExitCode``: none is written as a number."""
    bare = re.compile(r"(?:typer\.Exit|sys\.exit|SystemExit)\(\s*\d|\bcode\s*=\s*\d|exit_code\s*=\s*\d")
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted((ROOT / "llm_connect" / "cli").glob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if bare.search(line)
    ]
    assert found == []
