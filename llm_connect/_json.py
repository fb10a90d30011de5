"""Compact JSON text for values the library stores (grade details, run configs).

One encoding for both places that need it: :class:`~llm_connect.grading.GradingResult`
validates its ``details`` by encoding them, and the ledger stores that same
text, so a grade's details are encoded once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["compact_dumps", "strict_dumps"]


def _mapping_as_dict(value: Any) -> Any:
    if isinstance(value, Mapping):  # a read-only mapping (MappingProxyType) nested in a value
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encoder(*, allow_nan: bool) -> Callable[[Any], str]:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=...)``, faster.

    The C encoder is built once (``json.dumps`` builds a ``JSONEncoder`` and its
    C encoder on every call with non-default options) and without the
    circular-reference bookkeeping; a self-containing value overflows the
    recursion limit and falls back to ``json.dumps``, which names the problem.
    """

    def checked(value: Any) -> str:
        return json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan, default=_mapping_as_dict
        )

    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has the C encoder
        return checked
    c_encode = make(
        None, _mapping_as_dict, json.encoder.encode_basestring, None, ":", ",", False, False, allow_nan
    )

    def dumps(value: Any) -> str:
        try:
            return "".join(c_encode(value, 0))
        except RecursionError:
            return checked(value)

    return dumps


compact_dumps: Callable[[Any], str] = _encoder(allow_nan=True)
"""Compact JSON (no spaces, UTF-8 kept as is); NaN and infinities written as JavaScript does."""

strict_dumps: Callable[[Any], str] = _encoder(allow_nan=False)
"""Like :data:`compact_dumps`, but NaN and infinities raise ``ValueError`` (strict JSON)."""
