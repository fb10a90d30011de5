"""RetryPolicy, RateLimiter and ResilientAdapter: which errors are retried, and how long to wait."""

from __future__ import annotations

import asyncio
import random

import pytest

from llm_connect.adapters import RecordedAdapter
from llm_connect.errors import (
    AdapterConnectionError,
    AdapterTimeoutError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    MalformedResponseError,
    RateLimitError,
    ServerError,
)
from llm_connect.grading import RateLimiter, ResilientAdapter, RetryPolicy
from llm_connect.grading._retry import CallLimit
from llm_connect.types import LLMResponse, RunConfig


class Flaky:
    """An adapter that raises the given errors first, then answers."""

    adapter_id = "flaky:model"

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = list(errors)
        self.calls = 0

    def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return LLMResponse(text="ok", model="model", provider="flaky")

    async def acomplete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        return self.complete(prompt, run_config)


NO_WAIT = RetryPolicy(max_retries=3, base_delay_s=0.0, max_delay_s=0.0)


@pytest.mark.parametrize(
    "error",
    [
        RateLimitError("429"),
        AdapterTimeoutError("slow"),
        AdapterConnectionError("refused"),
        ServerError("503"),
    ],
)
def test_retryable_errors_are_retried(error: Exception) -> None:
    flaky = Flaky([error, error])
    result = asyncio.run(ResilientAdapter(flaky, policy=NO_WAIT).acomplete("p", RunConfig()))
    assert result.text == "ok" and flaky.calls == 3


@pytest.mark.parametrize(
    "error", [BadRequestError("400"), AuthenticationError("401"), MalformedResponseError("junk")]
)
def test_other_errors_fail_at_once(error: Exception) -> None:
    flaky = Flaky([error])
    with pytest.raises(type(error)):
        asyncio.run(ResilientAdapter(flaky, policy=NO_WAIT).acomplete("p", RunConfig()))
    assert flaky.calls == 1


def test_retries_are_bounded_and_the_last_error_propagates() -> None:
    flaky = Flaky([ServerError("a"), ServerError("b"), ServerError("c"), ServerError("d"), ServerError("e")])
    with pytest.raises(ServerError, match="d"):
        ResilientAdapter(flaky, policy=NO_WAIT).complete("p", RunConfig())
    assert flaky.calls == 4


def test_backoff_is_exponential_with_full_jitter_and_capped() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0)
    rng = random.Random(1)
    for attempt, cap in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (6, 4.0)]:
        waits = [policy.delay(attempt, ServerError("x"), rng=rng) for _ in range(200)]
        assert all(0.0 <= w <= cap for w in waits)
        assert max(waits) > cap * 0.8  # spread over the whole range (jitter)
    assert RetryPolicy(base_delay_s=0.5, jitter=False).delay(2, ServerError("x")) == 2.0


def test_retry_after_is_honoured_and_capped() -> None:
    policy = RetryPolicy(base_delay_s=0.01, max_delay_s=0.01, max_retry_after_s=60)
    assert policy.delay(0, RateLimitError("429", retry_after=7.0)) >= 7.0
    assert policy.delay(0, RateLimitError("429", retry_after=10_000)) == 60


def test_rate_limiter_spaces_call_slots() -> None:
    limiter = RateLimiter(rpm=600)  # one call every 0.1 s
    waits = [limiter._reserve() for _ in range(5)]
    assert waits[0] == pytest.approx(0.0, abs=0.01)
    assert waits[4] == pytest.approx(0.4, abs=0.05)


def test_invalid_settings_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ConfigurationError):
        RateLimiter(rpm=0)


def test_wrapper_keeps_the_adapter_id() -> None:
    inner = RecordedAdapter({"p": "x"}, model="m")
    wrapped = ResilientAdapter(inner)
    assert wrapped.adapter_id == "recorded:m" and wrapped.model == "m"
    assert wrapped.complete("p", RunConfig()).text == "x"


def test_adapters_given_one_asyncio_semaphore_share_one_call_limit() -> None:
    semaphore = asyncio.Semaphore(2)  # how callers wired the bound before CallLimit
    a = ResilientAdapter(Flaky([]), semaphore=semaphore)
    b = ResilientAdapter(Flaky([]), semaphore=semaphore)
    assert isinstance(a.semaphore, CallLimit) and a.semaphore is b.semaphore
    assert a.semaphore.limit == 2
    other = ResilientAdapter(Flaky([]), semaphore=asyncio.Semaphore(3)).semaphore
    assert other is not a.semaphore and other is not None and other.limit == 3
    assert ResilientAdapter(Flaky([]), semaphore=4).semaphore.limit == 4  # type: ignore[union-attr]
    limit = CallLimit(5)
    assert ResilientAdapter(Flaky([]), semaphore=limit).semaphore is limit
    with pytest.raises(ConfigurationError):
        ResilientAdapter(Flaky([]), semaphore="8")  # type: ignore[arg-type]


def test_sync_calls_take_a_slot_of_the_limit() -> None:
    limit = CallLimit(1)
    seen: list[int] = []

    class Probe(Flaky):
        def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
            seen.append(limit.in_flight)
            return super().complete(prompt, run_config)

    wrapped = ResilientAdapter(Probe([ServerError("503")]), policy=NO_WAIT, semaphore=limit)
    assert wrapped.complete("p", RunConfig()).text == "ok"
    assert seen == [1, 1] and limit.in_flight == 0 and wrapped.calls == 2
