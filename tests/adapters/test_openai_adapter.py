"""OpenAIAdapter against the loopback OpenAI-compatible server (real HTTP, real SDK)."""

from __future__ import annotations

import email.utils
import json
import logging
import time

import openai
import pytest

from llm_connect.adapters import OpenAIAdapter, OpenAIEmbeddingAdapter
from llm_connect.errors import (
    AdapterConnectionError,
    AdapterTimeoutError,
    AuthenticationError,
    BadRequestError,
    BudgetExceededError,
    ConfigurationError,
    MalformedResponseError,
    RateLimitError,
    ServerError,
)
from llm_connect.grading import ExactMatchJudge, PairedGrader
from llm_connect.types import BudgetTracker, RunConfig, ToolCall
from tests.fixtures.loops import run as run_closing
from tests.fixtures.openai_server import chat_completion


@pytest.fixture
def adapter(openai_server):
    return OpenAIAdapter("gpt-test", base_url=openai_server.base_url, api_key="sk-test-key-123")


def _only_chat(server):
    (req,) = server.requests_to("/chat/completions")
    return req


# -- what is sent ---------------------------------------------------------------


def test_request_carries_messages_sampling_params_and_model_params(adapter, openai_server):
    config = RunConfig(
        temperature=0.0,
        max_tokens=64,
        system_prompt="Be terse.",
        model_params={"seed": 7, "top_p": 0.5, "stop": ["\n\n"]},
    )
    adapter.complete("What is 2+2?", config)
    body = _only_chat(openai_server).body
    assert body["model"] == "gpt-test"
    assert body["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "What is 2+2?"},
    ]
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == 64
    assert (body["seed"], body["top_p"], body["stop"]) == (7, 0.5, ["\n\n"])


def test_unset_options_are_not_sent(adapter, openai_server):
    adapter.complete("hi", RunConfig())
    body = _only_chat(openai_server).body
    assert set(body) == {"model", "messages"}
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_authorization_header_carries_the_key(adapter, openai_server):
    adapter.complete("hi", RunConfig())
    assert _only_chat(openai_server).headers["authorization"] == "Bearer sk-test-key-123"


