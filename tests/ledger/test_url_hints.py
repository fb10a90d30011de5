"""A ledger URL that is not one, and PostgreSQL without its driver: the error says what to write or install."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from llm_connect.errors import LedgerError
from llm_connect.ledger import ENV_VAR, QualityLedger

ROOT = Path(__file__).resolve().parents[2]
POSTGRES_HINT = "PostgreSQL: postgresql+psycopg://user@host/db"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("ledger.db", "sqlite:///ledger.db"),
        ("data/ledger.db", "sqlite:///data/ledger.db"),
        ("./ledger.db", "sqlite:///./ledger.db"),
        ("/srv/evals/ledger.db", "sqlite:////srv/evals/ledger.db"),
    ],
)
def test_a_file_path_gets_the_sqlite_url_it_means(given: str, meant: str) -> None:
    with pytest.raises(LedgerError) as raised:
        QualityLedger(given)
    message = str(raised.value)
    assert message == (f"{given!r} is not a database URL; for a SQLite file use {meant} ({POSTGRES_HINT})")
    assert "SQLAlchemy" not in message


@pytest.mark.parametrize("given", ["sqlite:ledger.db", "postgres//db-host/evals", ""])
def test_a_mangled_url_gets_both_forms(given: str) -> None:
    with pytest.raises(LedgerError, match="is not a database URL") as raised:
        QualityLedger(given)
    assert "sqlite:///path/to/ledger.db" in str(raised.value) and POSTGRES_HINT in str(raised.value)


def test_the_environment_variable_is_named_when_the_url_came_from_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "ledger.db")
    with pytest.raises(LedgerError) as raised:
        QualityLedger()
    assert str(raised.value).startswith(f"${ENV_VAR} 'ledger.db' is not a database URL; ")
    assert "sqlite:///ledger.db" in str(raised.value)


@pytest.mark.parametrize(
    ("given", "meant"),
    [("sqlite://ledger.db", "sqlite:///ledger.db"), ("sqlite://data/x.db", "sqlite:///data/x.db")],
)
def test_two_slashes_are_refused_instead_of_opening_a_ledger_in_memory(
    given: str, meant: str, tmp_path: Path
) -> None:
    with pytest.raises(LedgerError) as raised:
        QualityLedger(given)
    assert "names no file (two slashes make" in str(raised.value)
    assert f"use {meant} (three slashes" in str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_a_good_sqlite_url_still_opens(tmp_path: Path) -> None:
    with QualityLedger("sqlite:///ledger.db") as ledger:
        assert ledger.dialect == "sqlite"
    assert (tmp_path / "ledger.db").is_file()


def test_postgresql_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg -> ModuleNotFoundError
    with pytest.raises(LedgerError) as raised:
        QualityLedger("postgresql://evals:hunter2@127.0.0.1:5432/evals")
    message = str(raised.value)
    assert message.startswith("PostgreSQL needs the psycopg driver: pip install 'llm-connect[postgres]' (")
    assert "postgresql+psycopg://evals:***@127.0.0.1:5432/evals" in message
    assert "hunter2" not in message and "idle_in_transaction" not in message


def test_another_postgresql_driver_is_named_with_both_ways_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    with pytest.raises(LedgerError) as raised:
        QualityLedger("postgresql+psycopg2://evals@127.0.0.1/evals")
    assert str(raised.value).startswith(
        "PostgreSQL needs the psycopg2 driver: pip install psycopg2, "
        "or postgresql+psycopg:// and pip install 'llm-connect[postgres]'"
    )


def test_the_extra_the_hint_names_exists_and_installs_psycopg() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    assert any(dep.startswith("psycopg") for dep in extras["postgres"])
