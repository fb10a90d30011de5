"""Conversations stored once with their grades, and stability analyses, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, text

from llm_connect.errors import LedgerError
from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger
from llm_connect.types import Conversation, LLMResponse, ToolCall

REFUND = {"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}
CONV = Conversation(
    [{"role": "system", "content": "Support."}, {"role": "user", "content": "Refund order 42"}],
    tools=[REFUND],
    tool_choice="auto",
)


def result(score: float, conversation: Conversation | None = CONV) -> GradingResult:
    base = LLMResponse("", "base", "openai", tool_calls=(ToolCall("refund", '{"order_id": 42}'),))
    cand = LLMResponse("Done", "cand", "openai")
    prompt = conversation.render() if conversation is not None else "plain"
    return GradingResult(score, "n", "exact", base, cand, prompt=prompt, conversation=conversation)


def test_a_conversation_is_stored_once_and_its_digest_is_the_prompt_digest(ledger_url: str) -> None:
    with QualityLedger(ledger_url) as ledger:
        ledger.record_many([result(1.0), result(0.0)], task="t", run_id="r1")
        ledger.record(result(0.5), task="t", run_id="r2", case_id="c")
        ledger.record(result(0.5, None), task="t")
        rows = ledger.results(task="t")
        assert {r.prompt_sha256 for r in rows if r.prompt != "plain"} == {CONV.digest}
        assert ledger.conversation(CONV.digest) == CONV
        assert ledger.conversation("0" * 64) is None
        engine = create_engine(ledger_url)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM conversations")).scalar_one() == 1
            # SQL users join a grade to its whole request.
            joined = conn.execute(
                text(
                    "SELECT c.tools FROM grades g JOIN conversations c ON c.sha256 = g.prompt_sha256 "
                    "WHERE g.case_id = 'c'"
                )
            ).scalar_one()
        engine.dispose()
        assert (json.loads(joined) if isinstance(joined, str) else joined) == [REFUND]


def test_stability_analyses_are_stored_with_their_runs_and_the_newest_is_found(ledger_url: str) -> None:
    with QualityLedger(ledger_url) as ledger:
        first = ledger.record_stability(
            task="support",
            model="cand",
            adapter_id="openai:cand",
            prompt_sha256=CONV.digest,
            runs=3,
            successful_runs=2,
            overall_score=0.75,
            verdict="RISKY",
            report={"version": 1, "overall": 0.75},
            responses=[
                {"run_index": 0, "text": "a", "latency_ms": 10.0, "served_model": "cand-2026"},
                {"run_index": 1, "tool_calls": [{"name": "refund", "arguments": "{}"}]},
                {"run_index": 2, "error": "ServerError: 500 key sk-abcdefghijklmnopqrstuvwx"},
            ],
        )
        second = ledger.record_stability(
            task="support",
            model="cand",
            adapter_id="openai:cand",
            prompt_sha256=CONV.digest,
            runs=3,
            successful_runs=3,
            overall_score=0.95,
            verdict="SAFE",
            report={"version": 1},
        )
        assert second > first
        latest = ledger.latest_stability("support", "cand")
        assert latest is not None and latest.verdict == "SAFE" and latest.id == second
        assert ledger.latest_stability("other", "cand") is None
        responses = ledger.stability_responses(first)
        assert [r.run_index for r in responses] == [0, 1, 2]
        assert responses[1].tool_calls == [{"name": "refund", "arguments": "{}"}]
        assert responses[2].error is not None and "sk-abcdefghijklmnop" not in responses[2].error
        assert [r.verdict for r in ledger.stability_runs(task="support")] == ["SAFE", "RISKY"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"verdict": "FINE"}, "verdict"),
        ({"overall_score": 1.5}, "overall_score"),
        ({"successful_runs": 4}, "successful_runs"),
        ({"task": " "}, "task"),
        ({"report": {"x": float("nan")}}, "report.x"),
    ],
)
def test_a_bad_stability_record_is_refused_and_writes_nothing(
    ledger_url: str, change: dict[str, object], message: str
) -> None:
    values: dict[str, object] = {
        "task": "t",
        "model": "m",
        "adapter_id": "openai:m",
        "prompt_sha256": "x" * 64,
        "runs": 3,
        "successful_runs": 3,
        "overall_score": 0.9,
        "verdict": "SAFE",
        "report": {},
    }
    values.update(change)
    with QualityLedger(ledger_url) as ledger:
        with pytest.raises(LedgerError, match=message):
            ledger.record_stability(**values)  # type: ignore[arg-type]
        assert ledger.stability_runs() == []
