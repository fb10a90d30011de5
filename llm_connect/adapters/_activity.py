"""How many model calls this process has in flight (read by the local embedder's thread rule).

The OpenAI adapter counts each chat-completion request while it waits for the
answer; :class:`~llm_connect.adapters.SentenceTransformerEmbeddingAdapter` with
``num_threads="auto"`` encodes on one thread while any call is in flight (torch's
spinning worker threads slow the event loop and the HTTP clients down) and on
every core when none is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["calls_in_flight", "model_call"]

_lock = threading.Lock()
_in_flight = 0


def calls_in_flight() -> int:
    """Model calls of this process waiting for their answer right now."""
    return _in_flight


@contextmanager
def model_call() -> Iterator[None]:
    """Count one model call as in flight for the duration of the block."""
    global _in_flight
    with _lock:
        _in_flight += 1
    try:
        yield
    finally:
        with _lock:
            _in_flight -= 1
