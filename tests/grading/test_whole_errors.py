"""A failed case keeps the server's whole message (issue 21, item 3): the batch report's failure
and the ledger's ``run_failures.message`` hold every line, credentials masked, bounded at
MAX_ERROR_MESSAGE_CHARS with a marker saying it was cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_connect.adapters import OpenAIAdapter
from llm_connect.errors import MAX_ERROR_MESSAGE_CHARS, ServerError, whole_message
from llm_connect.grading import Case, ExactMatchJudge, ResilientAdapter, RetryPolicy, Suite, grade_suite
from llm_connect.grading._batch import LiveSide, RecordedSide
from llm_connect.grading._report import case_failure
from llm_connect.ledger import QualityLedger
from llm_connect.types import LLMResponse
from tests.fixtures.openai_server import OpenAIServer

VALIDATION = (
    "1 validation errors:\n"
    "  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}\n"
    "  (second detail line)"
)
SECRET = "sk-live-ABCDEFGHIJKLMNOPQRSTUVWX0123456789"


def _suite() -> Suite:
    case = Case(id="c0", prompt="question", task="t", line=1)
    base = LLMResponse(text="answer", model="base", provider="recorded")
    return Suite(path="mem.jsonl", cases=[case], recordings={"c0": {"base": base}})


def _failure_message(server: OpenAIServer, tmp_path: Path, body: object) -> str:
    server.queue_fault(status=500, body=body)
    suite = _suite()
    adapter = OpenAIAdapter("cand", base_url=server.base_url, api_key="test")
    candidate = LiveSide("openai:cand", ResilientAdapter(adapter, policy=RetryPolicy(max_retries=0)))
    ledger = QualityLedger(f"sqlite:///{tmp_path / 'ledger.db'}")
    report = grade_suite(
        suite,
        baseline=RecordedSide("base", suite),
        candidates=[candidate],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        run_id="r1",
    )
    [failure] = report.failures
    [row] = ledger.failures("r1")
    assert row.message == failure.message and row.error_type == "ServerError"
    return row.message


def test_a_multi_line_server_error_reaches_the_ledger_whole(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    message = _failure_message(openai_server, tmp_path, {"error": {"message": VALIDATION}})
    assert message == f"openai:cand: Error code: 500 - {VALIDATION}"
    assert len(message.splitlines()) == 3


def test_a_secret_in_the_body_is_masked_in_the_ledger(openai_server: OpenAIServer, tmp_path: Path) -> None:
    message = _failure_message(
        openai_server, tmp_path, {"error": {"message": f"bad key {SECRET}\n{VALIDATION}"}}
    )
    assert SECRET not in message and "[REDACTED]" in message
    assert "(second detail line)" in message


def test_a_10000_character_body_is_cut_to_the_bound_with_a_marker(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    message = _failure_message(openai_server, tmp_path, {"error": {"message": "y" * 10_000}})
    assert len(message) == MAX_ERROR_MESSAGE_CHARS
    assert message.startswith("openai:cand: Error code: 500 - yyy")
    whole = len("openai:cand: Error code: 500 - ") + 10_000
    kept = message[: message.index(" ... [cut: ")]
    assert message.endswith(f" ... [cut: {whole - len(kept)} more characters]")


@pytest.mark.parametrize("length", [0, 10, 1999, 2000, 2001, 10_000, 123_456])
def test_whole_message_stays_within_the_bound(length: int) -> None:
    text = "z" * length
    cut = whole_message(text)
    assert len(cut) <= MAX_ERROR_MESSAGE_CHARS
    if length <= MAX_ERROR_MESSAGE_CHARS:
        assert cut == text
    else:
        kept = cut[: cut.index(" ... [cut: ")]
        assert cut.endswith(f"[cut: {length - len(kept)} more characters]")


def test_case_failure_keeps_every_line() -> None:
    case = Case(id="c9", prompt="p", task="t", line=9)
    error = ServerError(f"openai:m: Error code: 500 - {VALIDATION}", status_code=500)
    failure = case_failure(case, "candidate", error, "openai:m")
    assert failure.message == str(error) and "\n" in failure.message
