"""A newcomer's mistakes on the command line end in one line that says what to write or install."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from llm_connect.ledger import ENV_VAR
from tests.cli._util import invoke, pair_suite, write_suite


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)


def test_db_given_a_file_name_says_the_sqlite_url_to_use(tmp_path: Path) -> None:
    result = invoke("ledger", "summary", "--db", "ledger.db")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: 'ledger.db' is not a database URL; for a SQLite file use sqlite:///ledger.db "
        "(PostgreSQL: postgresql+psycopg://user@host/db)"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_environment_variable_is_named_when_it_holds_the_file_name(tmp_path: Path) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 3)
    result = invoke("grade", str(suite), env={ENV_VAR: "ledger.db"})
    assert result.exit_code == 2
    assert (
        f"error: ${ENV_VAR} 'ledger.db' is not a database URL; for a SQLite file use sqlite:///ledger.db"
        in (result.stderr)
    )


def test_postgresql_without_the_driver_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    result = invoke("ledger", "summary", "--db", "postgresql://evals@127.0.0.1:5432/evals")
    assert result.exit_code == 2
    assert "error: PostgreSQL needs the psycopg driver: pip install 'llm-connect[postgres]'" in result.stderr
    assert "Traceback" not in result.output


def test_a_misspelt_judge_option_lists_the_options_and_writes_nothing(tmp_path: Path) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 3)
    result = invoke("grade", str(suite), "--db", "sqlite:///ledger.db", "--judge", "exact:normalise=true")
    assert result.exit_code == 2
    assert (
        "judge 'exact': unknown option 'normalise'; did you mean 'normalize'? (options of 'exact': normalize)"
        in result.stderr
    )
    assert "make_exact_judge" not in result.output and not (tmp_path / "ledger.db").exists()


def test_a_judge_option_of_the_wrong_type_says_the_type(tmp_path: Path) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 3)
    result = invoke("grade", str(suite), "--db", "sqlite:///ledger.db", "--judge", "exact:normalize=yes")
    assert result.exit_code == 2
    assert "judge 'exact': option 'normalize' must be true or false, not 'yes'" in result.stderr


def test_a_misspelt_suite_field_names_the_line_and_the_field_meant(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path / "x.jsonl",
        [{"id": "a", "prompt": "p"}, {"id": "b", "prompt": "q"}, {"id": "c", "promt": "r"}],
    )
    result = invoke("grade", str(suite), "--db", "sqlite:///ledger.db")
    assert result.exit_code == 2
    assert f"{suite}:3 field 'promt': unknown field; did you mean 'prompt'?" in result.stderr
    assert not (tmp_path / "ledger.db").exists()
