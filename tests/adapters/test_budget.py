"""The budget is reserved before a call and settled after it, so spend never passes
the limit by more than one call's estimate, however many calls are in flight.

Against the loopback server with a delay (so calls really overlap) and pricing set;
requests are counted at the server.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from llm_connect.adapters import OpenAIAdapter
from llm_connect.errors import BudgetExceededError, ServerError
from llm_connect.grading._retry import CallLimit, ResilientAdapter, RetryPolicy
from llm_connect.types import BudgetTracker, LLMResponse, RunConfig
from tests.fixtures.loops import run as run_closing
from tests.fixtures.openai_server import OpenAIServer, chat_completion

PRICING = {"input": 1000.0, "output": 1000.0}  # $0.001 per token, either way
MAX_TOKENS = 20


def adapter(server: OpenAIServer, *, pricing: dict[str, float] | None = PRICING) -> OpenAIAdapter:
    return OpenAIAdapter("gpt-test", base_url=server.base_url, pricing=pricing)


def bill_the_estimate(server: OpenAIServer, model: OpenAIAdapter) -> None:
    """The server reports exactly the usage the adapter estimated: the bound is then tight."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["messages"][-1]["content"]
        _, tokens = model.estimate(prompt, RunConfig(max_tokens=body.get("max_tokens")))
        completion = body.get("max_tokens") or model.DEFAULT_MAX_TOKENS_ESTIMATE
        usage = {
            "prompt_tokens": tokens - completion,
            "completion_tokens": completion,
            "total_tokens": tokens,
        }
        return chat_completion(body, "ok", usage=usage)

    server.responder = reply


def hammer_with_threads(model: Any, config: RunConfig, *, threads: int) -> tuple[int, int]:
    """``threads`` threads call until refused; returns (answered, refused)."""
    counts = {"ok": 0, "refused": 0}
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def work(i: int) -> None:
        start.wait()
        n = 0
        while True:
            try:
                model.complete(f"thread {i} call {n}", config)
            except BudgetExceededError:
                with lock:
                    counts["refused"] += 1
                return
            with lock:
                counts["ok"] += 1
            n += 1

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    return counts["ok"], counts["refused"]


async def hammer_with_tasks(model: Any, config: RunConfig, *, tasks: int) -> tuple[int, int]:
    """``tasks`` tasks call until refused; returns (answered, refused)."""
    answered = 0

    async def work(i: int) -> None:
        nonlocal answered
        n = 0
        while True:
            await model.acomplete(f"task {i} call {n}", config)
            answered += 1
            n += 1

    results = await asyncio.gather(*(work(i) for i in range(tasks)), return_exceptions=True)
    assert all(isinstance(r, BudgetExceededError) for r in results)
    return answered, len(results)


def per_call(model: OpenAIAdapter, config: RunConfig) -> float:
    """One call's estimate in dollars (every prompt of these tests has the same length)."""
    return model.estimate("thread 99 call 99", config)[0]  # the longest prompt of these tests


# -- the bound -------------------------------------------------------------------------


@pytest.mark.parametrize("slots", [None, 5], ids=["all-at-once", "5-slots"])
def test_threads_in_flight_never_overshoot_by_more_than_one_estimate(
    openai_server: OpenAIServer, slots: int | None
) -> None:
    openai_server.delay_s = 0.1
    model = adapter(openai_server)
    bill_the_estimate(openai_server, model)
    tracker = BudgetTracker(max_usd=0.25)
    config = RunConfig(max_tokens=MAX_TOKENS, budget_tracker=tracker, timeout_s=30)
    estimate = per_call(model, config)
    # with slots, calls queue for them and reserve only once they hold one: waves of
    # reservations settle while later calls are being admitted
    caller: Any = model if slots is None else ResilientAdapter(model, semaphore=CallLimit(slots))

    answered, refused = hammer_with_threads(caller, config, threads=24)

    sent = len(openai_server.requests_to("/chat/completions"))
    overshoot = tracker.spent_usd - 0.25
    print(
        f"\n24 threads ({slots or 'no'} slots), $0.25 budget, ${estimate:.3f} per call: {answered} answered, "
        f"{refused} refused, spent ${tracker.spent_usd:.3f} (overshoot ${overshoot:.3f})"
    )
    assert refused == 24  # every thread ends refused...
    assert sent == answered == tracker.calls  # ...and no refused call reached the server
    assert tracker.spent_usd <= 0.25 + estimate + 1e-9
    assert tracker.spent_usd >= 0.25  # the budget was used up, not refused early
    assert tracker.in_flight == 0 and tracker.reserved_usd == 0.0


