"""Conversations with tools: validation that names the field, digests, and the adapters that send them."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from llm_connect.adapters import OpenAIAdapter, RecordedAdapter
from llm_connect.errors import ConfigurationError
from llm_connect.ledger import QualityLedger
from llm_connect.types import Conversation, ConversationError, RunConfig, ToolCall
from tests.fixtures.openai_server import OpenAIServer, chat_completion

REFUND = {
    "type": "function",
    "function": {
        "name": "refund",
        "description": "Refund an order",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}},
    },
}
DELETE = {"type": "function", "function": {"name": "delete_account", "parameters": {"type": "object"}}}

HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a support agent."},
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


def _wire(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as sent: an assistant turn that only calls tools carries ``"content": ""``
    (llama-cpp-python's server refuses ``null``)."""
    return [
        {**m, "content": ""}
        if m["role"] == "assistant" and m["content"] is None and m.get("tool_calls")
        else m
        for m in messages
    ]


def test_a_valid_conversation_keeps_its_messages_tools_and_choice() -> None:
    conv = Conversation(HISTORY, tools=[REFUND, DELETE], tool_choice="auto")
    assert conv.messages == HISTORY
    assert conv.tool_names == ["refund", "delete_account"]
    assert conv.last_user_text == "Then refund it."
    assert conv.has_system
    assert "user: Then refund it." in conv.render()
    assert "assistant calls lookup" in conv.render() and "[tools: refund, delete_account]" in conv.render()
    assert Conversation.from_dict(conv.to_dict()) == conv
    assert pickle.loads(pickle.dumps(conv)) == conv
    copy = conv.messages
    copy[0]["content"] = "changed"
    assert conv.messages[0]["content"] == "You are a support agent."


def test_the_digest_covers_tools_and_tool_choice() -> None:
    plain = Conversation(HISTORY)
    with_tools = Conversation(HISTORY, tools=[REFUND])
    forced = Conversation(HISTORY, tools=[REFUND], tool_choice="required")
    assert len({plain.digest, with_tools.digest, forced.digest}) == 3
    assert Conversation(list(HISTORY), tools=[REFUND]).digest == with_tools.digest


@pytest.mark.parametrize(
    ("messages", "tools", "choice", "field"),
    [
        ([], None, None, "messages"),
        ([{"role": "robot", "content": "x"}], None, None, "messages[0].role"),
        ([{"role": "user"}], None, None, "messages[0].content"),
        ([{"role": "user", "content": "x", "colour": 1}], None, None, "messages[0].colour"),
        (
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}],
            None,
            None,
            "messages[1].role",
        ),
        (
            [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c9", "content": "r"}],
            None,
            None,
            "messages[1].tool_call_id",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}],
                },
                {"role": "tool", "tool_call_id": "c", "content": "r"},
            ],
            None,
            None,
            "messages[1].tool_calls[0].function.arguments",
        ),
        (
            [{"role": "user", "content": "x"}],
            [{"type": "function", "function": {}}],
            None,
            "tools[0].function.name",
        ),
        ([{"role": "user", "content": "x"}], [REFUND, REFUND], None, "tools[1].function.name"),
        ([{"role": "user", "content": "x"}], [REFUND], "sometimes", "tool_choice"),
        (
            [{"role": "user", "content": "x"}],
            [REFUND],
            {"type": "function", "function": {"name": "nope"}},
            "tool_choice.function.name",
        ),
    ],
)
def test_a_malformed_conversation_names_the_field(messages: Any, tools: Any, choice: Any, field: str) -> None:
    with pytest.raises(ConversationError) as info:
        Conversation(messages, tools=tools, tool_choice=choice)
    assert info.value.field == field
    assert str(info.value).startswith(field)


