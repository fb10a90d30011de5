"""SharedRateLimiter: one rpm / tpm limit for every worker process on one PostgreSQL ledger.

The fleet test runs 4 spawned processes, each with its own ledger connection and
limiter, calling the loopback server (in this process) as fast as they can; the
limit is checked where it matters, in the server's own request timestamps.
"""

from __future__ import annotations

import asyncio
import bisect
import multiprocessing as mp
import time
import traceback
from collections.abc import Callable
from typing import Any, cast

import pytest

from llm_connect.adapters import OpenAIAdapter
from llm_connect.errors import LedgerError
from llm_connect.grading import ResilientAdapter, RetryPolicy, SharedRateLimiter
from llm_connect.ledger import QualityLedger
from llm_connect.types import LLMResponse, RunConfig
from tests.fixtures.loops import run as run_closing

pg = pytest.mark.postgres

RPM = 600
WINDOW_S = 10.0
RUN_S = 12.0
WORKERS = 4


def _worker(db_url: str, base_url: str, name: str, barrier: Any, errors: Any) -> None:
    async def call_forever(adapter: ResilientAdapter, until: float) -> None:
        while time.monotonic() < until:
            await adapter.acomplete(name, RunConfig(max_tokens=8))

    async def main() -> None:
        with QualityLedger(db_url) as ledger:
            limiter = SharedRateLimiter(ledger, key="run:fleet", rpm=RPM)
            model = OpenAIAdapter("gpt-test", base_url=base_url)
            adapter = ResilientAdapter(model, limiter=limiter)
            await model.acomplete("warm-up", RunConfig())  # the HTTP client exists before the clock runs
            barrier.wait(120)  # everyone set up: start together
            until = time.monotonic() + RUN_S
            await asyncio.gather(*(call_forever(adapter, until) for _ in range(8)))

    try:
        run_closing(main())
    except BaseException:
        errors.put(f"{name}: {traceback.format_exc()}")
        raise


@pg
@pytest.mark.slow
def test_four_worker_processes_share_one_rpm_limit_at_the_server(
    postgres_url: str, openai_server: Any
) -> None:
    QualityLedger(postgres_url).close()  # migrated once, before the workers open it
    ctx = mp.get_context("spawn")
    barrier, errors = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(postgres_url, openai_server.base_url, f"w{i}", barrier, errors))
        for i in range(WORKERS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert errors.empty(), errors.get()
    assert [p.exitcode for p in procs] == [0] * WORKERS

    requests = [
        r
        for r in openai_server.requests_to("/chat/completions")
        if r.body["messages"][-1]["content"] != "warm-up"
    ]
    starts = sorted(r.started for r in requests)
    busiest = max(bisect.bisect_left(starts, t + WINDOW_S) - i for i, t in enumerate(starts))
    limit = RPM / 60 * WINDOW_S  # 100 calls per 10 s
    per_worker = {f"w{i}": 0 for i in range(WORKERS)}
    for r in requests:
        per_worker[r.body["messages"][-1]["content"]] += 1
    span = starts[-1] - starts[0]
    print(
        f"busiest {WINDOW_S:.0f} s window: {busiest} calls; {len(starts)} calls in {span:.2f} s "
        f"({(len(starts) - 1) / span * 60:.0f}/min); per worker {per_worker}"
    )
    assert busiest <= limit * 1.05  # the fleet's limit, at the server
    assert busiest >= limit * 0.8  # and the fleet really ran at it (load only slows it down)
    assert min(per_worker.values()) >= 5  # every process took part


@pg
def test_tpm_takes_the_estimate_and_gives_back_what_it_overcharged(
    postgres_url: str, openai_server: Any
) -> None:
    class Spy:
        def __init__(self, ledger: QualityLedger) -> None:
            self.ledger, self.dialect = ledger, ledger.dialect
            self.log: list[tuple[str, str, float, float]] = []

        def acquire_rate(self, key: str, **kw: float) -> float:
            wait = self.ledger.acquire_rate(key, **kw)
            self.log.append(("take", key, kw["cost"], wait))
            return wait

        def return_rate(self, key: str, *, amount: float) -> None:
            self.log.append(("give", key, amount, 0.0))
            self.ledger.return_rate(key, amount=amount)

    with QualityLedger(postgres_url) as ledger:
        spy = Spy(ledger)
        # 6000 tokens/min: 100/s, burst 25 — a 49-token estimate is taken in two slices
        limiter = SharedRateLimiter(cast(Any, spy), key="run:t", rpm=6000, tpm=6000)
        model = OpenAIAdapter("gpt-test", base_url=openai_server.base_url)
        adapter = ResilientAdapter(model, limiter=limiter, policy=RetryPolicy(max_retries=0))
        config = RunConfig(max_tokens=40)
        estimate = model.estimate("hi", config)[1]
        assert estimate == 49

        calls: list[Callable[[], LLMResponse]] = [
            lambda: run_closing(adapter.acomplete("hi", config)),
            lambda: adapter.complete("hi", config),
        ]
        for call in calls:
            spy.log.clear()
            usage = call().usage
            assert usage is not None
            used = usage.total_tokens
            granted = [(key, cost) for op, key, cost, wait in spy.log if op == "take" and wait == 0]
            assert [k for k, _ in granted] == ["run:t:tpm", "run:t:tpm", "run:t:rpm"]  # rpm last
            assert sum(c for k, c in granted if k == "run:t:tpm") == estimate
            assert max(c for k, c in granted if k == "run:t:tpm") <= 25  # never more than the burst
            assert any(op == "take" and wait > 0 for op, *_, wait in spy.log)  # the 2nd slice waited
            assert spy.log[-1] == ("give", "run:t:tpm", estimate - used, 0.0)


def test_sqlite_is_refused_and_a_database_error_is_raised_not_ignored(
    sqlite_url: str, openai_server: Any
) -> None:
    with QualityLedger(sqlite_url) as ledger, pytest.raises(LedgerError, match="needs a PostgreSQL ledger"):
        SharedRateLimiter(ledger, key="run:x", rpm=60)

    class Broken:
        dialect = "postgresql"

        def acquire_rate(self, key: str, **kw: float) -> float:
            raise LedgerError("connection lost")

    limiter = SharedRateLimiter(cast(Any, Broken()), key="run:x", rpm=60)
    adapter = ResilientAdapter(OpenAIAdapter("gpt-test", base_url=openai_server.base_url), limiter=limiter)
    with pytest.raises(LedgerError, match="connection lost"):
        run_closing(adapter.acomplete("hi", RunConfig()))
    with pytest.raises(LedgerError, match="connection lost"):
        adapter.complete("hi", RunConfig())
    assert openai_server.requests == []  # no call went out unlimited
