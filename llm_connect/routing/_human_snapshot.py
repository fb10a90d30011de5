"""How a group of the human target is stored in ``evidence_snapshots`` and read back.

The arrays of :class:`~llm_connect.ledger._design.DesignRows` (the judge's values as one byte
each into a table of distinct values when there are at most 256, the chosen flags as bits,
positions and inclusion probabilities only when they are not ``0..n-1`` and one value), the
mark to read on from, the labelled cases' positions, each running sum (exact floats, by
``float.hex``) with a digest of people's values it was computed on, and the alphas asked for.
The rest (placing labels, checking the digests, reading past the mark) is
``_human_cache``'s.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from llm_connect.ledger._design import DesignMark, DesignRows

if TYPE_CHECKING:
    from llm_connect.routing._human_cache import Group

__all__ = ["decode_snapshot", "digest_of", "encode_group", "snapshot_settings"]


def snapshot_settings() -> str:
    """The ``evidence_snapshots.settings`` a group's stored arrays and running sums go under:
    a new rule for the sums (``_ppi_running.STATE_VERSION``) never reads an older snapshot.
    Each sum keeps its own ``alpha``, floor and labels share, which ``human_bound_continued``
    checks against the call's; the rate and strategy are in the stored inclusion probabilities."""
    from llm_connect.routing import _ppi_running

    return f"human-design:1:state={getattr(_ppi_running, 'STATE_VERSION', '1')}"


def _encode(x: Any) -> Any:
    """JSON of a running-sums dataclass, generically by its fields; floats exact (``float.hex``)."""
    if is_dataclass(x) and not isinstance(x, type):
        return {"@": type(x).__name__, **{f.name: _encode(getattr(x, f.name)) for f in fields(x)}}
    if isinstance(x, float):
        return float.hex(x)
    if isinstance(x, tuple | list):
        return [_encode(v) for v in x]
    return x


def _decode(x: Any) -> Any:
    """The inverse of :func:`_encode` (dataclasses of ``_ppi_running`` only)."""
    from llm_connect.routing import _ppi_running

    if isinstance(x, dict):
        cls = getattr(_ppi_running, str(x["@"]))
        if not (is_dataclass(cls) and isinstance(cls, type)):
            raise ValueError(f"not a running-sums class: {x['@']!r}")
        return cls(**{k: _decode(v) for k, v in x.items() if k != "@"})
    if isinstance(x, str):
        return float.fromhex(x)
    if isinstance(x, list):
        return tuple(_decode(v) for v in x)
    return x


def digest_of(rows: DesignRows, human: Any, t: int) -> str:
    """Digest of people's values on the chosen cases among the first ``t`` (NaN: none yet)."""
    values = np.ascontiguousarray(human[:t][rows.chosen[:t]])
    return hashlib.blake2b(values.tobytes(), digest_size=16).hexdigest()


def encode_group(group: Group) -> dict[str, Any]:
    """The JSON a new Router restores ``group`` from (:func:`decode_snapshot`, then
    ``_human_cache._restore``)."""
    rows, mark = group.rows, group.mark
    n = len(rows)
    # Positions 0..n-1 and one inclusion probability (uniform labelling) are stored as such.
    plain = n > 0 and int(rows.positions[0]) == 0 and int(rows.positions[-1]) == n - 1
    same = n > 0 and bool(np.all(rows.inclusion == rows.inclusion[0]))
    # The judge's values as one byte each into a table of the distinct values, when at most 256.
    table, codes = np.unique(rows.judge, return_inverse=True)
    coded = table.size <= 256
    parts = (
        codes.astype(np.uint8).tobytes() if coded else rows.judge.astype("<f8").tobytes(),
        np.packbits(rows.chosen).tobytes(),
        b"" if plain else rows.positions.astype("<i8").tobytes(),
        b"" if same else rows.inclusion.astype("<f8").tobytes(),
    )
    return {
        "n": n,
        "floor": None if rows.floor is None else float.hex(rows.floor),
        "mark": [mark.position, mark.first_id, mark.grades, float.hex(mark.sum_quality), mark.id_cases],
        "plain": plain,
        "table": [float.hex(float(v)) for v in table] if coded else None,
        "inclusion": float.hex(float(rows.inclusion[0])) if same else None,
        "arrays": base64.b64encode(b"".join(parts)).decode("ascii"),
        "positions": {c: p for c, p in group.positions.items() if p is not None},
        "states": [
            {"sums": _encode(st), "digest": digest_of(rows, group.human, st.t)}
            for st in group.states.values()
        ],
        "alphas": [float.hex(a) for a in group.alphas],
    }


def decode_snapshot(
    snap: dict[str, Any],
) -> tuple[DesignRows, DesignMark, dict[str, int | None], list[tuple[Any, str]], tuple[float, ...]] | None:
    """What :func:`encode_group` stored: the arrays, their mark, the labelled cases' positions,
    each running sum with its digest, and the alphas asked for; ``None`` when unreadable."""
    try:
        n, m = int(snap["n"]), snap["mark"]
        mark = DesignMark(int(m[0]), int(m[1]), int(m[2]), float.fromhex(m[3]), int(m[4]))
        raw = base64.b64decode(snap["arrays"])
        bits, plain, same, table = (n + 7) // 8, bool(snap["plain"]), snap["inclusion"], snap["table"]
        width = 8 if table is None else 1
        at = width * n + bits  # after the judge's values and the chosen bits
        if len(raw) != at + (0 if plain else 8 * n) + (0 if same is not None else 8 * n):
            return None
        rows = DesignRows(
            positions=np.arange(n, dtype=np.int64)
            if plain
            else np.frombuffer(raw, "<i8", n, at).astype(np.int64),
            judge=(
                np.frombuffer(raw, "<f8", n).astype(float)
                if table is None
                else np.array([float.fromhex(v) for v in table])[np.frombuffer(raw, np.uint8, n)]
            ),
            inclusion=(
                np.full(n, float.fromhex(same))
                if same is not None
                else np.frombuffer(raw, "<f8", n, at if plain else at + 8 * n).astype(float)
            ),
            chosen=np.unpackbits(np.frombuffer(raw, np.uint8, bits, width * n), count=n).astype(bool),
            floor=None if snap["floor"] is None else float.fromhex(snap["floor"]),
        )
        known: dict[str, int | None] = {str(c): int(p) for c, p in snap["positions"].items()}
        sums = [(_decode(s["sums"]), str(s["digest"])) for s in snap["states"]]
        alphas = tuple(float.fromhex(a) for a in snap.get("alphas", ()))
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, binascii.Error):
        return None
    return rows, mark, known, sums, alphas