def test_environment_key_and_base_url_are_read(openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    OpenAIAdapter("gpt-test").complete("hi", RunConfig())
    assert _only_chat(openai_server).headers["authorization"] == "Bearer sk-from-env"


def test_loopback_server_needs_no_key(openai_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    response = OpenAIAdapter("gpt-test", base_url=openai_server.base_url).complete("hi", RunConfig())
    assert response.text == "echo: hi"


def test_missing_key_for_a_remote_server_fails_before_any_call(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIAdapter("gpt-4o-mini")


def test_secret_model_params_are_sent_but_never_logged(adapter, openai_server, caplog):
    caplog.set_level(logging.DEBUG)
    config = RunConfig(model_params={"x_api_key": "sk-secret-param-999"})
    response = adapter.complete("hi", config)
    assert _only_chat(openai_server).body["x_api_key"] == "sk-secret-param-999"
    assert "sk-secret-param-999" not in caplog.text
    assert "sk-test-key-123" not in caplog.text
    assert "sk-secret-param-999" not in json.dumps(response.to_dict()) + config.to_json()


# -- what is recorded -----------------------------------------------------------


def test_response_records_text_model_usage_latency_finish_reason(adapter):
    response = adapter.complete("hello there", RunConfig())
    assert response.text == "echo: hello there"
    assert (response.model, response.provider) == ("gpt-test", "openai")
    assert response.usage is not None
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (2, 3)
    assert response.latency_ms is not None and response.latency_ms > 0
    assert response.finish_reason == "stop"
    assert response.cost_usd is None  # no pricing given


def test_cost_from_flat_pricing(openai_server):
    adapter = OpenAIAdapter(
        "gpt-test", base_url=openai_server.base_url, pricing={"input": 1.0, "output": 2.0}
    )
    response = adapter.complete("hello there", RunConfig())  # 2 prompt + 3 completion tokens
    assert response.cost_usd == pytest.approx((2 * 1.0 + 3 * 2.0) / 1_000_000)


def test_cost_from_per_model_pricing(openai_server):
    pricing = {"other": {"input": 9.0, "output": 9.0}, "gpt-test": {"input": 0.5, "output": 1.5}}
    adapter = OpenAIAdapter("gpt-test", base_url=openai_server.base_url, pricing=pricing)
    response = adapter.complete("hello there", RunConfig())
    assert response.cost_usd == pytest.approx((2 * 0.5 + 3 * 1.5) / 1_000_000)


@pytest.mark.parametrize(
    "pricing",
    [{"input": -1, "output": 1}, {"input": 1}, {"gpt-test": {"input": "cheap", "output": 1}}, ["x"]],
)
def test_bad_pricing_is_a_configuration_error(openai_server, pricing):
    with pytest.raises(ConfigurationError, match="pricing"):
        OpenAIAdapter("gpt-test", base_url=openai_server.base_url, pricing=pricing)


def test_tool_calls_are_recorded(adapter, openai_server):
    openai_server.responder = lambda body: chat_completion(
        body,
        None,
        tool_calls=[
            {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            {"name": "get_time", "arguments": "{}"},
        ],
    )
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    response = adapter.complete("weather?", RunConfig(model_params={"tools": tools}))
    assert response.tool_calls == (
        ToolCall("get_weather", '{"city": "Paris"}'),
        ToolCall("get_time", "{}"),
    )
    assert response.text == ""
    assert response.finish_reason == "tool_calls"
    assert _only_chat(openai_server).body["tools"] == tools


# -- errors -----------------------------------------------------------------------


def test_429_becomes_rate_limit_error_with_retry_after_and_request_id(adapter, openai_server):
    openai_server.queue_fault(429, headers={"Retry-After": "7"})
    with pytest.raises(RateLimitError) as info:
        adapter.complete("hi", RunConfig())
    err = info.value
    assert err.retry_after == 7.0 and err.retryable
    assert err.status_code == 429
    assert err.request_id == _only_chat(openai_server).request_id
    assert err.adapter_id == "openai:gpt-test"


def test_exhausted_quota_is_a_rate_limit_that_is_not_retryable(adapter, openai_server):
    quota = {
        "error": {
            "message": "You exceeded your current quota",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    openai_server.queue_fault(429, body=quota)
    with pytest.raises(RateLimitError) as info:
        adapter.complete("hi", RunConfig())
    assert info.value.retryable is False


def test_retry_after_as_http_date(adapter, openai_server):
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    openai_server.queue_fault(429, headers={"Retry-After": when})
    with pytest.raises(RateLimitError) as info:
        adapter.complete("hi", RunConfig())
    assert 20 <= info.value.retry_after <= 31


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (500, ServerError),
        (503, ServerError),
        (401, AuthenticationError),
        (403, AuthenticationError),
        (400, BadRequestError),
        (404, BadRequestError),
        (422, BadRequestError),
    ],
)
def test_status_codes_map_to_error_classes(adapter, openai_server, status, error):
    openai_server.queue_fault(status)
    with pytest.raises(error) as info:
        adapter.complete("hi", RunConfig())
    assert type(info.value) is error
    assert info.value.status_code == status
    assert info.value.request_id == _only_chat(openai_server).request_id


def test_malformed_json_body_is_a_malformed_response_error(adapter, openai_server):
    openai_server.queue_fault(kind="malformed")
    with pytest.raises(MalformedResponseError) as info:
        adapter.complete("hi", RunConfig())
    assert info.value.status_code == 200
    assert info.value.request_id == _only_chat(openai_server).request_id


def test_body_without_choices_is_a_malformed_response_error(adapter, openai_server):
    openai_server.queue_fault(kind="no_choices")
    with pytest.raises(MalformedResponseError, match="no choices") as info:
        adapter.complete("hi", RunConfig())
    assert info.value.request_id == _only_chat(openai_server).request_id


def test_json_that_is_not_a_completion_is_a_malformed_response_error(adapter, openai_server):
    openai_server.queue_fault(kind="malformed", body='["just", "a", "list"]')
    with pytest.raises(MalformedResponseError):
        adapter.complete("hi", RunConfig())


def test_slow_answer_beyond_timeout_is_an_adapter_timeout(adapter, openai_server):
    openai_server.queue_fault(delay_s=2.0)
    with pytest.raises(AdapterTimeoutError) as info:
        adapter.complete("hi", RunConfig(timeout_s=0.2))
    assert info.value.retryable


def test_dropped_connection_is_a_connection_error(adapter, openai_server):
    openai_server.queue_fault(kind="disconnect")
    with pytest.raises(AdapterConnectionError):
        adapter.complete("hi", RunConfig())


def test_unreachable_server_is_a_connection_error():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    adapter = OpenAIAdapter("gpt-test", base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(AdapterConnectionError):
        adapter.complete("hi", RunConfig(timeout_s=5))


def test_error_messages_never_carry_the_api_key(openai_server):
    key = "sk-very-secret-abcdef"
    openai_server.queue_fault(401, body={"error": {"message": f"Incorrect API key provided: {key}"}})
    adapter = OpenAIAdapter("gpt-test", base_url=openai_server.base_url, api_key=key)
    with pytest.raises(AuthenticationError) as info:
        adapter.complete("hi", RunConfig())
    assert key not in str(info.value)


def test_sdk_retries_are_off_by_default(adapter, openai_server):
    openai_server.queue_fault(500)
    with pytest.raises(ServerError):
        adapter.complete("hi", RunConfig())
    assert len(openai_server.requests_to("/chat/completions")) == 1


# -- budget -----------------------------------------------------------------------


def test_budget_tracker_is_charged_and_refuses_once_spent(openai_server):
    adapter = OpenAIAdapter("gpt-test", base_url=openai_server.base_url, pricing={"input": 1e6, "output": 0})
    tracker = BudgetTracker(max_usd=3.0)  # each call: 2 prompt tokens at $1 each
    config = RunConfig(budget_tracker=tracker)
    adapter.complete("hello there", config)
    assert tracker.spent_usd == pytest.approx(2.0)
    adapter.complete("hello there", config)
    with pytest.raises(BudgetExceededError):
        adapter.complete("hello there", config)
    assert len(openai_server.requests_to("/chat/completions")) == 2  # the third never went out


def test_async_budget_tracker_refuses_too(openai_server):
    adapter = OpenAIAdapter("gpt-test", base_url=openai_server.base_url)
    tracker = BudgetTracker(max_tokens=1)
    config = RunConfig(budget_tracker=tracker)
    run_closing(adapter.acomplete("hello there", config))
    with pytest.raises(BudgetExceededError):
        run_closing(adapter.acomplete("hello there", config))
    assert len(openai_server.requests) == 1


# -- async ------------------------------------------------------------------------


def test_acomplete_matches_complete(adapter, openai_server):
    config = RunConfig(temperature=0.0, model_params={"seed": 1})
    sync = adapter.complete("same prompt", config)
    async_ = run_closing(adapter.acomplete("same prompt", config))
    assert (async_.text, async_.usage, async_.model) == (sync.text, sync.usage, sync.model)
    first, second = (r.body for r in openai_server.requests)
    assert first == second


def test_async_errors_are_translated_too(adapter, openai_server):
    openai_server.queue_fault(429, headers={"Retry-After": "2"})
    with pytest.raises(RateLimitError) as info:
        run_closing(adapter.acomplete("hi", RunConfig()))
    assert info.value.retry_after == 2.0
    openai_server.queue_fault(delay_s=2.0)
    with pytest.raises(AdapterTimeoutError):
        run_closing(adapter.acomplete("hi", RunConfig(timeout_s=0.2)))


def test_agrade_runs_both_calls_concurrently(openai_server):
    openai_server.delay_s = 1.0  # long enough to overlap even on a loaded machine
    baseline = OpenAIAdapter("base-model", base_url=openai_server.base_url)
    candidate = OpenAIAdapter("cand-model", base_url=openai_server.base_url)
    result = run_closing(
        PairedGrader(ExactMatchJudge()).agrade(baseline, candidate, "same?", RunConfig(temperature=0.0))
    )
    a, b = openai_server.requests
    assert {a.body["model"], b.body["model"]} == {"base-model", "cand-model"}
    assert a.body["messages"] == b.body["messages"]
    # the second request arrived before the first was answered: they overlapped
    assert max(a.started, b.started) < min(a.finished, b.finished)
    assert result.quality_score == 1.0


def test_one_adapter_works_across_event_loops(adapter):
    for _ in range(3):
        assert run_closing(adapter.acomplete("again", RunConfig())).text == "echo: again"


def test_a_given_client_is_used(openai_server):
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="sk-given", max_retries=0)
    adapter = OpenAIAdapter("gpt-test", client=client)
    adapter.complete("hi", RunConfig())
    run_closing(adapter.acomplete("hi", RunConfig()))
    assert [r.headers["authorization"] for r in openai_server.requests] == ["Bearer sk-given"] * 2
    client.close()  # the caller's client stays the caller's to close


# -- embeddings -------------------------------------------------------------------


def test_embedding_adapter_makes_one_request_per_call(openai_server):
    embedder = OpenAIEmbeddingAdapter("text-embedding-3-small", base_url=openai_server.base_url)
    vectors = embedder.embed(["a", "b", "c"])
    (req,) = openai_server.requests
    assert req.path.endswith("/embeddings")
    assert req.body["input"] == ["a", "b", "c"] and req.body["model"] == "text-embedding-3-small"
    assert len(vectors) == 3 and all(len(v) == 8 for v in vectors)
    assert embedder.adapter_id == "openai:text-embedding-3-small"
    assert embedder.embed([]) == [] and len(openai_server.requests) == 1


def test_embedding_adapter_translates_errors(openai_server):
    embedder = OpenAIEmbeddingAdapter(base_url=openai_server.base_url)
    openai_server.queue_fault(429, headers={"Retry-After": "1"})
    with pytest.raises(RateLimitError):
        embedder.embed(["a"])
    openai_server.queue_fault(kind="malformed", body='{"object": "list", "data": []}')
    with pytest.raises(MalformedResponseError):
        embedder.embed(["a"])
    two = [{"object": "embedding", "index": i, "embedding": [1.0, 0.0]} for i in range(2)]
    openai_server.queue_fault(kind="malformed", body=json.dumps({"object": "list", "data": two}))
    with pytest.raises(MalformedResponseError, match="asked for 1 embeddings, got 2"):
        embedder.embed(["a"])
