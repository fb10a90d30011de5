"""Slice keys and slice membership: which slice of a task a case is in (``RoutingPolicy.slice_by``).

* ``tag:PREFIX`` — the case's first tag ``PREFIX:VALUE`` gives the slice ``VALUE``
  (``tag:lang`` and the tag ``lang:fr``: slice ``fr``);
* ``meta:KEY`` — the case's ``metadata[KEY]`` (a string as it is, another JSON value as JSON);
* ``tools`` — ``tools`` when the case offers the model tools, else ``no tools``;
* ``length`` — the prompt's length in characters, in quartiles ``Q1``..``Q4`` whose cut
  points are fixed when first computed.

A case without the tag or metadata key is in the slice :data:`NO_VALUE`. Kept apart from the
decision values so that :class:`~llm_connect.values.RoutingPolicy` can check a key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_connect.errors import ConfigurationError

__all__ = [
    "LENGTH_SLICES",
    "NO_TOOLS",
    "NO_VALUE",
    "SLICE_KINDS",
    "TOOLS",
    "SliceError",
    "SliceKey",
    "length_cuts",
    "parse_slice_key",
    "slice_of",
]

SLICE_KINDS = ("tag:PREFIX", "meta:KEY", "tools", "length")
"""The forms a slice key takes."""
NO_VALUE = "(none)"
"""The slice of the cases that carry no value for a ``tag:`` or ``meta:`` key."""
LENGTH_SLICES = ("Q1", "Q2", "Q3", "Q4")
"""The ``length`` slices, shortest prompts first."""
TOOLS, NO_TOOLS = "tools", "no tools"


class SliceError(ConfigurationError):
    """A slice key the router cannot slice by (unknown form, or no case of the task carries it);
    ``key`` names the input."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class SliceKey:
    """A parsed slice key: ``kind`` is ``tag``, ``meta``, ``tools`` or ``length``; ``name`` the
    tag prefix or metadata key (empty for the built-ins)."""

    kind: str
    name: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}" if self.name else self.kind


def parse_slice_key(key: str) -> SliceKey:
    """The :class:`SliceKey` of ``key`` (``tag:lang``, ``meta:customer_tier``, ``tools``, ``length``);
    :class:`SliceError` naming ``key`` for any other form."""
    if not isinstance(key, str):
        raise SliceError(repr(key), f"slice key must be a string, not {key!r}")
    if key in ("tools", "length"):
        return SliceKey(key)
    kind, colon, name = key.partition(":")
    if colon and kind in ("tag", "meta") and name.strip() == name and name:
        return SliceKey(kind, name)
    raise SliceError(key, f"unknown slice key {key!r}: use one of {', '.join(SLICE_KINDS)}")


def length_cuts(lengths: Sequence[int]) -> tuple[float, float, float]:
    """The quartile cut points of prompt ``lengths`` (numpy's default, linear interpolation of
    the sorted lengths): ``Q1`` is at most the first, ``Q4`` above the third."""
    values = sorted(lengths)
    if not values:
        raise ValueError("no prompt lengths to cut")

    def at(p: float) -> float:
        pos = p * (len(values) - 1)
        low = int(pos)
        high = min(low + 1, len(values) - 1)
        return float(values[low] + (values[high] - values[low]) * (pos - low))

    return (at(0.25), at(0.5), at(0.75))


def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def slice_of(
    key: SliceKey,
    *,
    tags: Sequence[str] = (),
    metadata: Mapping[str, Any] | None = None,
    tools: bool = False,
    prompt_chars: int | None = None,
    cuts: Sequence[float] | None = None,
) -> str:
    """The slice a case with these ``tags``, ``metadata``, tools offered and prompt length is in
    under ``key`` (``length`` needs the ``cuts``; an unknown length is :data:`NO_VALUE`)."""
    if key.kind == "tag":
        prefix = key.name + ":"
        for tag in tags:
            if isinstance(tag, str) and tag.startswith(prefix) and len(tag) > len(prefix):
                return tag[len(prefix) :]
        return NO_VALUE
    if key.kind == "meta":
        value = (metadata or {}).get(key.name)
        return NO_VALUE if value is None else _scalar(value)
    if key.kind == "tools":
        return TOOLS if tools else NO_TOOLS
    if prompt_chars is None or cuts is None:
        return NO_VALUE
    for name, cut in zip(LENGTH_SLICES, cuts, strict=False):
        if prompt_chars <= cut:
            return name
    return LENGTH_SLICES[-1]
