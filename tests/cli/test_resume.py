"""Crash safety: a real ``llm-connect grade`` process killed halfway (kill -9, Ctrl-C), then resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from llm_connect.ledger import QualityLedger
from tests.cli._util import live_suite
from tests.fixtures.openai_server import OpenAIServer

CASES = 60
pytestmark = pytest.mark.slow


def grade_cmd(suite: Path, db: str, server: OpenAIServer, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "llm_connect", "grade", str(suite),
        "-b", "openai:base", "-c", "openai:cand",
        "--base-url", server.base_url, "--api-key", "sk-test", "--concurrency", "2", "--db", db, *extra,
    ]  # fmt: skip


def start_and_wait(cmd: list[str], db: str, run_id: str, cwd: Path, at_least: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _out, err = proc.communicate()
            pytest.fail(f"grading finished before it could be interrupted (rc={proc.returncode}): {err}")
        if Path(db.removeprefix("sqlite:///")).exists():
            with QualityLedger(db) as ledger:
                if ledger.count(run_id=run_id) >= at_least:
                    return proc
        time.sleep(0.05)
    proc.kill()
    proc.communicate()
    pytest.fail("grading made no progress")


def assert_complete_exactly_once(db: str, run_id: str) -> None:
    with QualityLedger(db) as ledger:
        rows = list(ledger.results(run_id=run_id))
        counts = Counter((r.case_id, r.grader_id, r.candidate_model) for r in rows)
        assert len(rows) == CASES and set(counts.values()) == {1}
        assert {r.case_id for r in rows} == {f"c{i}" for i in range(CASES)}
        assert ledger.run(run_id).status == "completed"  # type: ignore[union-attr]


def test_resume_after_kill_9_grades_each_case_exactly_once(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.delay_s = 0.1
    suite = live_suite(tmp_path / "s.jsonl", CASES)
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    proc = start_and_wait(
        grade_cmd(suite, db, openai_server, "--run-id", "r-kill"), db, "r-kill", tmp_path, 10
    )
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)  # reaps it and closes its pipes
    with QualityLedger(db) as ledger:
        committed = ledger.count(run_id="r-kill")
    assert 10 <= committed < CASES
    calls_before = len(openai_server.requests)

    resumed = subprocess.run(
        grade_cmd(suite, db, openai_server, "--resume", "r-kill", "--no-cache"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert_complete_exactly_once(db, "r-kill")
    # only the missing cases were asked for again (both sides of each)
    assert len(openai_server.requests) - calls_before == 2 * (CASES - committed)


def test_ctrl_c_commits_finished_cases_exits_130_and_resumes(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.delay_s = 0.1
    suite = live_suite(tmp_path / "s.jsonl", CASES)
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    proc = start_and_wait(grade_cmd(suite, db, openai_server, "--run-id", "r-int"), db, "r-int", tmp_path, 10)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume r-int" in err and "Traceback" not in err
    with QualityLedger(db) as ledger:
        run = ledger.run("r-int")
        assert run is not None and run.status == "interrupted"
        assert 10 <= ledger.count(run_id="r-int") < CASES

    resumed = subprocess.run(
        grade_cmd(suite, db, openai_server, "--resume", "r-int"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert_complete_exactly_once(db, "r-int")