def test_tasks_in_flight_never_overshoot_by_more_than_one_estimate(openai_server: OpenAIServer) -> None:
    openai_server.delay_s = 0.1
    model = adapter(openai_server)
    bill_the_estimate(openai_server, model)
    tracker = BudgetTracker(max_usd=0.25)
    config = RunConfig(max_tokens=MAX_TOKENS, budget_tracker=tracker, timeout_s=30)
    estimate = per_call(model, config)

    answered, refused = run_closing(hammer_with_tasks(model, config, tasks=24))

    sent = len(openai_server.requests_to("/chat/completions"))
    print(
        f"\n24 tasks, $0.25 budget, ${estimate:.3f} per call: {answered} answered, {refused} refused, "
        f"spent ${tracker.spent_usd:.3f} (overshoot ${tracker.spent_usd - 0.25:.3f})"
    )
    assert sent == answered == tracker.calls
    assert 0.25 <= tracker.spent_usd <= 0.25 + estimate + 1e-9
    assert tracker.in_flight == 0


def test_threads_and_tasks_share_one_budget(openai_server: OpenAIServer) -> None:
    openai_server.delay_s = 0.1
    model = adapter(openai_server)
    bill_the_estimate(openai_server, model)
    tracker = BudgetTracker(max_usd=0.3)
    config = RunConfig(max_tokens=MAX_TOKENS, budget_tracker=tracker, timeout_s=30)
    estimate = per_call(model, config)
    in_loop: list[tuple[int, int]] = []
    loop_thread = threading.Thread(
        target=lambda: in_loop.append(run_closing(hammer_with_tasks(model, config, tasks=12)))
    )
    loop_thread.start()
    answered, _ = hammer_with_threads(model, config, threads=12)
    loop_thread.join(60)
    answered += in_loop[0][0]
    assert len(openai_server.requests_to("/chat/completions")) == answered == tracker.calls
    assert 0.3 <= tracker.spent_usd <= 0.3 + estimate + 1e-9


def test_a_token_budget_holds_without_prices(openai_server: OpenAIServer) -> None:
    openai_server.delay_s = 0.1
    model = adapter(openai_server, pricing=None)
    bill_the_estimate(openai_server, model)
    tracker = BudgetTracker(max_usd=0.0001, max_tokens=300)
    config = RunConfig(max_tokens=MAX_TOKENS, budget_tracker=tracker, timeout_s=30)
    usd, tokens = model.estimate("thread 99 call 99", config)
    assert usd == 0.0 and tokens > MAX_TOKENS  # no price: nothing in dollars, the tokens still count
    answered, _ = hammer_with_threads(model, config, threads=16)
    assert tracker.spent_usd == 0.0
    assert 300 <= tracker.spent_tokens <= 300 + tokens
    assert len(openai_server.requests_to("/chat/completions")) == answered


def test_check_and_charge_alone_overshoot_by_every_call_in_flight(openai_server: OpenAIServer) -> None:
    """Why reservations exist: the old protocol lets every call in flight pass ``check``."""
    openai_server.delay_s = 0.2
    inner = adapter(openai_server)
    bill_the_estimate(openai_server, inner)
    tracker = BudgetTracker(max_usd=0.05)
    config = RunConfig(max_tokens=MAX_TOKENS, timeout_s=30)
    estimate = per_call(inner, config)

    class CheckThenCharge:
        def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
            tracker.check()
            response = inner.complete(prompt, run_config)
            tracker.charge(response)
            return response

    hammer_with_threads(CheckThenCharge(), config, threads=16)
    print(f"\ncheck()/charge() only, 16 threads, $0.05 budget: spent ${tracker.spent_usd:.3f}")
    assert tracker.spent_usd > 0.05 + 2 * estimate


# -- failures and cancellation release the reservation ------------------------------


def test_a_failed_call_spends_nothing(openai_server: OpenAIServer) -> None:
    tracker = BudgetTracker(max_usd=0.001)  # less than one call's estimate
    config = RunConfig(max_tokens=MAX_TOKENS, budget_tracker=tracker)
    model = adapter(openai_server)
    openai_server.queue_fault(500)
    with pytest.raises(ServerError):
        model.complete("hello", config)
    assert (tracker.spent_usd, tracker.calls, tracker.in_flight) == (0.0, 0, 0)
    model.complete("hello", config)  # the lone call a small budget still allows
    with pytest.raises(BudgetExceededError):
        model.complete("hello", config)
    assert len(openai_server.requests_to("/chat/completions")) == 2


