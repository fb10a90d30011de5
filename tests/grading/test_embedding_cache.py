"""The embedding cache end to end: CachedEmbedder over the ledger, the judges, the grade CLI (issue 15)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from llm_connect.adapters import OnnxEmbeddingAdapter, SentenceTransformerEmbeddingAdapter
from llm_connect.adapters._cached_embedder import CachedEmbedder, text_digest
from llm_connect.errors import EmbeddingOutputError
from llm_connect.grading import JudgeContext, build_judge
from llm_connect.ledger import QualityLedger
from tests.cli._util import invoke, pair_suite

TORCH_ID = "sentence-transformers:all-MiniLM-L6-v2"
DEFAULT_ID = "onnx:all-MiniLM-L6-v2"
"""The default embedder's cache id (ONNX Runtime; PyTorch was the default before)."""


class Counting:
    """Counts the texts handed to the wrapped embedder."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.adapter_id = inner.adapter_id  # type: ignore[attr-defined]
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return self.inner.embed(texts)  # type: ignore[attr-defined,no-any-return]


class Fake:
    """A deterministic 4-dim embedder."""

    adapter_id = "fake:emb"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(len(t)), float(t.count("a")), 1.0, 0.5] for t in texts]


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbeddingAdapter:
    adapter = SentenceTransformerEmbeddingAdapter()
    adapter.load()
    return adapter


def test_cached_vectors_are_bit_identical_to_a_fresh_encode(
    ledger: QualityLedger, minilm: SentenceTransformerEmbeddingAdapter
) -> None:
    texts = [f"the cached sentence number {i} about rivers and banks" for i in range(20)]
    fresh = minilm.embed(texts)
    cold = CachedEmbedder(Counting(minilm), ledger)
    np.testing.assert_array_equal(cold.embed(texts), fresh)
    assert (cold.counts.embedded, cold.counts.cached) == (20, 0)
    warm_inner = Counting(minilm)
    warm = CachedEmbedder(warm_inner, ledger)
    again = warm.embed([*texts, texts[0]])
    assert warm_inner.calls == []  # nothing encoded
    np.testing.assert_array_equal(again[:20], fresh)  # exact float equality, not closeness
    np.testing.assert_array_equal(again[20], fresh[0])
    assert np.asarray(again[:20], dtype=np.float32).tobytes() == np.asarray(fresh, dtype=np.float32).tobytes()
    assert (warm.counts.embedded, warm.counts.cached) == (0, 20)


def test_only_the_missing_texts_are_encoded(ledger: QualityLedger) -> None:
    inner = Counting(Fake())
    cached = CachedEmbedder(inner, ledger)
    cached.embed(["a", "b"])
    np.testing.assert_array_equal(cached.embed(["b", "c", "a", "c"]), Fake().embed(["b", "c", "a", "c"]))
    assert inner.calls == [["a", "b"], ["c"]]
    assert (cached.counts.embedded, cached.counts.cached) == (3, 2)


def _corrupt(ledger_url: str, digest: str, sql: str) -> None:
    engine = create_engine(ledger_url)
    with engine.begin() as conn:
        conn.execute(text(sql), {"d": digest})
    engine.dispose()


@pytest.mark.parametrize(
    "sql",
    [
        # the bytes do not match the stored length: the ledger never returns the row
        "UPDATE embedding_cache SET dim = dim + 1 WHERE text_sha256 = :d",
        # consistent bytes and length, but not the model's length (3 floats, not 4)
        "UPDATE embedding_cache SET dim = 3, vector = substr(vector, 1, 12) WHERE text_sha256 = :d",
    ],
    ids=["bytes-vs-dim", "wrong-dim"],
)
def test_a_corrupt_cached_vector_is_re_encoded_never_used(
    ledger: QualityLedger, ledger_url: str, sql: str
) -> None:
    if ledger.dialect == "postgresql":
        sql = sql.replace("substr(vector, 1, 12)", "substring(vector from 1 for 12)")
    CachedEmbedder(Fake(), ledger).embed(["aa", "bbb", "cccc"])
    _corrupt(ledger_url, text_digest("bbb"), sql)
    inner = Counting(Fake())
    cached = CachedEmbedder(inner, ledger)
    np.testing.assert_array_equal(cached.embed(["aa", "bbb", "cccc"]), Fake().embed(["aa", "bbb", "cccc"]))
    assert inner.calls == [["bbb"]]
    # the re-encoded vector was written over the corrupt one
    again = Counting(Fake())
    np.testing.assert_array_equal(CachedEmbedder(again, ledger).embed(["bbb"]), Fake().embed(["bbb"]))
    assert again.calls == []


def test_an_embedder_returning_the_wrong_count_caches_nothing(ledger: QualityLedger) -> None:
    class Short(Fake):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return super().embed(texts)[:-1]

    with pytest.raises(EmbeddingOutputError, match="1 vectors for 2 texts"):
        CachedEmbedder(Short(), ledger).embed(["a", "b"])
    assert ledger.cached_embeddings("fake:emb", [text_digest("a")]) == {}


def test_the_judge_keeps_its_grader_id_and_counts_through_the_context(ledger: QualityLedger) -> None:
    context = JudgeContext(make_embedding_adapter=Fake)
    judge = build_judge("embedding", context)
    assert judge.grader_id == "embedding:emb"
    assert context.embedding_adapter() is context.embedding_adapter()  # one shared, cached embedder
    context.use_embedding_store(ledger)
    assert context.embedders[0].store is ledger
    assert context.embedding_counts() is not None


def _counting(monkeypatch: pytest.MonkeyPatch, cls: type) -> list[list[str]]:
    calls: list[list[str]] = []
    real = cls.embed

    def counting(self: object, texts: Sequence[str]) -> list[list[float]]:
        calls.append(list(texts))
        return real(self, texts)  # type: ignore[no-any-return]

    monkeypatch.setattr(cls, "embed", counting)
    return calls


@pytest.fixture
def counting_minilm(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Every text the sentence-transformers (PyTorch) adapter encodes, per call, in this process."""
    yield _counting(monkeypatch, SentenceTransformerEmbeddingAdapter)


