""" "Did you mean ...?" for names a person typed: judge options, suite fields."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest"]


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (:func:`difflib.get_close_matches`, cutoff 0.6), or ``None``.

    A case slip (``Normalize``), or a part of exactly one known name of three characters or more
    (``credit`` for ``argument_credit``), counts as close too.
    """
    names = sorted(set(known))
    matches = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if matches:
        return matches[0]
    folded = [k for k in names if name.lower() in k.lower()] if len(name) >= 3 else []
    return folded[0] if len(folded) == 1 else None