def test_a_cancelled_call_releases_its_reservation(openai_server: OpenAIServer) -> None:
    openai_server.delay_s = 2.0
    tracker = BudgetTracker(max_usd=1.0)
    config = RunConfig(max_tokens=MAX_TOKENS, budget_tracker=tracker, timeout_s=30)
    model = adapter(openai_server)

    async def main() -> None:
        task = asyncio.create_task(model.acomplete("hello", config))
        while not openai_server.requests:
            await asyncio.sleep(0.01)
        assert tracker.in_flight == 1 and tracker.reserved_usd > 0
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_closing(main())
    assert (tracker.in_flight, tracker.reserved_usd, tracker.spent_usd) == (0, 0.0, 0.0)


def test_retries_reserve_once_at_a_time_and_leak_nothing(openai_server: OpenAIServer) -> None:
    tracker = BudgetTracker(max_usd=1.0)
    config = RunConfig(max_tokens=MAX_TOKENS, budget_tracker=tracker)
    seen: list[int] = []
    inner = adapter(openai_server)
    openai_server.queue_fault(500)
    openai_server.queue_fault(503)

    def on_retry(attempt: int, exc: BaseException, wait: float) -> None:
        seen.append(tracker.in_flight)  # the failed attempt's reservation is gone already

    policy = RetryPolicy(max_retries=3, base_delay_s=0.0, max_delay_s=0.0)
    wrapped = ResilientAdapter(inner, policy=policy, semaphore=CallLimit(2), on_retry=on_retry)
    wrapped.complete("hello", config)
    run_closing(wrapped.acomplete("hello", config))
    assert seen == [0, 0] and wrapped.calls == 4
    assert tracker.calls == 2 and tracker.in_flight == 0 and tracker.reserved_usd == 0.0
    assert len(openai_server.requests_to("/chat/completions")) == 4


# -- the estimate ------------------------------------------------------------------------


def test_the_estimate_counts_prompt_characters_and_the_completion_bound(openai_server: OpenAIServer) -> None:
    model = OpenAIAdapter("gpt-test", base_url=openai_server.base_url, pricing={"input": 2.0, "output": 10.0})
    prompt = "x" * 41  # 11 tokens at 4 characters per token, rounded up
    # one user message: 11 + 4 (message) + 4 (reply); completion: the default bound
    usd, tokens = model.estimate(prompt, RunConfig())
    assert tokens == 19 + 4096
    assert usd == pytest.approx((19 * 2.0 + 4096 * 10.0) / 1e6)
    # a system prompt is a second message; max_tokens bounds the completion
    assert model.estimate(prompt, RunConfig(system_prompt="abcd", max_tokens=50))[1] == 11 + 1 + 12 + 50
    # the largest bound given wins; n choices multiply it
    params = {"max_completion_tokens": 80, "n": 3}
    assert model.estimate(prompt, RunConfig(max_tokens=50, model_params=params))[1] == 19 + 240
    # tool schemas are prompt text too
    assert (
        model.estimate(prompt, RunConfig(max_tokens=1, model_params={"tools": [{"a": "b" * 100}]}))[1]
        > 19 + 1 + 25
    )
    # a model without a price: tokens only
    assert (
        OpenAIAdapter(
            "other", base_url=openai_server.base_url, pricing={"gpt-test": {"input": 1, "output": 1}}
        ).estimate(prompt, RunConfig())[0]
        == 0.0
    )


def test_the_reservation_is_the_estimate_and_is_replaced_by_the_cost(openai_server: OpenAIServer) -> None:
    openai_server.delay_s = 0.3
    tracker = BudgetTracker(max_usd=10.0)
    config = RunConfig(max_tokens=MAX_TOKENS, budget_tracker=tracker, timeout_s=30)
    model = adapter(openai_server)
    usd, tokens = model.estimate("hello there", config)
    thread = threading.Thread(target=model.complete, args=("hello there", config))
    thread.start()
    while not openai_server.requests:
        time.sleep(0.005)
    assert (tracker.reserved_usd, tracker.reserved_tokens) == (pytest.approx(usd), tokens)
    thread.join(10)
    # the server counts words: 2 prompt, 3 completion ("echo: hello there")
    assert (tracker.reserved_usd, tracker.spent_tokens) == (0.0, 5)
    assert tracker.spent_usd == pytest.approx(5 * 0.001)
