"""Shared by every judge that asks an LLM: fence data in the prompt, find JSON in the reply.

Texts under judgement go inside fences whose id is derived from the material
(so the same pair always gives the same request) and never occurs inside a
fenced text, so no response can close its fence early and pose as
instructions. Replies are searched for JSON values: the whole reply, then
```json fences, then every ``{...}`` object in the prose.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from typing import Any

__all__ = ["fence", "fence_id", "json_values"]

_FENCED_JSON = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


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


def json_values(reply: str) -> list[Any]:
    """Every JSON value found in ``reply``: whole reply, fenced blocks, then each ``{...}``."""
    found: list[Any] = []
    with contextlib.suppress(ValueError):
        found.append(json.loads(reply.strip()))
    for block in _FENCED_JSON.findall(reply):
        with contextlib.suppress(ValueError):
            found.append(json.loads(block.strip()))
    decoder = json.JSONDecoder()
    pos = reply.find("{")
    while pos != -1:
        try:
            value, end = decoder.raw_decode(reply, pos)
        except ValueError:
            pos = reply.find("{", pos + 1)
            continue
        found.append(value)
        pos = reply.find("{", end)
    return found
