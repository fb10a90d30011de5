"""``llm-connect grade --shared``: worker processes grade one run through PostgreSQL.

Real processes (the CLI in subprocesses), the tests' loopback model server (in this
process, so it sees every request of every worker) and the real PostgreSQL.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_connect.ledger import QualityLedger
from tests.cli._util import invoke, write_suite
from tests.fixtures.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]


def suite(path: Path, n: int) -> Path:
    return write_suite(path, [{"id": f"c{i:03d}", "prompt": f"question {i}", "task": "qa"} for i in range(n)])


def worker(
    suite_path: Path, url: str, server: OpenAIServer, run_id: str, *extra: str
) -> subprocess.Popen[str]:
    args = [
        sys.executable, "-m", "llm_connect", "grade", str(suite_path), "--shared", "--run-id", run_id,
        "--db", url, "-b", "openai:big", "-c", "openai:small", "--base-url", server.base_url,
        "--api-key", "sk-test", "--json", *extra,
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def calls_per_case(server: OpenAIServer) -> collections.Counter[tuple[str, str]]:
    """(model, prompt) -> number of chat requests. A request cut off mid-body (a worker killed
    while sending it) reached the server without a parsable body and never got an answer: it is
    not a call made."""
    return collections.Counter(
        (r.body["model"], r.body["messages"][-1]["content"])
        for r in server.requests_to("/chat/completions")
        if r.body is not None
    )


def test_three_workers_grade_every_case_exactly_once(
    tmp_path: Path, postgres_url: str, openai_server: OpenAIServer
) -> None:
    openai_server.delay_s = 0.02
    path = suite(tmp_path / "s.jsonl", 60)
    procs = [worker(path, postgres_url, openai_server, "fleet-1", "--concurrency", "4") for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    for proc, (_out, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err
    with QualityLedger(postgres_url) as ledger:
        grades = list(ledger.results(run_id="fleet-1"))
        status = ledger.run_status("fleet-1")
    assert sorted(g.case_id for g in grades) == [f"c{i:03d}" for i in range(60)]  # once each
    counts = calls_per_case(openai_server)
    assert len(counts) == 120 and set(counts.values()) == {1}  # no model call made twice
    assert status.done == 60 and status.pending == 0 and status.claimed == 0
    assert len(status.workers) == 3
    # Every worker did part of the work, and each worker's report covers every grade of the run.
    done = [json.loads(out)["cases_done"] for out, _ in outs]
    assert sum(done) == 60 and all(json.loads(out)["stats"][0]["n"] == 60 for out, _ in outs)


def test_a_killed_worker_loses_nothing_and_duplicates_nothing(
    tmp_path: Path, postgres_url: str, openai_server: OpenAIServer
) -> None:
    openai_server.delay_s = 0.1
    path = suite(tmp_path / "s.jsonl", 40)
    victim = worker(path, postgres_url, openai_server, "fleet-2", "--concurrency", "4", "--lease-s", "2")
    deadline = time.monotonic() + 30
    while len(openai_server.requests) < 6 and time.monotonic() < deadline:  # the victim is mid-run
        time.sleep(0.05)
    others = [
        worker(path, postgres_url, openai_server, "fleet-2", "--concurrency", "4", "--lease-s", "2")
        for _ in range(2)
    ]
    time.sleep(0.3)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=10)  # reaps it and closes its pipes
    for proc in others:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with QualityLedger(postgres_url) as ledger:
        grades = list(ledger.results(run_id="fleet-2"))
        status = ledger.run_status("fleet-2")
    assert sorted(g.case_id for g in grades) == [f"c{i:03d}" for i in range(40)]
    assert status.done == 40 and status.claimed == 0 and status.pending == 0
    # Calls are repeated only for the cases the killed worker held when it died.
    repeated = [key for key, n in calls_per_case(openai_server).items() if n > 1]
    assert len(repeated) <= 2 * 8


def test_a_different_suite_under_the_same_run_id_is_refused(
    tmp_path: Path, postgres_url: str, openai_server: OpenAIServer
) -> None:
    first = invoke(
        "grade", str(suite(tmp_path / "a.jsonl", 3)), "--shared", "--run-id", "fleet-3", "--db", postgres_url,
        "-b", "openai:big", "-c", "openai:small", "--base-url", openai_server.base_url, "--api-key", "sk-test",
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    calls = len(openai_server.requests)
    second = invoke(
        "grade", str(suite(tmp_path / "b.jsonl", 4)), "--shared", "--run-id", "fleet-3", "--db", postgres_url,
        "-b", "openai:big", "-c", "openai:small", "--base-url", openai_server.base_url, "--api-key", "sk-test",
    )  # fmt: skip
    assert second.exit_code == 2 and "fleet-3" in second.stderr
    assert len(openai_server.requests) == calls


@pytest.mark.parametrize(
    ("extra", "message"),
    [((), "--run-id"), (("--run-id", "r", "--until-decided"), "--until-decided")],
)
def test_shared_usage_errors(tmp_path: Path, postgres_url: str, extra: tuple[str, ...], message: str) -> None:
    sides = ("-b", "openai:big", "-c", "openai:small", "--base-url", "http://127.0.0.1:9/v1")
    result = invoke(
        "grade", str(suite(tmp_path / "s.jsonl", 2)), "--shared", "--db", postgres_url, *sides, *extra
    )
    assert result.exit_code == 2 and message in result.stderr


def test_shared_on_sqlite_is_a_usage_error_that_says_why(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    sides = ("-b", "openai:big", "-c", "openai:small", "--base-url", "http://127.0.0.1:9/v1")
    result = invoke(
        "grade", str(suite(tmp_path / "s.jsonl", 2)), "--shared", "--run-id", "r", "--db", db, *sides
    )
    assert result.exit_code == 2 and "PostgreSQL" in result.stderr and "SQLite" in result.stderr
