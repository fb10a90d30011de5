"""Riding out the database (issue 39), the ledger's side: which errors are faults, how long a write
waits for a server that went away, and the journal that keeps what could not be recorded."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from llm_connect.errors import LedgerFaultError
from llm_connect.ledger import JournalEntry, QualityLedger, RecordItem
from llm_connect.ledger._engine import make_engine, write
from llm_connect.ledger._patience import fault_of
from llm_connect.types import LLMResponse


def _sqlite_error(code: int, message: str) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError(message)
    exc.sqlite_errorcode = code  # type: ignore[attr-defined]
    return exc


def _pg_error(cls: type[Exception], sqlstate: str | None) -> Exception:
    exc = cls("server said no")
    if sqlstate is not None:
        exc.sqlstate = sqlstate  # type: ignore[attr-defined]
    return exc


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (_sqlite_error(13, "database or disk is full"), "disk_full"),  # SQLITE_FULL
        (_sqlite_error(8 | (6 << 8), "attempt to write a readonly database"), "read_only"),  # READONLY_*
        (_sqlite_error(14, "unable to open database file"), "permission"),  # SQLITE_CANTOPEN
        (_sqlite_error(5, "database is locked"), None),  # BUSY: retried as before, not a fault
        (OSError(28, "No space left on device"), "disk_full"),
        (OSError(30, "Read-only file system"), "read_only"),
        (OSError(13, "Permission denied"), "permission"),
        (_pg_error(psycopg.OperationalError, None), "unreachable"),  # refused: no SQLSTATE
        (_pg_error(psycopg.errors.AdminShutdown, "57P01"), "unreachable"),
        (_pg_error(psycopg.errors.CannotConnectNow, "57P03"), "unreachable"),
        (_pg_error(psycopg.OperationalError, "08006"), "unreachable"),
        (_pg_error(psycopg.errors.ReadOnlySqlTransaction, "25006"), "unreachable"),  # recovery
        (_pg_error(psycopg.errors.DiskFull, "53100"), "disk_full"),
        (_pg_error(psycopg.errors.InsufficientPrivilege, "42501"), "permission"),
        (_pg_error(psycopg.errors.UniqueViolation, "23505"), None),
        (_pg_error(psycopg.errors.SyntaxError, "42601"), None),
    ],
)
def test_faults_are_told_by_sqlstate_and_result_code(exc: BaseException, cause: str | None) -> None:
    assert fault_of(exc) == cause


def test_a_server_that_stays_away_past_the_patience_is_a_fault_naming_how_long() -> None:
    engine = make_engine(make_url("postgresql+psycopg://postgres@127.0.0.1:1/none"), patience_s=0.3)
    lines: list[str] = []
    patience = engine.get_execution_options()["llm_connect_patience"]
    patience.on_pause = lines.append
    with pytest.raises(LedgerFaultError) as stopped:
        write(engine, "recording finished cases", lambda conn: conn.execute(text("SELECT 1")))
    fault = stopped.value
    assert fault.cause == "unreachable" and fault.waited_s >= 0.3
    assert str(fault).startswith("recording finished cases failed: the database at postgresql+psycopg://")
    assert "was unreachable for" in str(fault)
    assert lines and "waiting up to 0.3 s" in lines[0]
    assert len(patience.outages) == 1
    # The same outage is not waited for twice: the next call fails at once (no new pause).
    with pytest.raises(LedgerFaultError):
        write(engine, "a worker's heartbeat", lambda conn: None)
    assert len(patience.outages) == 1
    engine.dispose()


def test_patience_zero_does_not_wait() -> None:
    engine = make_engine(make_url("postgresql+psycopg://postgres@127.0.0.1:1/none"), patience_s=0)
    with pytest.raises(LedgerFaultError) as stopped:
        write(engine, "claiming cases", lambda conn: None)
    assert stopped.value.cause == "unreachable"
    engine.dispose()


def test_the_patience_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> None:
    monkeypatch.setenv("LLM_CONNECT_DB_PATIENCE", "7.5")
    with QualityLedger(sqlite_url) as ledger:
        assert ledger.patience.seconds == 7.5
    with QualityLedger(sqlite_url, patience_s=0) as ledger:
        assert ledger.patience.seconds == 0


def _entry(make_result: Any, case_id: str) -> JournalEntry:
    result = make_result()
    response = LLMResponse(text="kept answer", model="small", provider="openai")
    return JournalEntry(
        case_id=case_id,
        records=[RecordItem(result, "qa", "run-j", case_id)],
        cache=[(f"key-{case_id}", "openai:small", response)],
        failures=[],
        skips=[],
    )


def test_the_journal_is_replayed_once_and_holds_no_credentials(sqlite_url: str, make_result: Any) -> None:
    with QualityLedger(sqlite_url) as ledger:
        ledger.start_run("run-j")
        entry = _entry(make_result, "c1")
        entry.failures = [
            {
                "case_id": "c2",
                "task": "qa",
                "stage": "candidate",
                "error_type": "AuthenticationError",
                "message": "bad key sk-live-abcdefghijklmnop0123456789",
                "adapter_id": "openai:small",
            }
        ]
        path, passed_over = ledger.keep_outcomes("run-j", [entry])
        assert passed_over is None and path.name.startswith(Path(make_url(sqlite_url).database or "").name)
        assert "sk-live-abcdefghijklmnop0123456789" not in path.read_text()
        assert ledger.replay_journal("run-j") == 1
        assert not path.exists()
        assert ledger.replay_journal("run-j") == 0  # gone once recorded
        assert [g.case_id for g in ledger.results(run_id="run-j")] == ["c1"]
        assert "key-c1" in ledger.cache_get_many(["key-c1"])
        # Recording the same entry again changes nothing (grades have idempotency keys).
        ledger.keep_outcomes("run-j", [_entry(make_result, "c1")])
        assert ledger.replay_journal("run-j") == 1
        assert ledger.count() == 1


def test_a_journal_place_that_cannot_be_written_falls_back_to_the_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_result: Any
) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    db = tmp_path / "ledger.db"
    with QualityLedger(f"sqlite:///{db}") as ledger:
        journal = ledger.journal("run-j")
        journal.primary.mkdir(parents=True)  # a directory where the file should be: cannot be written
        path, passed_over = ledger.keep_outcomes("run-j", [_entry(make_result, "c1")])
        assert path.is_relative_to(tmp_path / "tmp") and passed_over and str(journal.primary) in passed_over
        os.rmdir(journal.primary)
        ledger.start_run("run-j")
        assert ledger.replay_journal("run-j") == 1
