"""Event loops the library starts itself, and the async SDK clients opened on them.

An ``openai.AsyncOpenAI`` client keeps an ``httpx`` connection pool that belongs to the event
loop it was first used on. When the library runs a coroutine on a loop of its own
(``BatchGrader.run``, ``grade``, ``analyze_stability``), :func:`run_in_own_loop` closes every client
opened on that loop before the loop ends, so no socket outlives its loop (no "unclosed
transport" warnings, no connections left for the server to time out). A caller's own loop
is the caller's: clients opened there stay open for its next call on that loop.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

__all__ = ["LoopClients", "close_loop_clients", "register", "run_in_own_loop"]

T = TypeVar("T")
_log = logging.getLogger("llm_connect.adapters")


class LoopClients(Protocol):
    """What keeps async clients per event loop (``adapters._openai``'s client holder)."""

    async def aclose_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close the client opened on ``loop``, if any; a later call on it opens a new one."""


_owners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, weakref.WeakSet[Any]] = (
    weakref.WeakKeyDictionary()
)


# The loops :func:`run_in_own_loop` is running, each with the owners registered on it held alive until their
# clients are closed: an adapter dropped before its loop ends (one built inside the coroutine, a
# judge made for one call) still has its client closed, not left to the garbage collector.
_held: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[LoopClients]] = weakref.WeakKeyDictionary()


def register(owner: LoopClients, loop: asyncio.AbstractEventLoop) -> None:
    """Note that ``owner`` opened a client on ``loop`` (called as the client is created)."""
    _owners.setdefault(loop, weakref.WeakSet()).add(owner)
    held = _held.get(loop)
    if held is not None:
        held.append(owner)


async def close_loop_clients() -> None:
    """Close every async client opened on the running loop. A client that fails to close is
    logged, not raised: the work the loop did stands."""
    loop = asyncio.get_running_loop()
    for owner in list(_owners.pop(loop, ())):
        try:
            await owner.aclose_loop(loop)
        except Exception as exc:  # a pool that will not close must not lose the run's result
            _log.debug("closing an async client failed: %s", exc)


async def _closing(coro: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    _held[loop] = []
    try:
        return await coro
    finally:
        try:
            await close_loop_clients()
        finally:
            del _held[loop]


def run_in_own_loop(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, closing the async clients opened on its loop before it ends."""
    return asyncio.run(_closing(coro))