@pytest.fixture
def counting_onnx(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Every text the ONNX Runtime adapter (the default backend) encodes, per call, in this process."""
    yield _counting(monkeypatch, OnnxEmbeddingAdapter)


def test_a_second_grade_of_the_same_suite_encodes_nothing(
    tmp_path: Path, counting_onnx: list[list[str]], counting_minilm: list[list[str]]
) -> None:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    suite = pair_suite(tmp_path / "s.jsonl", 12, same=4)
    args = ["grade", str(suite), "--db", db, "-b", "recorded:baseline", "-c", "recorded:candidate"]
    first = invoke(*args, "--judge", "embedding", "--json")
    assert first.exit_code == 0, first.output
    encoded = sum(len(c) for c in counting_onnx)
    assert encoded == 20  # 12 baseline answers + 8 distinct candidate answers
    assert counting_minilm == []  # the default embeds on ONNX Runtime, not PyTorch
    assert json.loads(first.stdout)["embeddings"].items() >= {"embedded": 20, "cached": 0}.items()

    counting_onnx.clear()
    second = invoke(*args, "--judge", "embedding", "--json")
    assert second.exit_code == 0, second.output
    assert counting_onnx == []  # zero encode calls
    assert json.loads(second.stdout)["embeddings"].items() >= {"embedded": 0, "cached": 20}.items()
    scores = [
        [
            (r.case_id, r.quality_score)
            for r in QualityLedger(db).results(run_id=json.loads(o.stdout)["run_id"])
        ]
        for o in (first, second)
    ]
    assert sorted(scores[0]) == sorted(scores[1])

    human = invoke(*args, "--judge", "embedding")
    assert "embeddings: 0 text(s) embedded, 20 from the cache" in human.stdout

    counting_onnx.clear()
    bypass = invoke(*args, "--judge", "embedding", "--no-cache", "--json")
    assert sum(len(c) for c in counting_onnx) == 20
    assert json.loads(bypass.stdout)["embeddings"].items() >= {"embedded": 20, "cached": 0}.items()
    assert counting_minilm == []


def test_regrading_a_suite_graded_with_the_old_default_encodes_once_under_the_onnx_id(
    tmp_path: Path, counting_onnx: list[list[str]], counting_minilm: list[list[str]]
) -> None:
    """A ledger filled by the PyTorch default (``embedding`` before ONNX Runtime became the
    default; ``embedding:backend=torch`` now) is re-graded with the ONNX default: every text is
    encoded once more, under the ONNX cache id; no PyTorch vector reaches the ONNX judge."""
    from llm_connect.grading.judges._fences import answer_material
    from llm_connect.types import LLMResponse

    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    suite = pair_suite(tmp_path / "s.jsonl", 12, same=4)
    args = ["grade", str(suite), "--db", db, "-b", "recorded:baseline", "-c", "recorded:candidate", "--json"]
    old = invoke(*args, "--judge", "embedding:backend=torch")
    assert old.exit_code == 0, old.output
    assert sum(len(c) for c in counting_minilm) == 20 and counting_onnx == []

    counting_minilm.clear()
    new = invoke(*args, "--judge", "embedding")
    assert new.exit_code == 0, new.output
    assert (
        json.loads(new.stdout)["embeddings"].items() >= {"embedded": 20, "cached": 0}.items()
    )  # nothing from PyTorch's
    assert sum(len(c) for c in counting_onnx) == 20 and counting_minilm == []

    counting_onnx.clear()
    again = invoke(*args, "--judge", "embedding")
    assert json.loads(again.stdout)["embeddings"].items() >= {"embedded": 0, "cached": 20}.items()
    assert counting_onnx == [] and counting_minilm == []

    texts = [
        answer_material(LLMResponse(text=t, model="m", provider="p"))
        for t in [f"answer {i}" for i in range(12)]
    ]
    texts += [answer_material(LLMResponse(text=f"other {i}", model="m", provider="p")) for i in range(4, 12)]
    digests = [text_digest(t) for t in texts]
    ledger = QualityLedger(db)
    try:
        by_torch = ledger.cached_embeddings(TORCH_ID, digests)
        by_onnx = ledger.cached_embeddings(DEFAULT_ID, digests)
        assert len(by_torch) == len(by_onnx) == 20
        onnx_fresh = dict(zip(digests, OnnxEmbeddingAdapter().embed(texts).tolist(), strict=True))
        assert by_onnx == onnx_fresh  # the ONNX entries are ONNX's own vectors, bit for bit
        assert all(by_onnx[d] != by_torch[d] for d in digests)
        scores = [
            {r.case_id: r.quality_score for r in ledger.results(run_id=json.loads(o.stdout)["run_id"])}
            for o in (old, new)
        ]
        assert scores[0].keys() == scores[1].keys() and len(scores[0]) == 12
        assert all(abs(scores[0][k] - scores[1][k]) < 1e-6 for k in scores[0])
    finally:
        ledger.close()


def test_one_model_name_on_two_servers_is_cached_as_two_models() -> None:
    from llm_connect.adapters import OpenAIEmbeddingAdapter
    from llm_connect.adapters._cached_embedder import CachedEmbedder

    a = CachedEmbedder(OpenAIEmbeddingAdapter("emb", base_url="http://127.0.0.1:1111/v1"))
    b = CachedEmbedder(OpenAIEmbeddingAdapter("emb", base_url="http://127.0.0.1:2222/v1"))
    assert a.adapter_id == b.adapter_id == "openai:emb"
    assert a.cache_id != b.cache_id and a.cache_id.endswith("127.0.0.1:1111/v1")
