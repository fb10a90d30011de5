"""JSON for the importer's hot path: orjson when it is installed, the standard library when not.

orjson (the ``[traffic]`` extra) parses the large OTLP export lines and writes
the cases about twice as fast as :mod:`json`. Both give the same values:

* :func:`loads` tries orjson and, when it refuses a text, :func:`json.loads`, so
  what the standard parser accepts (``NaN``, ``Infinity``, lone surrogates) is
  still read; only text neither accepts raises :class:`ValueError`;
* :func:`dumps_line` writes compact JSON (UTF-8, no ASCII escaping) and refuses
  NaN and infinity (``None``), which orjson would write as ``null``;
* :func:`canonical` is a key for equal JSON values (sorted keys, compact), by the
  standard encoder always, so a seeded sample does not depend on the install.

One difference is left: orjson reads an integer beyond 64 bits as a float.

``FAST`` says which one runs; ``use_orjson(False)`` turns orjson off (the tests
run both ways).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:  # pragma: no cover - which branch runs depends on the install
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None  # type: ignore[assignment]

__all__ = ["FAST", "canonical", "dumps_line", "loads", "no_cyclic_gc", "use_orjson"]

FAST = _orjson is not None
"""Whether orjson is in use."""


def use_orjson(on: bool) -> bool:
    """Turn orjson on (when installed) or off; return whether it is now in use."""
    global FAST
    FAST = on and _orjson is not None
    return FAST


def loads(data: bytes | str) -> Any:
    """The JSON value of ``data``.

    Raises:
        ValueError: neither parser accepts ``data`` (the standard parser's message).
    """
    if FAST:
        try:
            return _orjson.loads(data)
        except ValueError:
            pass  # NaN, Infinity, a lone surrogate: json.loads decides
    return json.loads(data)


def _finite(value: Any) -> bool:
    """No NaN or infinity anywhere in ``value`` (dicts and lists walked, without recursion)."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        v = pop()
        t = type(v)
        if t is str or t is int or t is bool or v is None:
            continue
        if t is float or isinstance(v, float):
            if v - v != 0.0:  # NaN - NaN and inf - inf are NaN
                return False
        elif t is dict or isinstance(v, dict):
            extend(v.values())
        elif t is list or isinstance(v, (list, tuple)):
            extend(v)
        # anything else: orjson refuses it and the standard encoder (allow_nan=False) decides
    return True


def dumps_line(value: Any, *, checked: tuple[str, ...] = ()) -> bytes | None:
    """``value`` as one line of compact UTF-8 JSON with ``\\n``, or ``None`` if it holds NaN or infinity.

    ``checked`` names top-level keys whose values are known to be finite (a
    validated conversation): they are not walked.
    """
    if FAST:
        if isinstance(value, dict) and checked:
            value_ok = _finite([v for k, v in value.items() if k not in checked])
        else:
            value_ok = _finite(value)
        if not value_ok:
            return None
        try:
            return _orjson.dumps(value, option=_orjson.OPT_APPEND_NEWLINE)
        except TypeError:
            pass  # an integer beyond 64 bits, a non-string key: the standard encoder decides
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return None
    return (text + "\n").encode("utf-8")


def canonical(value: Any) -> bytes:
    """Equal JSON values give equal bytes (sorted keys, compact); for keys and digests, not for output."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode(
        "utf-8", "surrogatepass"
    )


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector off for the import, back on (if it was) afterwards.

    Each OTLP export line parses into tens of thousands of containers that live
    until the line is read; allocating them triggers collections that walk them
    (and promote them, so that full collections follow): on 200-span lines that
    doubled the time of the parse alone. The import makes no reference cycles
    of its own (what it allocates is freed by reference counting), so memory
    stays as bounded with the collector off.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
