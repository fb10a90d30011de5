"""Suite cases that are conversations with tools, and --samples, through the batch engine."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from llm_connect.adapters import OpenAIAdapter
from llm_connect.errors import ConfigurationError, SuiteError
from llm_connect.grading import BatchGrader, ExactMatchJudge, ResilientAdapter, RetryPolicy, load_suite
from llm_connect.grading._batch import LiveSide
from llm_connect.grading._samples import merge_samples
from llm_connect.ledger import QualityLedger
from llm_connect.types import Conversation, ToolCall
from tests.fixtures.openai_server import OpenAIServer, chat_completion

FAST = RetryPolicy(max_retries=0, base_delay_s=0.01, max_delay_s=0.05)
REFUND = {
    "type": "function",
    "function": {
        "name": "refund",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}},
    },
}
HISTORY = [
    {"role": "user", "content": "Where is order 42?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"id": 42}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "lost"}'},
    {"role": "user", "content": "Then refund it."},
]
WIRE = [{**m, "content": ""} if m["role"] == "assistant" and m["content"] is None else m for m in HISTORY]
"""HISTORY as sent: an assistant turn that only calls tools carries ``""`` (some servers refuse null)."""


def write_suite(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def live(server: OpenAIServer, model: str) -> LiveSide:
    adapter = OpenAIAdapter(model, base_url=server.base_url, api_key="sk-test")
    return LiveSide(f"openai:{model}", ResilientAdapter(adapter, policy=FAST))


def test_a_suite_case_may_be_a_conversation_with_tools(tmp_path: Path) -> None:
    suite = load_suite(
        write_suite(
            tmp_path / "s.jsonl",
            [
                {
                    "id": "chat",
                    "messages": HISTORY,
                    "tools": [REFUND],
                    "tool_choice": "auto",
                    "session": "s1",
                },
                {"id": "one", "prompt": "Refund order 7", "tools": [REFUND]},
                {"id": "plain", "prompt": "hello"},
            ],
        )
    )
    chat, one, plain = suite.cases
    assert chat.conversation == Conversation(HISTORY, tools=[REFUND], tool_choice="auto")
    assert chat.request is chat.conversation and chat.prompt == chat.conversation.render()
    assert chat.session == "s1"
    assert one.prompt == "Refund order 7"
    assert one.conversation is not None and one.conversation.messages == [
        {"role": "user", "content": "Refund order 7"}
    ]
    assert plain.conversation is None and plain.request == "hello"


def test_recorded_responses_may_hold_tool_calls(tmp_path: Path) -> None:
    call = {"id": "x", "type": "function", "function": {"name": "refund", "arguments": '{"order_id": 42}'}}
    suite = load_suite(
        write_suite(
            tmp_path / "s.jsonl",
            [
                {
                    "id": "chat",
                    "messages": HISTORY,
                    "tools": [REFUND],
                    "baseline_response": {"tool_calls": [call]},
                    "candidate_response": {
                        "text": "Done.",
                        "tool_calls": [{"name": "refund", "arguments": {"order_id": 42}}],
                    },
                }
            ],
        )
    )
    base = suite.recorded("chat", "baseline")
    cand = suite.recorded("chat", "candidate")
    assert base.text == "" and base.tool_calls == (ToolCall("refund", '{"order_id": 42}'),)
    assert cand.text == "Done." and cand.tool_calls[0].parsed_arguments() == {"order_id": 42}


@pytest.mark.parametrize(
    ("row", "field"),
    [
        (
            {"id": 1, "messages": [{"role": "user", "content": "x"}, {"role": "bot", "content": "y"}]},
            "messages[1].role",
        ),
        ({"id": 1, "prompt": "x", "messages": [{"role": "user", "content": "x"}]}, "messages"),
        ({"id": 1}, "prompt"),
        ({"id": 1, "prompt": "x", "tools": [{"type": "function", "function": {}}]}, "tools[0].function.name"),
        ({"id": 1, "prompt": "x", "tool_choice": "required"}, "tool_choice"),
        ({"id": 1, "prompt": "x", "session": ""}, "session"),
        (
            {"id": 1, "prompt": "x", "baseline_response": {"tool_calls": [{"arguments": "{}"}]}},
            "baseline_response",
        ),
    ],
)
def test_a_malformed_conversation_case_names_file_line_and_field(
    tmp_path: Path, row: dict[str, Any], field: str
) -> None:
    path = write_suite(tmp_path / "s.jsonl", [{"id": 0, "prompt": "fine"}, row])
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert info.value.line == 2 and info.value.field == field
    assert "s.jsonl" in str(info.value)


def test_conversation_cases_grade_live_with_tools_sent_and_stored_in_the_result(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    def answer(body: dict[str, Any]) -> Any:
        if body["model"] == "cand":
            return chat_completion(
                body, None, tool_calls=[{"name": "refund", "arguments": '{"order_id": 42}'}]
            )
        return "I will refund it."

    openai_server.responder = answer
    suite = load_suite(
        write_suite(tmp_path / "s.jsonl", [{"id": "chat", "messages": HISTORY, "tools": [REFUND]}])
    )
    ledger = QualityLedger(f"sqlite:///{tmp_path / 'l.db'}")
    grader = BatchGrader(
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "cand")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
    )
    report = grader.run(suite)
    assert not report.failures
    bodies = [r.body for r in openai_server.requests]
    assert all(b["messages"] == WIRE and b["tools"] == [REFUND] for b in bodies)
    (result,) = [r.result for r in report.results]
    assert result.conversation == suite.cases[0].conversation
    assert result.candidate_response.tool_calls == (ToolCall("refund", '{"order_id": 42}'),)
    assert result.prompt == suite.cases[0].prompt
    # A second run reads both answers from the cache: the conversation is the key.
    calls = len(openai_server.requests)
    BatchGrader(
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "cand")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
    ).run(suite)
    assert len(openai_server.requests) == calls


def test_samples_make_k_calls_per_side_and_one_grade_per_case(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    counters: dict[str, itertools.count[int]] = {"base": itertools.count(), "cand": itertools.count()}

    def answer(body: dict[str, Any]) -> str:
        n = next(counters[body["model"]])
        # The baseline always says "yes"; the candidate says "yes" on two calls of three.
        return "yes" if body["model"] == "base" or n % 3 != 2 else "no"

    openai_server.responder = answer
    suite = load_suite(
        write_suite(tmp_path / "s.jsonl", [{"id": f"c{i}", "prompt": f"q{i}"} for i in range(4)])
    )
    ledger = QualityLedger(f"sqlite:///{tmp_path / 'l.db'}")
    grader = BatchGrader(
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "cand")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        samples=3,
        concurrency=1,
    )
    report = grader.run(suite)
    assert len(openai_server.requests) == 4 * 2 * 3
    assert report.model_calls == 24
    assert len(report.results) == 4  # one grade per case, not one per sample
    scores = [r.result.quality_score for r in report.results]
    assert sum(scores) == pytest.approx(8 / 3)  # 8 "yes" of 12 candidate samples
    assert all(
        r.result.details["samples"] == 3 and len(r.result.details["sample_grades"]) == 3
        for r in report.results
    )
    (series,) = ledger.case_series(task="default", baseline_model="base")
    assert series.grades == (1, 1, 1, 1)  # the evidence counts 4 cases, not 12 samples
    assert sum(series.sum_quality) == pytest.approx(8 / 3)
    # Samples are cached one by one: a rerun makes no call.
    BatchGrader(
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "cand")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        samples=3,
    ).run(suite)
    assert len(openai_server.requests) == 24


def test_samples_out_of_range_are_a_configuration_error(openai_server: OpenAIServer) -> None:
    for bad in (0, 101, True, 2.0):
        with pytest.raises(ConfigurationError, match="samples"):
            BatchGrader(
                baseline=live(openai_server, "b"),
                candidates=[live(openai_server, "c")],
                judges=[ExactMatchJudge()],
                samples=bad,  # type: ignore[arg-type]
            )


def test_merged_samples_average_per_side_scores() -> None:
    from llm_connect.grading import GradingResult
    from llm_connect.types import LLMResponse

    def result(q: float, cand: float, cost: float) -> GradingResult:
        resp = LLMResponse("t", "m", "p", latency_ms=10 * q, cost_usd=cost)
        return GradingResult(
            q, "n", "vrty", resp, resp, details={"candidate_score": cand, "baseline_score": 0.5}
        )

    merged = merge_samples([result(1.0, 0.9, 0.01), result(0.5, 0.7, 0.03)])
    assert merged.quality_score == pytest.approx(0.75)
    assert merged.details["candidate_score"] == pytest.approx(0.8)
    assert merged.candidate_response.cost_usd == pytest.approx(0.02)
    assert "mean of 2 samples" in merged.notes


def test_the_llm_judge_sees_the_conversation_and_the_tool_calls_fenced(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    from llm_connect.grading import LLMJudge

    def answer(body: dict[str, Any]) -> Any:
        if body["model"] == "judge":
            return {"quality_score": 0.25, "notes": "wrong tool"}
        if body["model"] == "cand":
            return chat_completion(body, None, tool_calls=[{"name": "delete_account", "arguments": "{}"}])
        return chat_completion(body, None, tool_calls=[{"name": "refund", "arguments": '{"order_id": 42}'}])

    openai_server.responder = answer
    judge = LLMJudge(OpenAIAdapter("judge", base_url=openai_server.base_url, api_key="sk-test"))
    suite = load_suite(
        write_suite(tmp_path / "s.jsonl", [{"id": "chat", "messages": HISTORY, "tools": [REFUND]}])
    )
    report = BatchGrader(
        baseline=live(openai_server, "base"), candidates=[live(openai_server, "cand")], judges=[judge]
    ).run(suite)
    assert not report.failures and report.results[0].result.quality_score == 0.25
    (asked,) = [r.body for r in openai_server.requests if r.body["model"] == "judge"]
    material = asked["messages"][-1]["content"]
    assert "user: Then refund it." in material and "assistant calls lookup" in material
    assert '[tool call] refund({"order_id": 42})' in material
    assert "[tool call] delete_account({})" in material
    assert "tools" not in asked  # the judge is not offered the graded model's tools


def test_the_embedding_judge_embeds_tool_calls_so_different_calls_differ(openai_server: OpenAIServer) -> None:
    from llm_connect.adapters import OpenAIEmbeddingAdapter
    from llm_connect.grading import EmbeddingSimilarityJudge
    from llm_connect.types import LLMResponse, RunConfig

    judge = EmbeddingSimilarityJudge(OpenAIEmbeddingAdapter("emb", base_url=openai_server.base_url))
    refund = LLMResponse("", "m", "p", tool_calls=(ToolCall("refund", '{"order_id": 42}'),))
    delete = LLMResponse("", "m", "p", tool_calls=(ToolCall("delete_account", "{}"),))
    assert judge.judge(refund, refund, prompt="p", run_config=RunConfig()).quality_score == pytest.approx(1.0)
    assert judge.judge(refund, delete, prompt="p", run_config=RunConfig()).quality_score < 0.99
    embedded = openai_server.requests_to("/embeddings")[-1].body["input"]
    assert embedded == ['[tool call] refund({"order_id": 42})', "[tool call] delete_account({})"]
