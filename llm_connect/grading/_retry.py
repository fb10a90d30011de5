"""Retries, rate limiting and bounded concurrency around model calls.

* :class:`RetryPolicy` — exponential backoff with full jitter, honouring a
  429's ``Retry-After``. Only errors whose ``retryable`` flag is set (rate
  limits, timeouts, connection errors, 5xx) are retried; other 4xx, auth
  errors and malformed answers fail at once.
* :class:`RateLimiter` — at most ``rpm`` calls start per minute (evenly spaced).
* :class:`ResilientAdapter` — wraps an :class:`~llm_connect.adapters.LLMAdapter`
  with all three (retry, rate limit, a concurrency semaphore); batch runs wrap
  both sides and LLM judges' adapters in one, so every call is bounded.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from llm_connect.errors import AdapterError, ConfigurationError, RateLimitError
from llm_connect.types import LLMResponse, RunConfig

if TYPE_CHECKING:
    from llm_connect.adapters import LLMAdapter

__all__ = ["RateLimiter", "ResilientAdapter", "RetryPolicy", "is_retryable"]

T = TypeVar("T")


def is_retryable(exc: BaseException) -> bool:
    """Whether a failed call may succeed when retried (``AdapterError.retryable``)."""
    return isinstance(exc, AdapterError) and bool(exc.retryable)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter.

    Attempt ``n`` (0-based) waits a uniform random time in
    ``[0, min(max_delay_s, base_delay_s * 2**n)]``; a
    :class:`~llm_connect.errors.RateLimitError` carrying ``retry_after`` waits
    at least that long (capped at ``max_retry_after_s``).
    """

    max_retries: int = 4
    """Retries after the first attempt (0 disables retrying)."""
    base_delay_s: float = 0.5
    """Backoff scale: the first retry waits up to this long."""
    max_delay_s: float = 30.0
    """Upper bound of one backoff wait."""
    max_retry_after_s: float = 120.0
    """Upper bound honoured for a server's ``Retry-After``."""
    jitter: bool = True
    """Randomise waits (full jitter) so parallel callers do not retry in lockstep."""

    def __post_init__(self) -> None:
        retries = self.max_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"max_retries must be an integer >= 0, not {self.max_retries!r}")
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ConfigurationError("retry delays must be >= 0")

    def delay(self, attempt: int, error: BaseException, *, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``attempt + 1`` after ``error``."""
        cap = min(self.max_delay_s, self.base_delay_s * (2**attempt))
        wait = (rng or random).uniform(0.0, cap) if self.jitter else cap
        if isinstance(error, RateLimitError) and error.retry_after is not None:
            wait = max(wait, min(float(error.retry_after), self.max_retry_after_s))
        return wait

    def _retry_wait(
        self,
        attempt: int,
        exc: AdapterError,
        on_retry: Callable[[int, BaseException, float], None] | None,
    ) -> float:
        """The wait before retrying after ``exc``; re-raises it when no retry is due."""
        if not exc.retryable or attempt >= self.max_retries:
            raise exc
        wait = self.delay(attempt, exc)
        if on_retry is not None:
            on_retry(attempt + 1, exc, wait)
        return wait

    async def acall(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        on_retry: Callable[[int, BaseException, float], None] | None = None,
    ) -> T:
        """Await ``fn()``, retrying retryable errors; the last error propagates."""
        attempt = 0
        while True:
            try:
                return await fn()
            except AdapterError as exc:
                wait = self._retry_wait(attempt, exc, on_retry)
                attempt += 1
                await asyncio.sleep(wait)

    def call(
        self,
        fn: Callable[[], T],
        *,
        on_retry: Callable[[int, BaseException, float], None] | None = None,
    ) -> T:
        """Synchronous :meth:`acall`."""
        attempt = 0
        while True:
            try:
                return fn()
            except AdapterError as exc:
                wait = self._retry_wait(attempt, exc, on_retry)
                attempt += 1
                time.sleep(wait)


class RateLimiter:
    """Lets at most ``rpm`` calls start per minute, spaced ``60 / rpm`` seconds apart.

    Safe across asyncio tasks and threads (the slot bookkeeping is locked; the
    wait happens outside the lock).
    """

    def __init__(self, rpm: float) -> None:
        if isinstance(rpm, bool) or not isinstance(rpm, (int, float)) or rpm <= 0:
            raise ConfigurationError(f"rpm must be a number > 0, not {rpm!r}")
        self.rpm = float(rpm)
        self.interval_s = 60.0 / self.rpm
        self._lock = threading.Lock()
        self._next = 0.0

    def _reserve(self) -> float:
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval_s
            return slot - now

    async def acquire(self) -> None:
        """Wait (asynchronously) for the next free slot."""
        wait = self._reserve()
        if wait > 0:
            await asyncio.sleep(wait)

    def acquire_sync(self) -> None:
        """Wait (blocking) for the next free slot."""
        wait = self._reserve()
        if wait > 0:
            time.sleep(wait)


class ResilientAdapter:
    """An :class:`~llm_connect.adapters.LLMAdapter` with retries, a rate limit and a
    concurrency bound around another adapter.

    ``adapter_id`` is the wrapped adapter's, so cache keys and grades do not
    change. The semaphore is held only while a call is in flight, never
    during a backoff wait. ``calls`` counts the attempts actually made.
    """

    def __init__(
        self,
        adapter: LLMAdapter,
        *,
        policy: RetryPolicy | None = None,
        limiter: RateLimiter | None = None,
        semaphore: asyncio.Semaphore | None = None,
        on_retry: Callable[[int, BaseException, float], None] | None = None,
    ) -> None:
        self.adapter = adapter
        self.adapter_id = adapter.adapter_id
        self.policy = policy or RetryPolicy()
        self.limiter = limiter
        self.semaphore = semaphore
        self.on_retry = on_retry
        self.calls = 0

    def __repr__(self) -> str:
        return f"ResilientAdapter({self.adapter!r}, {self.policy!r})"

    def __getattr__(self, name: str) -> object:  # model, provider... of the wrapped adapter
        if name == "adapter":
            raise AttributeError(name)
        return getattr(self.adapter, name)

    async def _attempt(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        if self.limiter is not None:
            await self.limiter.acquire()
        self.calls += 1
        if self.semaphore is None:
            return await self.adapter.acomplete(prompt, run_config)
        async with self.semaphore:
            return await self.adapter.acomplete(prompt, run_config)

    async def acomplete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """Call the wrapped adapter, retrying retryable failures."""
        return await self.policy.acall(lambda: self._attempt(prompt, run_config), on_retry=self.on_retry)

    def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """Synchronous :meth:`acomplete` (no semaphore: it is an asyncio primitive)."""

        def attempt() -> LLMResponse:
            if self.limiter is not None:
                self.limiter.acquire_sync()
            self.calls += 1
            return self.adapter.complete(prompt, run_config)

        return self.policy.call(attempt, on_retry=self.on_retry)
