"""One rate limit for a fleet of workers: token buckets in the PostgreSQL ledger.

:class:`SharedRateLimiter` has the interface of the in-process
:class:`~llm_connect.grading.RateLimiter` (``await acquire()``, ``acquire_sync()``)
so :class:`~llm_connect.grading.ResilientAdapter` uses either unchanged, but its
buckets live in the ledger (:meth:`QualityLedger.acquire_rate
<llm_connect.ledger.QualityLedger.acquire_rate>`, one atomic UPDATE), so every
process on every host given the same ledger and ``key`` shares one limit.

* ``rpm`` — bucket ``"{key}:rpm"``: ``rpm / 60`` calls per second, burst
  ``max(1, burst_s * rate)``. Over any window of ``T`` seconds at most
  ``burst + rate * T`` calls start (0.25 s of burst: +2.5 % over 10 s).
* ``tpm`` — bucket ``"{key}:tpm"``: before a call its estimated tokens are
  taken (the wrapped adapter's ``estimate``, as a budget tracker reserves them),
  in slices of at most the burst so a large call waits its turn instead of
  needing a full bucket; after the response what the estimate overcharged
  (estimate − ``usage.total_tokens``) is given back. ``ResilientAdapter`` does
  this through :meth:`SharedRateLimiter.acquire_call`; a bare :meth:`acquire`
  takes the rpm bucket only.

The tpm tokens are taken first and the rpm token last, right before the call
goes out, so the spacing of starts holds at the server. A failed call keeps its
estimate charged (the provider may have counted it); a retry takes afresh. A
database error while acquiring is raised, never treated as "no limit"; one while
giving tokens back is only logged (the fleet is then slower, never faster).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError, LedgerError
from llm_connect.grading._retry import CallLimit

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger
    from llm_connect.types import LLMResponse, RunConfig

__all__ = ["RateHold", "SharedRateLimiter"]

log = logging.getLogger(__name__)

_MIN_SLEEP_S = 0.001
_JITTER = 0.2  # sleeps last the returned wait times a uniform factor in [1, 1 + _JITTER]


def _positive(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(f"{name} must be a number > 0, not {value!r}")
    return float(value)


def fallback_estimate(prompt: Any, run_config: RunConfig) -> int:
    """Tokens charged for an adapter without ``estimate``: the prompt's characters / 4
    (its JSON when not a string), + 8, + ``max_tokens`` (else 4096)."""
    text = (
        prompt
        if isinstance(prompt, str)
        else json.dumps(getattr(prompt, "messages", str(prompt)), default=str)
    )
    return -(-len(text) // 4) + 8 + (run_config.max_tokens or 4096)


class _Bucket:
    __slots__ = ("burst", "name", "rate")

    def __init__(self, name: str, per_minute: float, burst_s: float) -> None:
        self.name = name
        self.rate = per_minute / 60.0
        self.burst = max(1.0, burst_s * self.rate)


class _Acquisition:
    """The tokens one call needs, taken step by step (one ledger call per step)."""

    def __init__(self, ledger: QualityLedger, steps: list[tuple[_Bucket, float]]) -> None:
        self.ledger = ledger
        self.steps = steps
        self.taken: dict[str, tuple[_Bucket, float]] = {}

    def step(self) -> float:
        """Take the next slice: 0.0 when all are taken, else seconds to wait."""
        while self.steps:
            bucket, cost = self.steps[0]
            wait = self.ledger.acquire_rate(
                bucket.name, rate_per_s=bucket.rate, burst=bucket.burst, cost=cost
            )
            if wait > 0:
                return float(wait)
            self.steps.pop(0)
            held = self.taken.get(bucket.name, (bucket, 0.0))[1]
            self.taken[bucket.name] = (bucket, held + cost)
        return 0.0

    def undo(self) -> None:
        """Give back what was taken (the call was abandoned before it went out)."""
        for name, (_, amount) in self.taken.items():
            _give_back(self.ledger, name, amount)
        self.taken.clear()


def _give_back(ledger: QualityLedger, name: str, amount: float) -> None:
    if amount <= 0:
        return
    try:
        ledger.return_rate(name, amount=amount)
    except Exception as exc:  # the fleet is only slower for it: never fail the call
        log.warning("could not give %.0f tokens back to rate bucket %s: %s", amount, name, exc)


def _sleep_for(wait: float) -> float:
    return max(_MIN_SLEEP_S, wait * random.uniform(1.0, 1.0 + _JITTER))


class RateHold:
    """The tpm tokens one call holds: :meth:`settle` with its response gives back the overcharge."""

    def __init__(self, ledger: QualityLedger, bucket: _Bucket, estimate: int) -> None:
        self.ledger = ledger
        self.bucket = bucket
        self.estimate = estimate
        self.returned = 0.0

    def settle(self, response: LLMResponse) -> None:
        """Give back ``estimate − usage.total_tokens`` (nothing when the response reports no usage).

        Usage above the estimate is charged on a best-effort basis: up to one burst, if the
        bucket has it now (never waited for: the call is already made)."""
        if response.usage is None:
            return
        over = self.estimate - response.usage.total_tokens
        if over > 0:
            self.returned = float(over)
            _give_back(self.ledger, self.bucket.name, self.returned)
        elif over < 0:  # best effort: one try, at most one burst
            extra = min(float(-over), self.bucket.burst)
            try:
                self.ledger.acquire_rate(
                    self.bucket.name, rate_per_s=self.bucket.rate, burst=self.bucket.burst, cost=extra
                )
            except Exception as exc:
                log.warning("could not charge %.0f extra tokens to %s: %s", extra, self.bucket.name, exc)

    async def asettle(self, response: LLMResponse) -> None:
        """:meth:`settle` in a worker thread."""
        await asyncio.to_thread(self.settle, response)


class SharedRateLimiter:
    """At most ``rpm`` calls and ``tpm`` tokens per minute for every process sharing ``ledger`` and ``key``.

    Args:
        ledger: an open PostgreSQL :class:`~llm_connect.ledger.QualityLedger`.
        key: the limit's name (a run: ``f"run:{run_id}"``); buckets ``key:rpm``, ``key:tpm``.
            Every worker must give the same ``rpm``/``tpm`` for the same key.
        rpm: calls per minute (``None``: no call limit).
        tpm: tokens per minute, charged at each call's estimate, settled to its usage.
        burst_s: the burst, in seconds of rate (at least one call / one token).

    Within a process one caller at a time polls the ledger (threads and event loops
    alike); waits sleep the time the ledger names plus up to 20 % jitter.

    Raises:
        ConfigurationError: no limit given, or a non-positive one.
        LedgerError: ``ledger`` is not PostgreSQL (SQLite cannot share a limit between hosts).
    """

    def __init__(
        self,
        ledger: QualityLedger,
        *,
        key: str,
        rpm: float | None = None,
        tpm: float | None = None,
        burst_s: float = 0.25,
    ) -> None:
        if ledger.dialect != "postgresql":
            raise LedgerError(
                f"a shared rate limit needs a PostgreSQL ledger, not {ledger.dialect}: SQLite is one "
                "file on one host, so it cannot hold a limit for workers on several (use RateLimiter "
                "for one process)"
            )
        if not key:
            raise ConfigurationError("a shared rate limit needs a key (e.g. 'run:<run id>')")
        rpm, tpm, burst = _positive(rpm, "rpm"), _positive(tpm, "tpm"), _positive(burst_s, "burst_s")
        if rpm is None and tpm is None:
            raise ConfigurationError("a shared rate limit needs rpm, tpm or both")
        assert burst is not None
        self.ledger = ledger
        self.key = key
        self.rpm, self.tpm, self.burst_s = rpm, tpm, burst
        self._rpm = None if rpm is None else _Bucket(f"{key}:rpm", rpm, burst)
        self._tpm = None if tpm is None else _Bucket(f"{key}:tpm", tpm, burst)
        self._gate = CallLimit(1)  # one poller per process: the others queue here, not in the database

    def __repr__(self) -> str:
        return f"SharedRateLimiter(key={self.key!r}, rpm={self.rpm}, tpm={self.tpm})"

    # -- what one call needs ---------------------------------------------------------

    def _plan(self, tokens: int) -> list[tuple[_Bucket, float]]:
        steps: list[tuple[_Bucket, float]] = []
        if self._tpm is not None and tokens > 0:
            left = float(tokens)
            while left > 0:  # slices of at most the burst: the bound stays burst + rate * T
                part = min(left, self._tpm.burst)
                steps.append((self._tpm, part))
                left -= part
        if self._rpm is not None:
            steps.append((self._rpm, 1.0))  # last: right before the call starts
        return steps

    def _estimate(self, adapter: Any, prompt: Any, run_config: RunConfig) -> int:
        estimate: Callable[[Any, RunConfig], tuple[float, int]] | None = getattr(adapter, "estimate", None)
        if estimate is None:
            return fallback_estimate(prompt, run_config)
        return int(estimate(prompt, run_config)[1])

    async def _atake(self, tokens: int) -> None:
        job = _Acquisition(self.ledger, self._plan(tokens))
        async with self._gate:
            try:
                while (wait := await asyncio.to_thread(job.step)) > 0:
                    await asyncio.sleep(_sleep_for(wait))
            except BaseException:
                job.undo()
                raise

    def _take(self, tokens: int) -> None:
        job = _Acquisition(self.ledger, self._plan(tokens))
        with self._gate:
            try:
                while (wait := job.step()) > 0:
                    time.sleep(_sleep_for(wait))
            except BaseException:
                job.undo()
                raise

    def _hold(self, tokens: int) -> RateHold | None:
        return None if self._tpm is None else RateHold(self.ledger, self._tpm, tokens)

    # -- the RateLimiter interface ---------------------------------------------------

    async def acquire(self, tokens: int = 0) -> None:
        """Wait (asynchronously) until the fleet may start a call using ``tokens`` (rpm only when 0)."""
        await self._atake(tokens)

    def acquire_sync(self, tokens: int = 0) -> None:
        """Blocking :meth:`acquire`."""
        self._take(tokens)

    # -- the per-call hook ResilientAdapter uses ----------------------------------------

    async def acquire_call(self, adapter: Any, prompt: Any, run_config: RunConfig) -> RateHold | None:
        """Wait for the call's rpm slot and its estimated tokens; settle the hold with the response."""
        tokens = self._estimate(adapter, prompt, run_config) if self._tpm is not None else 0
        await self._atake(tokens)
        return self._hold(tokens)

    def acquire_call_sync(self, adapter: Any, prompt: Any, run_config: RunConfig) -> RateHold | None:
        """Blocking :meth:`acquire_call`."""
        tokens = self._estimate(adapter, prompt, run_config) if self._tpm is not None else 0
        self._take(tokens)
        return self._hold(tokens)
