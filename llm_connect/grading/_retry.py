"""Retries, rate limiting and bounded concurrency around model calls.

* :class:`RetryPolicy` — exponential backoff with full jitter, honouring a
  429's ``Retry-After``. Only errors whose ``retryable`` flag is set (rate
  limits, timeouts, connection errors, 5xx) are retried; other 4xx, auth
  errors and malformed answers fail at once.
* :class:`RateLimiter` — at most ``rpm`` calls start per minute (evenly spaced).
* :class:`CallLimit` — at most ``limit`` calls in flight, counted across
  threads (synchronous callers) and asyncio tasks of any event loop alike.
* :class:`ResilientAdapter` — wraps an :class:`~llm_connect.adapters.LLMAdapter`
  with all three (retry, rate limit, a shared :class:`CallLimit`); batch runs
  wrap both sides and LLM judges' adapters in one, so every call, ``complete``
  or ``acomplete``, is bounded.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, TypeVar

from llm_connect.errors import AdapterError, ConfigurationError, RateLimitError
from llm_connect.types import LLMResponse, RunConfig

if TYPE_CHECKING:
    from llm_connect.adapters import LLMAdapter

__all__ = ["CallLimit", "RateLimit", "RateLimiter", "ResilientAdapter", "RetryPolicy"]

T = TypeVar("T")


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


class RateLimit(Protocol):
    """What :class:`ResilientAdapter` needs of a limiter (:class:`RateLimiter`,
    :class:`~llm_connect.grading.SharedRateLimiter`).

    A limiter may also offer ``await acquire_call(adapter, prompt, run_config)`` /
    ``acquire_call_sync(...)``: then it is used instead of ``acquire`` (a token limit
    needs the call's estimate), and what it returns, when not ``None``, is settled
    with the response (``await held.asettle(response)`` / ``held.settle(response)``)
    after a successful call.
    """

    async def acquire(self) -> None: ...

    def acquire_sync(self) -> None: ...


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


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Waiter:
    """One caller queued for a slot: a thread (``event``) or an asyncio task (``future``)."""

    __slots__ = ("event", "future", "granted", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.loop = loop
        self.event: threading.Event | None = threading.Event() if loop is None else None
        self.future: asyncio.Future[None] | None = None if loop is None else loop.create_future()
        self.granted = False

    def wake(self) -> bool:
        """Hand this waiter the slot (under the limit's lock); ``False`` when nobody can take it."""
        if self.event is not None:
            self.event.set()
        else:
            assert self.loop is not None and self.future is not None
            try:
                self.loop.call_soon_threadsafe(_resolve, self.future)
            except RuntimeError:  # its event loop is closed: the task is gone
                return False
        self.granted = True
        return True


class CallLimit:
    """At most ``limit`` calls in flight at once, across threads and asyncio tasks.

    One counter serves both kinds of caller: ``with limit:`` blocks the calling
    thread until a slot is free, ``async with limit:`` suspends the task (of any
    event loop: waking a task from another thread goes through
    ``call_soon_threadsafe``). Slots are handed out first come, first served; a
    released slot goes straight to the oldest waiter. A task cancelled while it
    waits gives its place (or the slot it was just handed) back.

    Never enter it synchronously from a coroutine: a thread that runs an event loop
    must not block on slots that tasks of that same loop hold or await. That case
    raises :class:`~llm_connect.errors.ConfigurationError` instead of deadlocking
    (a synchronous call from a thread whose loop holds no slot, such as a notebook
    cell, simply waits).

    Raises:
        ConfigurationError: ``limit`` is not an integer >= 1.
    """

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigurationError(f"the call limit must be an integer >= 1, not {limit!r}")
        self.limit = limit
        self._lock = threading.Lock()
        self._in_flight = 0
        self._peak = 0
        self._waiters: deque[_Waiter] = deque()
        self._loop_use: dict[int, int] = {}  # id(loop) -> its tasks holding or awaiting a slot

    def __repr__(self) -> str:
        return f"CallLimit({self.limit})"

    @property
    def in_flight(self) -> int:
        """Slots taken now."""
        with self._lock:
            return self._in_flight

    @property
    def peak(self) -> int:
        """The most slots ever taken at once (never more than :attr:`limit`)."""
        with self._lock:
            return self._peak

    # -- bookkeeping, always under self._lock -----------------------------------

    def _take(self) -> bool:
        if self._in_flight < self.limit and not self._waiters:
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
            return True
        return False

    def _give_back(self) -> None:
        while self._waiters:
            if self._waiters.popleft().wake():
                return  # the slot changes hands; in_flight is unchanged
        self._in_flight -= 1

    def _unuse(self, key: int) -> None:
        left = self._loop_use[key] - 1
        if left:
            self._loop_use[key] = left
        else:
            del self._loop_use[key]

    def _abandon(self, waiter: _Waiter) -> None:
        if waiter.granted:
            self._give_back()
        else:
            self._waiters.remove(waiter)

    # -- threads ------------------------------------------------------------------

    def __enter__(self) -> CallLimit:
        loop = _running_loop()
        with self._lock:
            if self._take():
                return self
            if loop is not None and self._loop_use.get(id(loop)):
                raise ConfigurationError(
                    "a synchronous model call from a coroutine would wait for call slots that tasks "
                    "of its own event loop hold: use acomplete, or run it with asyncio.to_thread"
                )
            waiter = _Waiter(None)
            self._waiters.append(waiter)
        assert waiter.event is not None
        try:
            waiter.event.wait()
        except BaseException:  # KeyboardInterrupt while waiting
            with self._lock:
                self._abandon(waiter)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._lock:
            self._give_back()

    # -- asyncio tasks ------------------------------------------------------------

    async def __aenter__(self) -> CallLimit:
        loop = asyncio.get_running_loop()
        key = id(loop)
        with self._lock:
            self._loop_use[key] = self._loop_use.get(key, 0) + 1
            if self._take():
                return self
            waiter = _Waiter(loop)
            self._waiters.append(waiter)
        assert waiter.future is not None
        try:
            await waiter.future
        except BaseException:  # cancelled while waiting, or just after being handed the slot
            with self._lock:
                self._abandon(waiter)
                self._unuse(key)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        key = id(asyncio.get_running_loop())
        with self._lock:
            self._unuse(key)
            self._give_back()


# Adapters handed the same asyncio.Semaphore share one CallLimit of its size.
_FROM_SEMAPHORE: weakref.WeakKeyDictionary[asyncio.Semaphore, CallLimit] = weakref.WeakKeyDictionary()
_FROM_SEMAPHORE_LOCK = threading.Lock()


def _call_limit(bound: CallLimit | asyncio.Semaphore | int | None) -> CallLimit | None:
    if bound is None or isinstance(bound, CallLimit):
        return bound
    if isinstance(bound, asyncio.Semaphore):
        with _FROM_SEMAPHORE_LOCK:
            limit = _FROM_SEMAPHORE.get(bound)
            if limit is None:
                limit = _FROM_SEMAPHORE[bound] = CallLimit(bound._value)
            return limit
    if isinstance(bound, int) and not isinstance(bound, bool):
        return CallLimit(bound)
    raise ConfigurationError(
        f"semaphore must be a CallLimit, an asyncio.Semaphore or an int, not {type(bound).__name__}"
    )


class ResilientAdapter:
    """An :class:`~llm_connect.adapters.LLMAdapter` with retries, a rate limit and a
    concurrency bound around another adapter.

    ``adapter_id`` is the wrapped adapter's, so cache keys and grades do not
    change. ``semaphore`` is the :class:`CallLimit` shared by every adapter of a
    run: :meth:`complete` (from any thread) and :meth:`acomplete` (from any event
    loop) take a slot of the same limit, so never more than ``limit`` calls are
    in flight in total. An ``int`` makes a limit of that size for this adapter
    alone; an ``asyncio.Semaphore`` (accepted for compatibility) stands for a
    :class:`CallLimit` of its current size, shared by every adapter given that
    same semaphore (the semaphore itself is not acquired).

    Each attempt takes a slot, then waits for its rate-limiter start time, then
    calls the wrapped adapter: starts stay ``60 / rpm`` seconds apart even when
    calls queue for slots. The slot is never held during a backoff wait, and a
    budget reservation made by the wrapped adapter lives only as long as one
    attempt (released when it fails, so a retry reserves afresh and nothing
    leaks). ``calls`` counts the attempts actually made.
    """

    def __init__(
        self,
        adapter: LLMAdapter,
        *,
        policy: RetryPolicy | None = None,
        limiter: RateLimit | None = None,
        semaphore: CallLimit | asyncio.Semaphore | int | None = None,
        on_retry: Callable[[int, BaseException, float], None] | None = None,
    ) -> None:
        self.adapter = adapter
        self.adapter_id = adapter.adapter_id
        self.policy = policy or RetryPolicy()
        self.limiter = limiter
        self.semaphore: CallLimit | None = _call_limit(semaphore)
        self.on_retry = on_retry
        self._count_lock = threading.Lock()
        self.calls = 0

    def __repr__(self) -> str:
        return f"ResilientAdapter({self.adapter!r}, {self.policy!r})"

    def __getattr__(self, name: str) -> object:  # model, provider... of the wrapped adapter
        if name == "adapter":
            raise AttributeError(name)
        return getattr(self.adapter, name)

    def _count(self) -> None:
        with self._count_lock:
            self.calls += 1

    async def _call(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        held = None
        if self.limiter is not None:
            per_call = getattr(self.limiter, "acquire_call", None)  # a token limit: needs the call
            if per_call is None:
                await self.limiter.acquire()
            else:
                held = await per_call(self.adapter, prompt, run_config)
        self._count()
        response = await self.adapter.acomplete(prompt, run_config)
        if held is not None:
            await held.asettle(response)  # gives back what the estimate overcharged
        return response

    async def _attempt(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        if self.semaphore is None:
            return await self._call(prompt, run_config)
        async with self.semaphore:
            return await self._call(prompt, run_config)

    def _call_sync(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        held = None
        if self.limiter is not None:
            per_call = getattr(self.limiter, "acquire_call_sync", None)
            if per_call is None:
                self.limiter.acquire_sync()
            else:
                held = per_call(self.adapter, prompt, run_config)
        self._count()
        response = self.adapter.complete(prompt, run_config)
        if held is not None:
            held.settle(response)
        return response

    def _attempt_sync(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        if self.semaphore is None:
            return self._call_sync(prompt, run_config)
        with self.semaphore:
            return self._call_sync(prompt, run_config)

    async def acomplete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """Call the wrapped adapter, retrying retryable failures."""
        return await self.policy.acall(lambda: self._attempt(prompt, run_config), on_retry=self.on_retry)

    def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """Synchronous :meth:`acomplete`: the same retries, rate limit and call limit.

        Blocks the calling thread while it waits for a slot; call it from worker
        threads, never from a coroutine (see :class:`CallLimit`).
        """
        return self.policy.call(lambda: self._attempt_sync(prompt, run_config), on_retry=self.on_retry)