def test_the_cache_key_of_a_conversation() -> None:
    config = RunConfig(temperature=0)
    one_user = Conversation([{"role": "user", "content": "hi"}])
    # The same request as a string prompt: the same cached answer.
    assert QualityLedger.cache_key("openai:m", one_user, config) == QualityLedger.cache_key(
        "openai:m", "hi", config
    )
    keys = {
        QualityLedger.cache_key("openai:m", Conversation(HISTORY), config),
        QualityLedger.cache_key("openai:m", Conversation(HISTORY, tools=[REFUND]), config),
        QualityLedger.cache_key(
            "openai:m", Conversation(HISTORY, tools=[REFUND], tool_choice="none"), config
        ),
        QualityLedger.cache_key("openai:m", Conversation(HISTORY, tools=[REFUND]), config, sample=1),
    }
    assert len(keys) == 4


def test_the_openai_adapter_sends_the_conversation_and_returns_tool_calls(
    openai_server: OpenAIServer,
) -> None:
    openai_server.responder = lambda body: chat_completion(
        body, None, tool_calls=[{"name": "refund", "arguments": '{"order_id": 42}'}]
    )
    adapter = OpenAIAdapter("gpt-4o-mini", base_url=openai_server.base_url)
    conv = Conversation(HISTORY[1:], tools=[REFUND], tool_choice="auto")
    response = adapter.complete(conv, RunConfig(temperature=0, system_prompt="Be brief."))
    body = openai_server.requests[0].body
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, *_wire(HISTORY[1:])]
    assert body["tools"] == [REFUND] and body["tool_choice"] == "auto"
    assert response.tool_calls == (ToolCall("refund", '{"order_id": 42}'),)
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls[0].parsed_arguments() == {"order_id": 42}


def test_a_conversations_own_system_message_wins(openai_server: OpenAIServer) -> None:
    adapter = OpenAIAdapter("gpt-4o-mini", base_url=openai_server.base_url)
    adapter.complete(Conversation(HISTORY), RunConfig(system_prompt="ignored"))
    assert openai_server.requests[0].body["messages"] == _wire(HISTORY)


def test_tools_in_two_places_are_a_configuration_error(openai_server: OpenAIServer) -> None:
    adapter = OpenAIAdapter("gpt-4o-mini", base_url=openai_server.base_url)
    with pytest.raises(ConfigurationError, match="tools"):
        adapter.complete(Conversation(HISTORY, tools=[REFUND]), RunConfig(model_params={"tools": [DELETE]}))
    assert openai_server.requests == []


def test_the_budget_estimate_counts_the_history_and_tools(openai_server: OpenAIServer) -> None:
    adapter = OpenAIAdapter("gpt-4o-mini", base_url=openai_server.base_url)
    short = adapter.estimate(Conversation([HISTORY[-1]]), RunConfig(max_tokens=10))[1]
    long = adapter.estimate(Conversation(HISTORY), RunConfig(max_tokens=10))[1]
    tools = adapter.estimate(Conversation(HISTORY, tools=[REFUND]), RunConfig(max_tokens=10))[1]
    assert short < long < tools


def test_recorded_conversations_replay_tool_calls(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    rows = [
        {
            "messages": HISTORY,
            "tools": [REFUND],
            "tool_calls": [
                {
                    "id": "x",
                    "type": "function",
                    "function": {"name": "refund", "arguments": '{"order_id": 42}'},
                }
            ],
        },
        {"prompt": "hello", "text": "hi"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    adapter = RecordedAdapter.from_jsonl(path)
    response = adapter.complete(Conversation(HISTORY, tools=[REFUND]), RunConfig())
    assert response.tool_calls == (ToolCall("refund", '{"order_id": 42}'),) and response.text == ""
    assert adapter.complete("hello", RunConfig()).text == "hi"


def test_a_bad_recorded_conversation_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_text(
        json.dumps({"prompt": "a", "text": "b"})
        + "\n"
        + json.dumps({"messages": [{"role": "user", "content": 3}], "text": "x"})
        + "\n"
    )
    with pytest.raises(ConfigurationError, match=r"rec.jsonl:2: messages\[0\].content"):
        RecordedAdapter.from_jsonl(path)
