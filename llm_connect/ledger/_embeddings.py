"""The embedding cache store: :class:`EmbeddingStore` owns ``embedding_cache`` (``_models``)."""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Mapping, Sequence
from typing import cast

from sqlalchemy import Connection, Engine, Table, select

from llm_connect.errors import LedgerError
from llm_connect.ledger._cases import chunks
from llm_connect.ledger._engine import dialect_insert, reading, write
from llm_connect.ledger._models import EmbeddingCacheRecord
from llm_connect.types import utcnow

_EMB = cast(Table, EmbeddingCacheRecord.__table__)
_SWAP = sys.byteorder != "little"


def pack_vector(vector: Sequence[float]) -> bytes:
    """``vector`` as float32 little-endian bytes."""
    data = array("f", vector)
    if _SWAP:  # pragma: no cover - big-endian hosts
        data.byteswap()
    return data.tobytes()


def unpack_vector(blob: bytes, dim: int) -> list[float] | None:
    """The vector in ``blob``, or ``None`` when it is not ``dim`` finite float32 values."""
    if dim <= 0 or len(blob) != 4 * dim:
        return None
    data = array("f")
    data.frombytes(blob)
    if _SWAP:  # pragma: no cover - big-endian hosts
        data.byteswap()
    values = data.tolist()
    return values if all(math.isfinite(v) for v in values) else None


class EmbeddingStore:
    """Cached embedding vectors over the ledger's engine, by model id and text digest."""

    def __init__(self, engine: Engine, *, store_text: bool = True) -> None:
        self.engine = engine
        self.store_text = store_text

    def cached_embeddings(self, model_id: str, digests: Sequence[str]) -> dict[str, list[float]]:
        """The cached vectors of ``model_id`` for the texts whose SHA-256 digests are ``digests``."""
        wanted = list(dict.fromkeys(digests))
        found: dict[str, list[float]] = {}
        if not wanted:
            return found
        c = _EMB.c
        with reading(self.engine, "reading cached embeddings") as conn:
            for part in chunks(wanted):
                stmt = select(c.text_sha256, c.dim, c.vector).where(
                    c.model_id == model_id, c.text_sha256.in_(part)
                )
                for digest, dim, blob in conn.execute(stmt):
                    vector = unpack_vector(bytes(blob), int(dim))
                    if vector is not None:
                        found[digest] = vector
        return found

    def put_embeddings(self, model_id: str, vectors: Mapping[str, Sequence[float]]) -> int:
        """Store ``{digest: vector}`` under ``model_id`` (float32), writing over rows already there."""
        if not self.store_text or not vectors:
            return 0
        if not isinstance(model_id, str) or not model_id.strip():
            raise LedgerError(f"model_id must be a non-empty string, not {model_id!r}")
        now = utcnow()
        rows = []
        for digest, vector in vectors.items():
            if not isinstance(digest, str) or len(digest) != 64:
                raise LedgerError(f"embedding key must be a SHA-256 hex digest, not {digest!r}")
            values = list(vector)
            if not values or not all(math.isfinite(v) for v in values):
                raise LedgerError(f"embedding of {digest[:12]}... is empty or not finite")
            rows.append(
                {
                    "model_id": model_id,
                    "text_sha256": digest,
                    "dim": len(values),
                    "vector": pack_vector(values),
                    "created_at": now,
                }
            )

        def upsert(conn: Connection) -> int:
            stmt = dialect_insert(conn.dialect.name, _EMB)
            set_ = {c: stmt.excluded[c] for c in ("dim", "vector", "created_at")}
            stmt = stmt.on_conflict_do_update(index_elements=["model_id", "text_sha256"], set_=set_)
            conn.execute(stmt, rows)  # one executemany: no parameter limit to stay under
            return len(rows)

        return write(self.engine, "caching embeddings", upsert)
