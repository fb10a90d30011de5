"""EmbeddingSimilarityJudge (invariant 6): one embed call, two vectors, cosine clamped into 0..1."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence

import pytest

from llm_connect.adapters import OpenAIEmbeddingAdapter, SentenceTransformerEmbeddingAdapter
from llm_connect.errors import EmbeddingOutputError
from llm_connect.grading import EmbeddingSimilarityJudge, JudgeContext, JudgePair, build_judge
from llm_connect.types import LLMResponse, RunConfig

CONFIG = RunConfig(temperature=0.0)


def _resp(text: str) -> LLMResponse:
    return LLMResponse(text=text, model="m", provider="recorded")


class ScriptedEmbedder:
    """An embedding adapter returning scripted vectors and recording each call."""

    adapter_id = "scripted:vectors"

    def __init__(self, vectors):
        self.vectors = vectors
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]):
        self.calls.append(list(texts))
        return self.vectors


def _judge_texts(judge, a: str, b: str):
    return judge.judge(_resp(a), _resp(b), prompt="p", run_config=CONFIG)


# -- with the real all-MiniLM-L6-v2 weights, offline ----------------------------------


@pytest.fixture(scope="module")
def minilm_judge():
    return EmbeddingSimilarityJudge(SentenceTransformerEmbeddingAdapter())


@pytest.mark.embeddings
def test_paraphrase_scores_above_0_9(minilm_judge):
    result = _judge_texts(minilm_judge, "Paris is the capital of France.", "The capital of France is Paris.")
    assert result.quality_score > 0.9


@pytest.mark.embeddings
def test_unrelated_text_scores_below_0_2(minilm_judge):
    result = _judge_texts(minilm_judge, "Paris is the capital of France.", "I like bananas.")
    assert result.quality_score < 0.2


@pytest.mark.embeddings
def test_grader_id_names_the_embedding_model(minilm_judge):
    assert minilm_judge.grader_id == "embedding:all-MiniLM-L6-v2"
    result = _judge_texts(minilm_judge, "a", "b")
    assert result.grader_id == "embedding:all-MiniLM-L6-v2"
    # a judge made on the PyTorch adapter names its backend: the spec rebuilds PyTorch, not the default
    assert dict(result.details)["judge_spec"] == {
        "name": "embedding",
        "args": {"model": "all-MiniLM-L6-v2", "backend": "torch"},
        "asks_llm": False,
    }
    rebuilt = build_judge(dict(result.details)["judge_spec"], JudgeContext())
    assert rebuilt.adapter.adapter_id == "sentence-transformers:all-MiniLM-L6-v2"
    json.dumps(dict(result.details))


@pytest.mark.embeddings
def test_judge_many_matches_judge_one_by_one(minilm_judge):
    texts = [("The cat sat.", "A cat was sitting."), ("Hello", "Goodbye"), ("The cat sat.", "Hello")]
    pairs = [
        JudgePair(_resp(a), _resp(b), prompt=f"p{i}", run_config=CONFIG) for i, (a, b) in enumerate(texts)
    ]
    many = minilm_judge.judge_many(pairs)
    one = [_judge_texts(minilm_judge, a, b) for a, b in texts]
    assert [r.quality_score for r in many] == pytest.approx([r.quality_score for r in one], abs=1e-5)
    assert [r.prompt for r in many] == ["p0", "p1", "p2"]


@pytest.mark.embeddings
def test_registry_builds_the_default_embedding_judge():
    judge = build_judge("embedding", JudgeContext())
    assert isinstance(judge, EmbeddingSimilarityJudge)
    assert judge.grader_id == "embedding:all-MiniLM-L6-v2"
    assert judge.adapter.adapter_id == "onnx:all-MiniLM-L6-v2"  # ONNX Runtime is the default backend
    rebuilt = build_judge({"name": "embedding", "args": {"model": "all-MiniLM-L6-v2"}}, JudgeContext())
    assert rebuilt.grader_id == judge.grader_id
    assert rebuilt.adapter.adapter_id == "onnx:all-MiniLM-L6-v2"


# -- the contract, with scripted vectors ------------------------------------------------


def test_judge_embeds_exactly_the_two_texts_in_one_call():
    embedder = ScriptedEmbedder([[1.0, 0.0], [1.0, 0.0]])
    _judge_texts(EmbeddingSimilarityJudge(embedder), "same", "same")
    assert embedder.calls == [["same", "same"]]


@pytest.mark.parametrize("vectors", [[[1.0, 0.0]], [[1.0, 0.0]] * 3, [], None, "xy"])
def test_other_than_two_vectors_is_a_value_error(vectors):
    judge = EmbeddingSimilarityJudge(ScriptedEmbedder(vectors))
    with pytest.raises(ValueError) as info:
        _judge_texts(judge, "a", "b")
    assert isinstance(info.value, EmbeddingOutputError)


@pytest.mark.parametrize(
    "vectors",
    [[[1.0, 0.0], [1.0, 0.0, 0.0]], [[1.0, math.nan], [1.0, 0.0]], [[1.0, math.inf], [1.0, 0.0]], [[], []]],
)
def test_ragged_or_non_finite_vectors_are_value_errors(vectors):
    with pytest.raises(EmbeddingOutputError):
        _judge_texts(EmbeddingSimilarityJudge(ScriptedEmbedder(vectors)), "a", "b")


@pytest.mark.parametrize(
    ("vectors", "score"),
    [
        ([[1.0, 0.0], [1.0, 0.0]], 1.0),
        ([[1.0, 0.0], [0.0, 1.0]], 0.0),
        ([[1.0, 0.0], [-1.0, 0.0]], 0.0),  # opposed: clamped up to 0.0
        ([[1.0, 1.0], [1.0, 0.0]], math.sqrt(0.5)),
        ([[3.0, 4.0], [6.0, 8.0]], 1.0),  # not normalised, rounding clamped to 1.0
    ],
)
def test_cosine_is_clamped_into_0_1(vectors, score):
    result = _judge_texts(EmbeddingSimilarityJudge(ScriptedEmbedder(vectors)), "a", "b")
    assert result.quality_score == pytest.approx(score)
    assert 0.0 <= result.quality_score <= 1.0


@pytest.mark.parametrize(
    ("vectors", "score"),
    [([[0.0, 0.0], [0.0, 0.0]], 1.0), ([[0.0, 0.0], [1.0, 0.0]], 0.0), ([[1.0, 0.0], [0.0, 0.0]], 0.0)],
)
def test_zero_vectors_have_a_defined_score_never_nan(vectors, score):
    result = _judge_texts(EmbeddingSimilarityJudge(ScriptedEmbedder(vectors)), "a", "b")
    assert result.quality_score == score
    assert dict(result.details)["cosine"] is None


def test_result_keeps_both_responses_prompt_and_config():
    baseline, candidate = _resp("x"), _resp("y")
    result = EmbeddingSimilarityJudge(ScriptedEmbedder([[1.0, 0.0], [1.0, 0.0]])).judge(
        baseline, candidate, prompt="the prompt", run_config=CONFIG
    )
    assert result.baseline_response is baseline and result.candidate_response is candidate
    assert (result.prompt, result.run_config) == ("the prompt", CONFIG)


def test_ajudge_gives_the_same_result():
    judge = EmbeddingSimilarityJudge(ScriptedEmbedder([[1.0, 1.0], [1.0, 0.0]]))
    result = asyncio.run(judge.ajudge(_resp("a"), _resp("b"), prompt="p", run_config=CONFIG))
    assert result.quality_score == pytest.approx(_judge_texts(judge, "a", "b").quality_score)


def test_judge_many_embeds_each_distinct_text_once_in_one_call():
    class ByText:
        adapter_id = "scripted:bytext"

        def __init__(self):
            self.calls: list[list[str]] = []

        def embed(self, texts):
            self.calls.append(list(texts))
            table = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0]}
            return [table[t] for t in texts]

    embedder = ByText()
    pairs = [
        JudgePair(_resp(a), _resp(b), prompt="p", run_config=CONFIG)
        for a, b in [("a", "b"), ("a", "c"), ("b", "b")]
    ]
    results = EmbeddingSimilarityJudge(embedder).judge_many(pairs)
    assert embedder.calls == [["a", "b", "c"]]
    assert [r.quality_score for r in results] == pytest.approx([0.0, math.sqrt(0.5), 1.0])
    assert EmbeddingSimilarityJudge(embedder).judge_many([]) == []


def test_judge_many_rejects_a_short_batch():
    pairs = [JudgePair(_resp("a"), _resp("b"), prompt="p", run_config=CONFIG)]
    with pytest.raises(EmbeddingOutputError, match="1 vectors for 2 texts"):
        EmbeddingSimilarityJudge(ScriptedEmbedder([[1.0]])).judge_many(pairs)


def test_openai_embeddings_through_the_loopback_server(openai_server):
    openai_server.embedder = lambda text: [1.0, 0.0] if text.startswith("yes") else [0.6, 0.8]
    embedder = OpenAIEmbeddingAdapter("text-embedding-3-small", base_url=openai_server.base_url)
    judge = EmbeddingSimilarityJudge(embedder)
    result = _judge_texts(judge, "yes indeed", "no way")
    assert result.quality_score == pytest.approx(0.6)
    assert judge.grader_id == "embedding:text-embedding-3-small"
    (req,) = openai_server.requests
    assert req.body["input"] == ["yes indeed", "no way"]
    spec = dict(result.details)["judge_spec"]
    assert spec == {
        "name": "embedding",
        "args": {"model": "openai:text-embedding-3-small"},
        "asks_llm": False,
    }
