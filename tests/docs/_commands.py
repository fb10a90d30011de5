"""The commands a reader of a README would run, parsed from its Markdown.

A command is one simple command of a shell block (```sh, ```bash, ```shell or ```console;
lines continued with a backslash are joined, ``#`` comments dropped, ``&&`` / ``;`` / ``||``
lists split into their commands), or an inline code span that starts with a program a reader
runs: ``llm-connect``, ``python``/``python3``, ``pip``, ``sqlite3``, ``psql``, ``export`` or an
executable file of the repository (``./scripts/test``, ``.ci/run``). Option fragments such as
`` `--judge exact` `` are not commands: they extend the command before them.

Each command is named by its words joined with single spaces (quotes removed), which is how
the test modules list the commands they run and the ones they deliberately do not run.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EXAMPLES_README = ROOT / "examples" / "README.md"

SHELL_FENCES = frozenset({"sh", "bash", "shell", "console"})
PROGRAMS = frozenset({"llm-connect", "python", "python3", "pip", "sqlite3", "psql", "export"})
_SEPARATORS = frozenset({"&&", ";", "||"})


@dataclass(frozen=True)
class Command:
    """One command of a README: its words, where it is (1-based line) and whether in a shell block."""

    argv: tuple[str, ...]
    line: int
    block: bool

    @property
    def text(self) -> str:
        return " ".join(self.argv)


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:  # an unbalanced quote in prose: plain words
        return text.split()


def _split_list(words: list[str]) -> list[list[str]]:
    """``a && b ; c`` -> ``[[a], [b], [c]]``."""
    out: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS:
            out.append([])
        else:
            out[-1].append(word)
    return [cmd for cmd in out if cmd]


def _is_program(word: str) -> bool:
    if word in PROGRAMS:
        return True
    path = ROOT / word
    return "/" in word and path.is_file() and os.access(path, os.X_OK)


def _block_commands(token: Token) -> list[Command]:
    assert token.map is not None
    first = token.map[0] + 2  # the line after the opening fence
    commands: list[Command] = []
    logical, start = "", first
    for offset, raw in enumerate(token.content.splitlines()):
        if not logical:
            start = first + offset
        if raw.rstrip().endswith("\\"):
            logical += raw.rstrip()[:-1] + " "
            continue
        logical += raw
        commands += [Command(tuple(cmd), start, True) for cmd in _split_list(_words(logical))]
        logical = ""
    if logical:
        commands += [Command(tuple(cmd), start, True) for cmd in _split_list(_words(logical))]
    return commands


def _inline_commands(token: Token) -> list[Command]:
    assert token.map is not None
    commands: list[Command] = []
    line = token.map[0] + 1
    for child in token.children or []:
        if child.type in ("softbreak", "hardbreak"):
            line += 1
        elif child.type == "text":
            line += child.content.count("\n")
        elif child.type == "code_inline":
            words = _words(child.content)
            if words and _is_program(words[0]):
                commands += [Command(tuple(cmd), line, False) for cmd in _split_list(words)]
            line += child.content.count("\n")
    return commands


@cache
def readme_commands(path: Path) -> tuple[Command, ...]:
    """Every command of the Markdown file ``path``, in the order it is shown."""
    tokens = MarkdownIt().parse(path.read_text(encoding="utf-8"))
    commands: list[Command] = []
    for token in tokens:
        if token.type == "fence" and token.info.strip().split(" ")[0] in SHELL_FENCES:
            commands += _block_commands(token)
        elif token.type == "inline":
            commands += _inline_commands(token)
    return tuple(commands)


def command_texts(path: Path) -> set[str]:
    return {c.text for c in readme_commands(path)}


def find(path: Path, text: str) -> Command:
    """The command of ``path`` named ``text`` (its words joined by single spaces); fails if absent."""
    for command in readme_commands(path):
        if command.text == text:
            return command
    raise AssertionError(f"{path.relative_to(ROOT)} no longer shows the command: {text}")


def prose(path: Path) -> str:
    """The file's text with every run of whitespace made one space (claims wrap across lines)."""
    return re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))


def line_of(path: Path, fragment: str) -> int:
    """The 1-based line on which ``fragment`` (whitespace-normalised) starts in ``path``."""
    text = path.read_text(encoding="utf-8")
    flat: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if ch.isspace():
            if flat and flat[-1] == " ":
                continue
            flat.append(" ")
        else:
            flat.append(ch)
        where.append(i)
    at = "".join(flat).find(re.sub(r"\s+", " ", fragment))
    if at < 0:
        raise AssertionError(f"{path.relative_to(ROOT)} no longer says: {fragment}")
    return text.count("\n", 0, where[at]) + 1


def unlisted(path: Path, run: dict[str, str], not_run: dict[str, str], tests: set[str]) -> list[str]:
    """What is wrong with a module's lists of ``path``'s commands (empty when nothing is).

    ``run`` maps each command a test runs to that test's name; ``not_run`` maps each command no
    test runs to the reason. Every command shown must be in exactly one of them, every listed
    command must still be shown, and every named test must exist (``tests``: the module's).
    """
    shown = command_texts(path)
    where = {c.text: c.line for c in reversed(readme_commands(path))}
    name = path.relative_to(ROOT)
    problems = [
        f"{name}:{where[t]}: neither run nor listed as not run: {t}"
        for t in sorted(shown - set(run) - set(not_run))
    ]
    problems += [f"listed but no longer in {name}: {t}" for t in sorted((set(run) | set(not_run)) - shown)]
    problems += [f"listed as run and as not run: {t}" for t in sorted(set(run) & set(not_run))]
    problems += [f"{t}: no test named {test}" for t, test in sorted(run.items()) if test not in tests]
    problems += [f"{t}: give the reason it is not run" for t, why in sorted(not_run.items()) if len(why) < 20]
    return problems
