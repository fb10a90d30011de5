"""CachedEmbedder: an embedder whose vectors are kept in the ledger, so a text is embedded once per model.

Vectors are looked up by ``(adapter_id, SHA-256 of the text)`` in a store with
``cached_embeddings(model_id, digests) -> {digest: vector}`` and
``put_embeddings(model_id, {digest: vector})`` (the
:class:`~llm_connect.ledger.QualityLedger`'s ``embedding_cache`` table); only
the texts not found are handed to the wrapped embedder, in one call, and stored.

A cached vector is used only when its length is the model's: the length of the
vectors encoded in this process (or, before any encode, the length most cached
vectors of the call share). Any other cached vector is treated as missing,
re-encoded and written over. Vectors are stored as float32, so a cached vector
is bit-identical to the float32 vector the model produced.

With a store, :meth:`CachedEmbedder.embed` returns one ``numpy`` matrix (float32 when the
model's vectors are, as the local adapters'), cached rows and fresh rows alike; the store is
handed and gives back what it always has (float32 values, read back as lists), so its format
does not change.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from llm_connect.errors import EmbeddingOutputError

if TYPE_CHECKING:
    from llm_connect.adapters._base import EmbeddingAdapter

__all__ = ["CachedEmbedder", "EmbeddingCounts", "EmbeddingStore", "text_digest"]


class EmbeddingStore(Protocol):
    """Where cached vectors live (a :class:`~llm_connect.ledger.QualityLedger`)."""

    def cached_embeddings(self, model_id: str, digests: Sequence[str]) -> dict[str, list[float]]: ...

    def put_embeddings(self, model_id: str, vectors: dict[str, Sequence[float]]) -> int: ...


def text_digest(text: str) -> str:
    """The cache key of a text: SHA-256 of its UTF-8 bytes, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class EmbeddingCounts:
    """Distinct texts an embedder handled: ``embedded`` by the model, ``cached`` read from the ledger."""

    embedded: int = 0
    cached: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"embedded": self.embedded, "cached": self.cached}


class CachedEmbedder:
    """Wraps an embedding adapter with the ledger's embedding cache (``store``).

    ``store`` may be ``None`` (then every text is embedded and only counted) and
    may be set after construction: the grade CLI builds its judges before it
    opens the ledger. :attr:`counts` says how many distinct texts were embedded
    and how many came from the cache. The wrapped adapter's ``model``,
    ``provider`` and ``adapter_id`` are passed through, so a judge's grader id
    does not change.
    """

    def __init__(self, embedder: EmbeddingAdapter, store: EmbeddingStore | None = None) -> None:
        self.embedder = embedder
        self.store = store
        self.adapter_id = embedder.adapter_id
        endpoint = getattr(embedder, "endpoint", None)
        self.cache_id = self.adapter_id if not endpoint else f"{self.adapter_id}@{endpoint}"
        """The key vectors are cached under: the adapter id, plus the server for a remote
        embedder (one model name on two servers is two models)."""
        self.counts = EmbeddingCounts()
        self._dim: int | None = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        # model, provider, device, ... of the wrapped adapter (only called for missing attributes)
        if name == "embedder":
            raise AttributeError(name)
        return getattr(self.embedder, name)

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.embedder!r})"

    def _encode(self, texts: list[str]) -> dict[str, Any]:
        vectors = self.embedder.embed(texts)
        if len(vectors) != len(texts):  # nothing is cached from an embedder that miscounts
            raise EmbeddingOutputError(
                f"{self.adapter_id} returned {len(vectors)} vectors for {len(texts)} texts"
            )
        return dict(zip(texts, vectors, strict=True))

    def embed(self, texts: Sequence[str]) -> Any:
        """One vector per text, in order: cached ones from the store, the rest embedded in one
        call. Without a store, what the wrapped embedder returns; with one, a matrix."""
        texts = list(texts)
        if not texts:
            return []
        store = self.store
        if store is None:  # no cache: the texts go to the embedder as given, and are counted
            vectors = self.embedder.embed(texts)
            with self._lock:
                self.counts.embedded += len(set(texts))
            return vectors
        unique = list(dict.fromkeys(texts))
        digests = {text: text_digest(text) for text in unique}
        found = store.cached_embeddings(self.cache_id, list(set(digests.values())))
        hits: dict[str, Any] = {text: found[d] for text, d in digests.items() if d in found}
        missing = [text for text in unique if text not in hits]
        fresh: dict[str, Any] = {}
        if missing:
            fresh = self._encode(missing)
            lengths = {len(v) for v in fresh.values()}
            if len(lengths) == 1:
                self._dim = lengths.pop()
        dim = self._dim
        if dim is None and hits:
            dim = Counter(len(v) for v in hits.values()).most_common(1)[0][0]
        wrong = [text for text, v in hits.items() if len(v) != dim]
        if wrong:  # a corrupt or foreign vector: never used, re-encoded and written over
            for text in wrong:
                del hits[text]
            fresh.update(self._encode(wrong))
        if fresh:
            store.put_embeddings(self.cache_id, {digests[t]: _values(v) for t, v in fresh.items()})
        with self._lock:
            self.counts.embedded += len(fresh)
            self.counts.cached += len(hits)
        return _stack(texts, hits, fresh)


def _values(vector: Any) -> Any:
    """What the store is handed: a float32 row as Python floats (exact), anything else as is."""
    return vector.tolist() if isinstance(vector, np.ndarray) else vector


def _stack(texts: list[str], hits: dict[str, Any], fresh: dict[str, Any]) -> Any:
    """The vectors of ``texts`` as one matrix: float32 when every fresh vector is a float32 row
    (the cache holds float32 values, so cached rows are exact); ragged vectors (an embedder's
    fault, reported by the caller) stay a list of lists."""
    by_text = {**hits, **fresh}
    if len({len(v) for v in by_text.values()}) != 1:
        return [list(by_text[text]) for text in texts]
    exact = all(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in fresh.values())
    dtype = np.float32 if exact else np.float64
    rows = {text: np.asarray(v, dtype=dtype) for text, v in by_text.items()}
    return np.stack([rows[text] for text in texts]) if texts else np.zeros((0, 0), dtype=dtype)
