"""The sample sizes a projection ("about N more cases would settle it") looks at, and running
sums of expected per-case terms over them: what :mod:`~llm_connect.routing._bounds` and
:mod:`~llm_connect.routing._betting` project with."""

from __future__ import annotations

from functools import cache
from typing import Any

__all__ = ["MAX_PROJECTED", "running_sums", "sample_sizes"]

MAX_PROJECTED = 10_000_000
"""A projection looks this far ahead; beyond it the answer is ``None`` (not settled)."""


@cache
def sample_sizes() -> Any:
    """1..256 exactly, then 400 geometric steps up to :data:`MAX_PROJECTED`."""
    import numpy as np

    head = np.arange(1, 257, dtype=float)
    tail = np.round(np.geomspace(257, MAX_PROJECTED, 400))  # ascending: distinct = unlike the one before
    # (not np.unique: its masked-array check imports numpy.ma, ~60 ms of every CLI decision)
    return np.concatenate((head, tail[np.concatenate(([True], tail[1:] != tail[:-1]))]))


@cache
def _steps() -> Any:
    """The gaps between the sample sizes (the first from 0)."""
    import numpy as np

    return np.diff(sample_sizes(), prepend=0.0)


def running_sums(f: Any) -> Any:
    """``sum_{i<=t} f(i)`` along each row of ``f`` (its columns: :func:`sample_sizes`), exact over
    the unit steps and by the trapezoid rule beyond."""
    import numpy as np

    steps = _steps()
    shifted = np.concatenate((f[:, :1], f[:, :-1]), axis=1)
    return np.cumsum(np.where(steps <= 1.0, f, (f + shifted) / 2.0 * steps), axis=1)
