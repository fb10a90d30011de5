"""Opening a ledger already at the newest schema revision needs no Alembic (issue 36, item 6).

The head is read from the migration scripts' own ``revision`` / ``down_revision`` lines and the
database's revision with plain SQL; anything else (below head, unknown, no revision, scripts
that are not a plain chain) goes through Alembic as before.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic import command

from llm_connect.errors import LedgerError
from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger, _migrate, current_revision, head_revision, upgrade
from llm_connect.ledger._migrate import alembic_config


def test_the_head_read_from_the_scripts_is_alembics() -> None:
    assert _migrate._scripts_head() == head_revision()


def _scripts(root: Path, chain: dict[str, str]) -> Path:
    """A migrations folder whose scripts have these ``revision`` -> ``down_revision`` lines."""
    versions = root / "versions"
    versions.mkdir(parents=True)
    for i, (revision, down) in enumerate(chain.items()):
        (versions / f"{i:04d}.py").write_text(
            f'"""A script."""\n\nrevision: str = {revision!r}\ndown_revision: str | None = {down}\n',
            encoding="utf-8",
        )
    return root


@pytest.mark.parametrize(
    ("chain", "head"),
    [
        ({"a": "None", "b": "'a'", "c": "'b'"}, "c"),
        ({"a": "None", "b": "'a'", "c": "'a'"}, None),  # two heads
        ({"a": "None", "b": "'a'", "c": "'a'", "m": "('b', 'c')"}, None),  # a merge
        ({"a": "None", "b": "PARENT"}, None),  # not a literal
    ],
)
def test_scripts_that_are_not_a_plain_chain_leave_the_head_to_alembic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chain: dict[str, str], head: str | None
) -> None:
    monkeypatch.setattr(_migrate, "migrations_dir", lambda: _scripts(tmp_path, chain))
    _migrate._scripts_head.cache_clear()
    try:
        assert _migrate._scripts_head() == head
    finally:
        _migrate._scripts_head.cache_clear()


def _modules_after_open(url: str) -> set[str]:
    code = (
        "import sys\n"
        "from llm_connect.ledger import QualityLedger\n"
        f"with QualityLedger({url!r}) as ledger:\n"
        "    print(ledger.revision)\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    revision, modules = out.stdout.splitlines()
    assert revision == head_revision()
    return set(modules.split())


def test_a_ledger_at_head_opens_without_importing_alembic(ledger_url: str) -> None:
    upgrade(ledger_url)
    loaded = _modules_after_open(ledger_url)
    assert not {m for m in loaded if m.split(".")[0] == "alembic"}


def test_a_ledger_below_head_is_migrated_and_refused_without_auto_migrate(
    ledger_url: str, make_result: Callable[..., GradingResult]
) -> None:
    with QualityLedger(ledger_url) as ledger:
        ledger.record(make_result(), task="t")
        with ledger.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0001_initial")
    with pytest.raises(LedgerError, match="llm-connect db upgrade"):
        QualityLedger(ledger_url, auto_migrate=False)
    assert current_revision(ledger_url) == "0001_initial"
    assert "alembic" in _modules_after_open(ledger_url)  # migrated, in that process
    assert current_revision(ledger_url) == head_revision()
