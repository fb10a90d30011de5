"""The first command of both READMEs, graded once per session (each module copies its ledger)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs._commands import EXAMPLES_README, README, find
from tests.docs._run import llm, make_workdir

# The README's first command, and the routing question of examples/README.md: the same words.
FIRST = (
    "llm-connect grade examples/suite.jsonl --baseline recorded:gpt-4o --candidate recorded:gpt-4o-mini"
    " --candidate recorded:llama-3.1-8b --judge embedding --judge vrty"
)


@dataclass(frozen=True)
class Graded:
    """What the first command printed and returned, and the ledger it wrote."""

    output: str
    exit_code: int
    ledger: Path
    seconds: float


@pytest.fixture(scope="session")
def first_grade(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    command = find(README, FIRST)
    assert find(EXAMPLES_README, FIRST).argv == command.argv
    work = make_workdir(tmp_path_factory.mktemp("first-grade"))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)
        patch.delenv("LLM_CONNECT_DATABASE_URL", raising=False)
        start = time.perf_counter()
        result = llm(command)
        seconds = time.perf_counter() - start
    return Graded(result.output, result.exit_code, work / "llm_connect.db", seconds)


def workdir_for(module: str, factory: pytest.TempPathFactory, graded: Graded) -> Iterator[Path]:
    """A work directory with a copy of the first command's ledger, the current directory while
    ``module``'s tests run (``LLM_CONNECT_DATABASE_URL`` unset: the ledger is ``llm_connect.db``)."""
    work = make_workdir(factory.mktemp(module), graded.ledger)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)
        patch.delenv("LLM_CONNECT_DATABASE_URL", raising=False)
        yield work
