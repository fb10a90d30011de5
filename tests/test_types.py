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
        model_params={
            "seed": 7,
            "top_p": 0.9,
            "api_key": "sk-secret",
            "extra_headers": {"Authorization": "Bearer x"},
        },
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
    [
        {"temperature": -1},
        {"temperature": float("nan")},
        {"max_tokens": 0},
        {"max_tokens": 1.5},
        {"timeout_s": 0},
        {"temperature": True},
        {"model_params": [1]},
    ],
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
        text="hi",
        model="m",
        provider="p",
        latency_ms=1.5,
        usage=Usage(3, 4),
        cost_usd=0.1,
        tool_calls=(ToolCall("lookup", '{"q": 1}'),),
        finish_reason="tool_calls",
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


# -- reservations ----------------------------------------------------------------------


def _priced(usd: float | None, tokens: int | None) -> LLMResponse:
    return LLMResponse("x", "m", "p", cost_usd=usd, usage=None if tokens is None else Usage(tokens, 0))


def test_a_reservation_is_held_then_replaced_by_the_actual_cost() -> None:
    tracker = BudgetTracker(max_usd=1.0, max_tokens=1000)
    held = tracker.reserve(usd=0.4, tokens=300)
    assert held.open and (held.usd, held.tokens) == (0.4, 300)
    assert (tracker.reserved_usd, tracker.reserved_tokens, tracker.in_flight) == (0.4, 300, 1)
    assert (tracker.spent_usd, tracker.calls) == (0.0, 0)
    tracker.settle(held, _priced(0.1, 70))
    assert not held.open
    assert (tracker.spent_usd, tracker.spent_tokens, tracker.calls) == (0.1, 70, 1)
    assert (tracker.reserved_usd, tracker.reserved_tokens, tracker.in_flight) == (0.0, 0, 0)


def test_a_released_reservation_spends_nothing_and_closes_once() -> None:
    tracker = BudgetTracker(max_usd=1.0)
    held = tracker.reserve(usd=0.9)
    tracker.release(held)
    held.release()  # releasing again does nothing
    assert (tracker.spent_usd, tracker.reserved_usd, tracker.calls) == (0.0, 0.0, 0)
    with pytest.raises(ConfigurationError, match="already settled or released"):
        tracker.settle(held, _priced(0.1, 1))
    with pytest.raises(ConfigurationError, match="not made by this budget tracker"):
        BudgetTracker().release(tracker.reserve(usd=0.1))


def test_reservations_admit_while_spend_and_holdings_are_below_the_limit() -> None:
    tracker = BudgetTracker(max_usd=1.0)
    a = tracker.reserve(usd=0.6)
    b = tracker.reserve(usd=0.6)  # 0.6 < 1.0: granted; spend may pass the limit by this one estimate
    with pytest.raises(
        BudgetExceededError, match=r"\+ \$1\.200000 held by 2 call\(s\) in flight of a \$1\.000000 budget"
    ):
        tracker.reserve(usd=0.01)
    with pytest.raises(BudgetExceededError):
        tracker.check()  # check() counts what calls in flight hold
    b.release()
    c = tracker.reserve(usd=0.6)
    a.settle(_priced(0.5, None))
    c.settle(_priced(0.55, None))
    assert tracker.spent_usd == pytest.approx(1.05)
    with pytest.raises(BudgetExceededError, match="budget exhausted"):
        tracker.reserve()


def test_a_lone_call_may_exceed_a_small_budget_but_only_once() -> None:
    tracker = BudgetTracker(max_usd=0.01)
    tracker.reserve(usd=5.0, tokens=4096).settle(_priced(0.02, 30))
    with pytest.raises(BudgetExceededError, match=r"spent \$0\.020000 of a \$0\.010000 budget"):
        tracker.reserve(usd=0.0, tokens=1)
    tokens = BudgetTracker(max_tokens=10)
    tokens.reserve(tokens=4096).settle(_priced(None, 30))
    with pytest.raises(BudgetExceededError, match="spent 30 of a 10-token budget"):
        tokens.reserve()
    with pytest.raises(BudgetExceededError):
        BudgetTracker(max_usd=0).reserve()  # a zero budget allows nothing


def test_what_a_response_does_not_report_is_charged_at_its_estimate() -> None:
    tracker = BudgetTracker()
    tracker.reserve(usd=0.3, tokens=40).settle(_priced(None, None))
    assert (tracker.spent_usd, tracker.spent_tokens) == (0.3, 40)


def test_a_reservation_as_a_context_manager_is_released_unless_settled() -> None:
    tracker = BudgetTracker(max_usd=1.0)
    with pytest.raises(RuntimeError), tracker.reserve(usd=0.5):
        raise RuntimeError("the call failed")
    assert (tracker.in_flight, tracker.spent_usd) == (0, 0.0)
    with tracker.reserve(usd=0.5) as held:
        held.settle(_priced(0.2, 1))
    assert (tracker.in_flight, tracker.spent_usd) == (0, 0.2)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"usd": -1.0},
        {"usd": float("nan")},
        {"usd": float("inf")},
        {"tokens": -1},
        {"tokens": 1.5},
        {"usd": True},
    ],
)
def test_bad_estimates_are_configuration_errors(kwargs: dict) -> None:
    with pytest.raises(ConfigurationError):
        BudgetTracker().reserve(**kwargs)


def test_concurrent_reservations_never_overshoot_by_more_than_one_estimate() -> None:
    tracker = BudgetTracker(max_usd=10.0, max_tokens=50_000)
    barrier = threading.Barrier(16)

    def work(i: int) -> None:
        barrier.wait()
        while True:
            try:
                held = tracker.reserve(usd=0.125, tokens=100)
            except BudgetExceededError:
                return
            held.settle(_priced(0.125 if i % 2 else 0.05, 100 if i % 3 else 40))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 10.0 <= tracker.spent_usd <= 10.0 + 0.125 + 1e-9
    assert tracker.in_flight == 0 and tracker.reserved_usd == 0.0 and tracker.reserved_tokens == 0


def test_a_copy_keeps_the_spend_but_not_the_reservations_in_flight() -> None:
    tracker = BudgetTracker(max_usd=1.0)
    tracker.reserve(usd=0.2).settle(_priced(0.2, 5))
    held = tracker.reserve(usd=0.7)
    for twin in (pickle.loads(pickle.dumps(tracker)), copy.deepcopy(tracker)):
        assert (twin.spent_usd, twin.spent_tokens, twin.calls) == (0.2, 5, 1)
        assert (twin.reserved_usd, twin.in_flight) == (0.0, 0)  # the call in flight settles on the original
        twin.reserve(usd=0.7).settle(_priced(0.7, 1))
        assert twin.spent_usd == pytest.approx(0.9)
    assert (tracker.reserved_usd, tracker.in_flight) == (0.7, 1)
    held.release()
    old = BudgetTracker.__new__(BudgetTracker)  # a tracker pickled before reservations existed
    old.__setstate__({"max_usd": 1.0, "max_tokens": None, "_spent_usd": 0.5, "_spent_tokens": 0, "_calls": 1})
    assert (old.reserved_usd, old.in_flight) == (0.0, 0)
    old.reserve(usd=0.1).release()
