"""The CLI shows a failed case's whole error (issue 21, item 3) and grades with the ``llm`` judge
against a llama-cpp-python imitation (item 2), over the loopback server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_connect.grading.judges._llm import forget_response_formats
from tests.cli._util import invoke, live_suite, write_suite
from tests.fixtures.openai_server import OpenAIServer

KEY = "sk-test-SECRETSECRETSECRET0123456789"
LEAKED = "sk-live-ABCDEFGHIJKLMNOPQRSTUVWX0123456789"
VALIDATION = (
    "1 validation errors:\n"
    "  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}\n"
    f"  upstream key {LEAKED}"
)


@pytest.fixture(autouse=True)
def _fresh_memory():
    forget_response_formats()
    yield
    forget_response_formats()


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def _grade_failing(tmp_path: Path, db: str, server: OpenAIServer, *extra: str):  # type: ignore[no-untyped-def]
    suite = write_suite(tmp_path / "s.jsonl", [{"id": "c0", "prompt": "q0", "baseline_response": "x"}])
    server.queue_fault(status=500, body={"error": {"message": VALIDATION, "type": "internal_server_error"}})
    return invoke(
        "grade",
        str(suite),
        "-c",
        "openai:cand",
        "--max-retries",
        "0",
        "--db",
        db,
        "--run-id",
        "r1",
        "--base-url",
        server.base_url,
        "--api-key",
        KEY,
        *extra,
    )


def test_grade_json_and_the_ledger_hold_the_whole_masked_error(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    result = _grade_failing(tmp_path, db, openai_server, "--json")
    assert result.exit_code == 3
    [failure] = json.loads(result.stdout)["failures"]
    expected = VALIDATION.replace(LEAKED, "[REDACTED]")
    assert failure["message"] == f"openai:cand: Error code: 500 - {expected}"
    listed = invoke("ledger", "failures", "--db", db, "--json")
    assert listed.exit_code == 0
    [row] = json.loads(listed.stdout)
    assert row["message"] == failure["message"] and len(row["message"].splitlines()) == 3
    for text in (result.stdout, result.stderr, listed.stdout):
        assert LEAKED not in text and KEY not in text


def test_grades_failure_lines_carry_every_line_of_the_error(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    result = _grade_failing(tmp_path, db, openai_server)
    assert result.exit_code == 3
    assert "Input should be 'text' or 'json_object'" in result.stderr
    assert "upstream key [REDACTED]" in result.stderr and LEAKED not in result.stderr


def test_the_llm_judge_grades_against_a_llama_cpp_server_without_a_failed_case(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    openai_server.imitate_llama_cpp()
    openai_server.responder = lambda body: (
        {"quality_score": 0.5, "notes": "ok"} if "response_format" in body else f"answer {body['model']}"
    )
    suite = live_suite(tmp_path / "s.jsonl", 3)
    result = invoke(
        "grade",
        str(suite),
        "-b",
        "openai:big",
        "-c",
        "openai:small",
        "--judge",
        "llm:openai:gemma",
        "--concurrency",
        "1",
        "--db",
        db,
        "--base-url",
        openai_server.base_url,
        "--api-key",
        KEY,
        "--json",
    )
    data = json.loads(result.stdout)
    assert data["failures"] == [], result.stderr
    judged = [r for r in openai_server.requests if "response_format" in (r.body or {})]
    assert [r.body["response_format"]["type"] for r in judged] == ["json_schema"] + ["json_object"] * 3
    assert [r.status for r in judged] == [500, 200, 200, 200]  # the refusal was not retried


def test_ledger_failures_prints_every_line_of_the_message(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    _grade_failing(tmp_path, db, openai_server)
    listed = invoke("ledger", "failures", "--db", db)
    assert listed.exit_code == 0
    assert "r1\tc0\t" in listed.stdout
    assert "    openai:cand: Error code: 500 - 1 validation errors:\n" in listed.stdout  # its own lines
    assert "Input should be 'text' or 'json_object'" in listed.stdout
    assert "upstream key [REDACTED]" in listed.stdout and LEAKED not in listed.stdout
