"""``--concurrency`` bounds every model call: one CallLimit across threads and event loops.

Measured at the loopback server (its ``started``/``finished`` stamps), never from
the client's own bookkeeping.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Awaitable, Callable, Sequence

import pytest

from llm_connect.adapters import OpenAIAdapter
from llm_connect.errors import ConfigurationError
from llm_connect.grading._retry import CallLimit, RateLimiter, ResilientAdapter, RetryPolicy
from llm_connect.types import RunConfig
from tests.fixtures.loops import run as run_closing
from tests.fixtures.openai_server import OpenAIServer, RecordedRequest

NO_RETRY = RetryPolicy(max_retries=0)


def max_overlap(requests: Sequence[RecordedRequest]) -> int:
    """The most requests the server was answering at one moment."""
    events: list[tuple[float, int]] = []
    for r in requests:
        assert r.finished is not None
        events += [(r.started, 1), (r.finished, -1)]
    events.sort(key=lambda e: (e[0], e[1]))  # a finish before a start at the same instant
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def run_mixed(
    sync_call: Callable[[int], object],
    async_call: Callable[[int], object],
    *,
    threads: int,
    tasks: int,
    warm_up: Callable[[], Awaitable[object]] | None = None,
) -> list[BaseException]:
    """``threads`` threads calling ``sync_call`` and one thread running ``tasks`` coroutines, all at once
    (after ``warm_up`` ran in that event loop)."""
    errors: list[BaseException] = []
    start = threading.Barrier(threads + 1)

    def in_thread(i: int) -> None:
        start.wait()
        try:
            sync_call(i)
        except BaseException as exc:
            errors.append(exc)

    def in_loop() -> None:
        async def main() -> None:
            if warm_up is not None:
                await warm_up()
            start.wait()
            results = await asyncio.gather(*(async_call(i) for i in range(tasks)), return_exceptions=True)  # type: ignore[arg-type]
            errors.extend(r for r in results if isinstance(r, BaseException))

        run_closing(main())

    workers = [threading.Thread(target=in_thread, args=(i,)) for i in range(threads)]
    workers.append(threading.Thread(target=in_loop))
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    return errors


def adapters(
    server: OpenAIServer, limit: CallLimit, limiter: RateLimiter | None = None
) -> list[ResilientAdapter]:
    """Two sides sharing one limit (as the CLI wires baseline, candidates and judges)."""
    return [
        ResilientAdapter(
            OpenAIAdapter(model, base_url=server.base_url), policy=NO_RETRY, limiter=limiter, semaphore=limit
        )
        for model in ("base", "cand")
    ]


def test_sync_and_async_calls_share_one_bound(openai_server: OpenAIServer) -> None:
    openai_server.delay_s = 0.15
    limit = CallLimit(3)
    base, cand = adapters(openai_server, limit)
    config = RunConfig(timeout_s=30)

    def sync_call(i: int) -> None:
        for _ in range(2):
            (base if i % 2 else cand).complete(f"thread {i}", config)

    async def async_call(i: int) -> None:
        await (cand if i % 2 else base).acomplete(f"task {i}", config)

    errors = run_mixed(sync_call, async_call, threads=8, tasks=10)
    assert errors == []
    requests = openai_server.requests_to("/chat/completions")
    assert len(requests) == 8 * 2 + 10
    overlap = max_overlap(requests)
    print(f"\n26 calls (16 sync from 8 threads, 10 async), limit 3: max overlap at the server {overlap}")
    assert overlap == 3  # the bound holds and is reached
    assert limit.peak == 3 and limit.in_flight == 0
    assert base.calls + cand.calls == 26


def test_two_event_loops_and_threads_share_one_bound(openai_server: OpenAIServer) -> None:
    openai_server.delay_s = 0.1
    limit = CallLimit(2)
    base, cand = adapters(openai_server, limit)
    config = RunConfig(timeout_s=30)

    def sync_call(i: int) -> None:
        if i % 2:  # half of the threads run their own event loop

            async def two() -> None:
                await asyncio.gather(base.acomplete(f"loop {i}", config), cand.acomplete(f"loop {i}", config))

            run_closing(two())
        else:
            base.complete(f"thread {i}", config)

    async def async_call(i: int) -> None:
        await cand.acomplete(f"task {i}", config)

    assert run_mixed(sync_call, async_call, threads=6, tasks=4) == []
    requests = openai_server.requests_to("/chat/completions")
    assert len(requests) == 3 * 2 + 3 + 4
    assert max_overlap(requests) == 2


def test_rate_limit_still_holds_with_the_call_limit(openai_server: OpenAIServer) -> None:
    openai_server.delay_s = 0.5  # longer than 3 start intervals: the call limit binds too
    interval = 0.15
    limiter = RateLimiter(rpm=60 / interval)
    limit = CallLimit(3)
    base, cand = adapters(openai_server, limit, limiter)
    config = RunConfig(timeout_s=30)

    def sync_call(i: int) -> None:
        base.complete(f"thread {i}", config)

    async def async_call(i: int) -> None:
        await cand.acomplete(f"task {i}", config)

    # the SDK clients exist before the clock starts (creating one delays its first request)
    base.adapter.complete("warm-up", config)
    warm_up = lambda: cand.adapter.acomplete("warm-up", config)  # noqa: E731
    assert run_mixed(sync_call, async_call, threads=5, tasks=5, warm_up=warm_up) == []
    requests = [
        r
        for r in openai_server.requests_to("/chat/completions")
        if r.body["messages"][-1]["content"] != "warm-up"
    ]
    starts = sorted(r.started for r in requests)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    overlap = max_overlap(requests)
    print(
        f"\n10 calls at one start per {interval} s, limit 3: gaps at the server "
        f"{min(gaps):.3f}..{max(gaps):.3f} s, max overlap {overlap}"
    )
    assert len(starts) == 10
    tolerance = 0.05  # loopback and scheduling jitter
    for k in range(1, 10):  # no bunching over any window
        assert all(starts[i + k] - starts[i] >= k * interval - tolerance for i in range(len(starts) - k))
    assert overlap == 3


def test_a_retry_gives_its_slot_back_during_the_backoff(openai_server: OpenAIServer) -> None:
    openai_server.queue_fault(500)
    limit = CallLimit(1)
    policy = RetryPolicy(max_retries=2, base_delay_s=0.0, max_delay_s=0.0)
    adapter = ResilientAdapter(
        OpenAIAdapter("m", base_url=openai_server.base_url), policy=policy, semaphore=limit
    )
    assert adapter.complete("p", RunConfig()).text == "echo: p"
    assert run_closing(adapter.acomplete("q", RunConfig())).text == "echo: q"
    assert adapter.calls == 3 and limit.in_flight == 0


# -- CallLimit on its own -------------------------------------------------------------


def test_a_cancelled_waiter_leaves_no_slot_taken() -> None:
    limit = CallLimit(1)

    async def main() -> None:
        async with limit:
            waiter = asyncio.create_task(limit.__aenter__())
            await asyncio.sleep(0.01)
            assert not waiter.done()
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
        assert limit.in_flight == 0
        async with limit:  # still usable
            assert limit.in_flight == 1

    asyncio.run(main())
    assert limit.in_flight == 0


def test_a_task_cancelled_just_after_being_handed_the_slot_gives_it_back() -> None:
    limit = CallLimit(1)

    async def main() -> None:
        await limit.__aenter__()
        waiter = asyncio.create_task(limit.__aenter__())
        await asyncio.sleep(0.01)
        await limit.__aexit__(None, None, None)  # hands the slot to the waiter...
        waiter.cancel()  # ...which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert limit.in_flight == 0

    asyncio.run(main())


def test_slots_pass_between_threads_and_tasks_first_come_first_served() -> None:
    limit = CallLimit(1)
    order: list[str] = []
    limit.__enter__()  # the main thread holds the only slot

    def thread_waiter() -> None:
        with limit:
            order.append("thread")

    async def task_waiter() -> None:
        async with limit:
            order.append("task")

    t = threading.Thread(target=thread_waiter)
    t.start()
    while not limit._waiters:
        pass
    loop_thread = threading.Thread(target=lambda: asyncio.run(task_waiter()))
    loop_thread.start()
    while len(limit._waiters) < 2:
        pass
    limit.__exit__(None, None, None)
    t.join(5)
    loop_thread.join(5)
    assert order == ["thread", "task"] and limit.in_flight == 0 and limit.peak == 1


def test_a_blocking_call_from_a_coroutine_whose_loop_holds_the_slots_is_refused() -> None:
    limit = CallLimit(1)

    async def main() -> None:
        with limit:  # a free slot: taken at once, even from a coroutine
            pass
        async with limit, asyncio.timeout(5):
            with pytest.raises(ConfigurationError, match=r"asyncio\.to_thread"), limit:
                pass
        assert limit.in_flight == 0

    asyncio.run(main())


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_bad_limits_are_configuration_errors(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        CallLimit(bad)  # type: ignore[arg-type]
