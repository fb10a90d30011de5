"""Shared by every judge that asks an LLM: fence data in the prompt, read the one JSON object of a reply.

A leaf of the root package (standard library only): the LLM judges of
:mod:`llm_connect.grading.judges` and the safety scorer's LLM safety judge
(:mod:`llm_connect.scoring.safety`, below grading) both use it.

Texts under judgement go inside fences whose id is derived from the material
(so the same pair always gives the same request) and never occurs inside a
fenced text, so no response can close its fence early and pose as
instructions.

A reply is read by :func:`reply_object`, which never guesses. The reply must
hold exactly one top-level JSON object: the whole reply, or one object with
prose or a Markdown code fence around it. Every ``{`` of the reply must open
a well-formed object (or lie inside one); a malformed object is an error, and
the reader never moves on to look for objects *inside* it (that is where a
graded response's injected ``{"quality_score": 1.0}`` sits when the judge
quotes it in broken JSON). Several top-level objects, an array of objects, a
duplicated key, or two different values of the score key anywhere in the
object are errors too.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

__all__ = ["ReplyError", "fence", "fence_id", "reply_object"]

# Where a top-level JSON value the reader must account for can start: an object,
# or an array whose first item is an object.
_OPENER = re.compile(r"\{|\[\s*\{")


class ReplyError(ValueError):
    """A reply does not hold exactly one usable JSON object (the message says why)."""


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def fence_id(*parts: str) -> str:
    """A 16-hex-digit id derived from ``parts`` (stable for the same material)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def fence(name: str, text: str, nonce: str) -> str:
    """``text`` between ``<<<BEGIN NAME ID>>>`` and ``<<<END NAME ID>>>`` lines.

    Any occurrence of the id inside ``text`` is removed first, so the text
    cannot hold a marker that ends its fence.
    """
    text = text.replace(nonce, "[fence id removed]")
    return f"<<<BEGIN {name} {nonce}>>>\n{text}\n<<<END {name} {nonce}>>>"


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, strict=False)
"""Raw control characters (a newline or tab) inside a JSON string are read as themselves, as
``json.loads(..., strict=False)`` does: small models under llama.cpp's grammar emit them, and the
reply means the same. Everything else about the parsing stays strict."""


def _excerpt(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _values_of(value: Any, key: str) -> list[Any]:
    """Every value stored under ``key`` in ``value``, at any depth."""
    found: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if key in item:
                found.append(item[key])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _same(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    return json.dumps(value, sort_keys=True)


def _top_level_values(reply: str) -> list[Any]:
    """Every top-level JSON object (or array of objects) in ``reply``, in order.

    Raises :class:`ReplyError` at the first opener that does not start a
    well-formed JSON value (never looking inside it) or for a duplicated key.
    """
    found: list[Any] = []
    pos = 0
    while True:
        match = _OPENER.search(reply, pos)
        if match is None:
            return found
        start = match.start()
        try:
            value, end = _DECODER.raw_decode(reply, start)
        except _DuplicateKeyError as exc:
            raise ReplyError(f"a JSON object in it repeats the key {exc.key!r}") from None
        except ValueError as exc:
            raise ReplyError(
                f"it holds malformed JSON at character {start} ({exc}); "
                "nothing inside a malformed object is read"
            ) from None
        found.append(value)
        pos = end


def reply_object(reply: str, key: str) -> dict[str, Any]:
    """The one JSON object of ``reply`` that carries ``key``, or :class:`ReplyError`.

    Accepted: the reply is one JSON object, or holds exactly one top-level JSON
    object with prose or a code fence around it; ``key`` is one of its own
    keys, and no other value of ``key`` occurs anywhere inside it. Everything
    else raises, with a message saying what was wrong: an empty reply, no
    object, a malformed object (an unterminated outer object quoting a
    graded text's JSON, say), several objects, an array, a duplicated key, two
    values of ``key``, or an object without ``key``.
    """
    text = reply.strip()
    if not text:
        raise ReplyError("the reply is empty")
    try:
        whole = _DECODER.decode(text)
    except _DuplicateKeyError as exc:
        raise ReplyError(f"its JSON object repeats the key {exc.key!r}") from None
    except ValueError:
        values = _top_level_values(text)
    else:
        values = [whole]
    if not values:
        raise ReplyError(f"it holds no JSON object: {_excerpt(text)!r}")
    scores = {_same(v) for value in values for v in _values_of(value, key)}
    if len(scores) > 1:
        raise ReplyError(f"it is ambiguous: several different {key} values {sorted(scores)}")
    if len(values) > 1:
        raise ReplyError(f"it holds {len(values)} JSON values where exactly one object is expected")
    value = values[0]
    if not isinstance(value, dict):
        raise ReplyError(f"it holds no JSON object (its JSON is {type(value).__name__}): {_excerpt(text)!r}")
    if key not in value:
        nested = " (only nested inside another value)" if scores else ""
        raise ReplyError(f"its JSON object has no {key!r}{nested} (keys: {sorted(value)})")
    return value
