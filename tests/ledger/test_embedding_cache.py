"""The ledger's embedding cache: float32 vectors by (model id, text digest), corrupt rows ignored."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from llm_connect.errors import LedgerError
from llm_connect.ledger import QualityLedger


def _digest(t: str) -> str:
    return hashlib.sha256(t.encode()).hexdigest()


def test_vectors_round_trip_bit_identical_as_float32(ledger: QualityLedger) -> None:
    rng = np.random.default_rng(0)
    vectors = {_digest(f"t{i}"): rng.standard_normal(384).astype(np.float32).tolist() for i in range(600)}
    assert ledger.put_embeddings("m", vectors) == 600
    found = ledger.cached_embeddings("m", [*vectors, _digest("absent")])
    assert found == vectors  # exact equality: float32 -> bytes -> float32
    assert ledger.cached_embeddings("other-model", list(vectors)) == {}


def test_put_writes_over_an_existing_vector(ledger: QualityLedger) -> None:
    d = _digest("x")
    ledger.put_embeddings("m", {d: [1.0, 2.0]})
    ledger.put_embeddings("m", {d: [3.0, 4.0, 5.0]})
    assert ledger.cached_embeddings("m", [d]) == {d: [3.0, 4.0, 5.0]}


def test_a_row_with_the_wrong_byte_length_is_never_returned(ledger: QualityLedger, ledger_url: str) -> None:
    good, bad = _digest("good"), _digest("bad")
    ledger.put_embeddings("m", {good: [0.5, 0.25], bad: [0.5, 0.25]})
    engine = create_engine(ledger_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE embedding_cache SET dim = 3 WHERE text_sha256 = :d"), {"d": bad})
    engine.dispose()
    assert ledger.cached_embeddings("m", [good, bad]) == {good: [0.5, 0.25]}


@pytest.mark.parametrize("vector", [[], [float("nan")], [float("inf"), 1.0]])
def test_empty_or_non_finite_vectors_are_refused(ledger: QualityLedger, vector: list[float]) -> None:
    with pytest.raises(LedgerError):
        ledger.put_embeddings("m", {_digest("x"): vector})
    assert ledger.cached_embeddings("m", [_digest("x")]) == {}


def test_keys_must_be_digests(ledger: QualityLedger) -> None:
    with pytest.raises(LedgerError, match="SHA-256"):
        ledger.put_embeddings("m", {"not-a-digest": [1.0]})


def test_a_ledger_without_texts_keeps_no_vectors(ledger_url: str) -> None:
    ledger = QualityLedger(ledger_url, store_text=False)
    try:
        assert ledger.put_embeddings("m", {_digest("x"): [1.0]}) == 0
        assert ledger.cached_embeddings("m", [_digest("x")]) == {}
    finally:
        ledger.close()
