"""The embedding cache (revision ``0008_embedding_cache``).

* ``embedding_cache``: one vector per (embedding model id, SHA-256 of the text),
  float32 little-endian bytes with their length, so a text is embedded once per
  model for the life of the ledger (:class:`~llm_connect.ledger._embeddings.EmbeddingsMixin`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from llm_connect.ledger._models import Base
from llm_connect.types import utcnow

__all__ = ["EmbeddingCacheRecord"]


class EmbeddingCacheRecord(Base):
    """A text's vector under one embedding model (the text itself is not stored)."""

    __tablename__ = "embedding_cache"

    model_id: Mapped[str] = mapped_column(String(300), primary_key=True)
    text_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    dim: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
