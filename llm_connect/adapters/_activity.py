"""How many model calls this process has in flight (read by the local embedder's thread rule).

The OpenAI adapter counts each chat-completion request while it waits for the
answer; :class:`~llm_connect.adapters.SentenceTransformerEmbeddingAdapter` with
``num_threads="auto"`` encodes on one thread while any call is in flight (torch's
spinning worker threads slow the event loop and the HTTP clients down) and on
every core when none is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

from llm_connect.errors import ConfigurationError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "AUTO_MIN_TEXTS",
    "calls_in_flight",
    "check_num_threads",
    "distinct_texts",
    "model_call",
    "rows_in_order",
    "threads_for",
]

AUTO_MIN_TEXTS = 64
"""``num_threads="auto"``: encodes of fewer distinct texts than this stay on one thread."""

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


def check_num_threads(num_threads: object) -> None:
    """Refuse a ``num_threads`` that is not an int >= 1, ``"auto"`` or ``None``."""
    if (
        num_threads is not None
        and num_threads != "auto"
        and (isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1)
    ):
        raise ConfigurationError(f"num_threads must be an int >= 1, 'auto' or None, not {num_threads!r}")


def threads_for(num_threads: int | Literal["auto"] | None, n_texts: int) -> int | None:
    """The threads a local encode of ``n_texts`` distinct texts runs with now under the
    ``num_threads`` setting (``None``: the runtime's own, one per core): ``"auto"`` is one
    thread below :data:`AUTO_MIN_TEXTS` texts or while model calls are in flight."""
    if num_threads != "auto":
        return num_threads
    if n_texts < AUTO_MIN_TEXTS or calls_in_flight() > 0:
        return 1
    return None


def distinct_texts(texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(texts, the distinct ones in first-seen order)``; a text that is not a str is a TypeError."""
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"embed() text {i} must be a str, not {type(text).__name__}")
    return texts, list(dict.fromkeys(texts))


def rows_in_order(unique_rows: np.ndarray, texts: list[str], unique: list[str]) -> np.ndarray:
    """The rows of ``unique_rows`` (one per text of ``unique``) for ``texts``, in order: the same
    array when ``texts`` has no repeats, else a new one (rows copied, never shared)."""
    if len(unique) == len(texts):
        return unique_rows
    position = {text: i for i, text in enumerate(unique)}
    return unique_rows[[position[text] for text in texts]]
