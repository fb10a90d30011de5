"""RunConfig, LLMResponse and BudgetTracker."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import threading

import pytest

from llm_connect import BudgetTracker, LLMResponse, RunConfig, ToolCall, Usage
from llm_connect.errors import BudgetExceededError, ConfigurationError
from llm_connect.types import redact_secrets


def test_run_config_is_frozen_including_model_params() -> None:
    rc = RunConfig(temperature=0.0, model_params={"seed": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        rc.temperature = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        rc.model_params["seed"] = 2  # type: ignore[index]


def test_run_config_serialises_to_json_without_tracker_or_secrets() -> None:
    rc = RunConfig(
        temperature=0.2,
        max_tokens=100,
        system_prompt="Be brief.",
        model_params={"seed": 7, "top_p": 0.9, "api_key": "sk-secret", "extra_headers": {"Authorization": "Bearer x"}},
        timeout_s=30,
        budget_tracker=BudgetTracker(max_usd=1.0),
    )
    data = rc.to_dict()
    text = json.dumps(data)
    assert "sk-secret" not in text and "Bearer" not in text
    assert "budget" not in text
    assert data["model_params"] == {"seed": 7, "top_p": 0.9, "extra_headers": {}}
    assert RunConfig.from_dict(data) == rc.replace(model_params=data["model_params"])


def test_run_config_equality_ignores_the_tracker_and_json_is_canonical() -> None:
    a = RunConfig(model_params={"b": 1, "a": 2}, budget_tracker=BudgetTracker())
    b = RunConfig(model_params={"a": 2, "b": 1})
    assert a == b
    assert a.to_json() == b.to_json()


@pytest.mark.parametrize(
    "kwargs",
    [{"temperature": -1}, {"temperature": float("nan")}, {"max_tokens": 0}, {"max_tokens": 1.5},
     {"timeout_s": 0}, {"temperature": True}, {"model_params": [1]}],
)
def test_run_config_rejects_bad_values(kwargs: dict) -> None:
    with pytest.raises(ConfigurationError):
        RunConfig(**kwargs)


def test_redact_secrets_catches_header_style_names() -> None:
    headers = {"X-Api-Key": "k1", "api-key": "k2", "Authorization": "Bearer k3", "Accept": "json"}
    assert redact_secrets({"extra_headers": headers}) == {"extra_headers": {"Accept": "json"}}


def test_redact_secrets_keeps_token_counts() -> None:
    assert redact_secrets({"max_tokens": 5, "max_completion_tokens": 6, "access_token": "x"}) == {
        "max_tokens": 5,
        "max_completion_tokens": 6,
    }


def test_llm_response_round_trips() -> None:
    resp = LLMResponse(
        text="hi", model="m", provider="p", latency_ms=1.5, usage=Usage(3, 4), cost_usd=0.1,
        tool_calls=(ToolCall("lookup", '{"q": 1}'),), finish_reason="tool_calls",
    )
    assert LLMResponse.from_dict(json.loads(json.dumps(resp.to_dict()))) == resp
    assert resp.usage is not None and resp.usage.total_tokens == 7


def test_budget_tracker_is_safe_across_threads() -> None:
    tracker = BudgetTracker(max_tokens=10_000_000)
    resp = LLMResponse(text="", model="m", provider="p", usage=Usage(1, 1), cost_usd=0.5)

    def work() -> None:
        for _ in range(2000):
            tracker.charge(resp)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert tracker.calls == 16_000
    assert tracker.spent_tokens == 32_000
    assert tracker.spent_usd == 8_000.0


def test_budget_tracker_token_limit() -> None:
    tracker = BudgetTracker(max_tokens=3)
    tracker.check()
    tracker.charge(LLMResponse(text="", model="m", provider="p", usage=Usage(2, 1)))
    with pytest.raises(BudgetExceededError, match="3-token budget"):
        tracker.check()


def test_budget_tracker_rejects_negative_limits() -> None:
    with pytest.raises(ConfigurationError):
        BudgetTracker(max_usd=-1)


def test_run_config_and_tracker_survive_pickle_and_deepcopy() -> None:
    tracker = BudgetTracker(max_usd=1.0)
    tracker.charge(LLMResponse("a", "m", "p", cost_usd=0.25, usage=Usage(3, 4)))
    config = RunConfig(temperature=0.0, model_params={"seed": 1, "stop": ["x"]}, budget_tracker=tracker)
    for copied in (pickle.loads(pickle.dumps(config)), copy.deepcopy(config)):
        assert copied == config and copied.model_params["stop"] == ["x"]
        with pytest.raises(TypeError):
            copied.model_params["seed"] = 2  # type: ignore[index]
        twin = copied.budget_tracker
        assert twin is not None and twin is not tracker  # an independent copy of the spend so far
        assert (twin.max_usd, twin.spent_usd, twin.spent_tokens, twin.calls) == (1.0, 0.25, 7, 1)
        twin.charge(LLMResponse("b", "m", "p", cost_usd=0.75))
        with pytest.raises(BudgetExceededError):
            twin.check()
        tracker.check()  # the original still has budget left
    assert copy.copy(config).budget_tracker is tracker  # a shallow copy shares it
