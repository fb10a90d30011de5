"""Sessions (Alignmenter): stability over a session's turns with the real MiniLM weights, the
overall score, the letter-grade bands and the bootstrap interval over sessions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from llm_connect.adapters import SentenceTransformerEmbeddingAdapter
from llm_connect.scoring.persona import (
    STABILITY_MAX_STD,
    SessionSummary,
    bootstrap_mean_interval,
    letter_grade,
    overall_score,
    session_stabilities,
    session_stability,
    session_summary,
)

REFUND = "Your refund has been processed and will arrive in 5 business days."
PARAPHRASES = [
    REFUND,
    "We have issued your refund; expect it within five business days.",
    "The refund is done and should reach your account in about 5 working days.",
    "Refund processed. It will show up in 5 business days.",
]
# Two on-voice turns, then the replies wander off to unrelated topics.
DRIFTING = [
    "Your refund has been processed.",
    "Your refund has been processed and will arrive soon.",
    "Quantum chromodynamics describes how gluons bind quarks.",
    "Bake the bread at 200 degrees.",
    "Bake the bread at 200 degrees for 40 minutes.",
]
# Every turn about something else: all equally far from the centroid.
UNRELATED = [
    REFUND,
    "The mitochondria is the powerhouse of the cell.",
    "Preheat the oven to 200 degrees and bake the bread for 40 minutes.",
    "The striker scored twice in the second half of the match.",
]


class CountingEmbedder:
    """The real MiniLM adapter, counting its calls."""

    adapter_id = "sentence-transformers:all-MiniLM-L6-v2"

    def __init__(self) -> None:
        self.inner = SentenceTransformerEmbeddingAdapter()
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbeddingAdapter:
    return SentenceTransformerEmbeddingAdapter()


# -- stability ------------------------------------------------------------------------------


@pytest.mark.embeddings
def test_identical_replies_across_turns_are_perfectly_stable(
    embedder: SentenceTransformerEmbeddingAdapter,
) -> None:
    result = session_stability([REFUND] * 4, embedder=embedder)
    assert result.turns == 4
    assert result.stability == pytest.approx(1.0, abs=1e-9)
    assert result.distance_std == pytest.approx(0.0, abs=1e-9)
    assert result.distances == pytest.approx([0.0] * 4, abs=1e-6)


@pytest.mark.embeddings
def test_replies_drifting_between_unrelated_topics_are_less_stable(
    embedder: SentenceTransformerEmbeddingAdapter,
) -> None:
    steady = session_stability(PARAPHRASES, embedder=embedder)
    drifting = session_stability(DRIFTING, embedder=embedder)
    assert steady.stability > 0.95
    assert drifting.stability < 0.85
    assert drifting.stability < steady.stability - 0.1
    assert drifting.stability == pytest.approx(1 - drifting.distance_std / STABILITY_MAX_STD)


@pytest.mark.embeddings
def test_one_turn_off_voice_is_unstable(embedder: SentenceTransformerEmbeddingAdapter) -> None:
    result = session_stability(
        [*PARAPHRASES[:3], "lol whatever, the striker scored twice"], embedder=embedder
    )
    assert result.stability < 0.7
    assert max(result.distances) == result.distances[-1]


@pytest.mark.embeddings
def test_equally_unrelated_turns_show_in_the_mean_distance_not_the_spread(
    embedder: SentenceTransformerEmbeddingAdapter,
) -> None:
    """The documented blind spot of the seed's statistic: uniform dispersion has a small spread."""
    steady = session_stability(PARAPHRASES, embedder=embedder)
    unrelated = session_stability(UNRELATED, embedder=embedder)
    assert unrelated.mean_distance > steady.mean_distance + 0.2
    assert unrelated.stability < 1.0


@pytest.mark.embeddings
def test_a_one_turn_session_has_stability_one(embedder: SentenceTransformerEmbeddingAdapter) -> None:
    result = session_stability([REFUND], embedder=embedder)
    assert (result.turns, result.stability) == (1, 1.0)
    assert result.distances == (pytest.approx(0.0, abs=1e-12),)  # one vector against itself, up to rounding


@pytest.mark.embeddings
def test_every_session_is_embedded_in_one_call() -> None:
    counting = CountingEmbedder()
    found = session_stabilities(
        {"s1": [REFUND] * 3, ("side", "s2"): DRIFTING, "s3": [REFUND]}, embedder=counting
    )
    assert len(counting.calls) == 1
    assert len(counting.calls[0]) == 3 + len(DRIFTING) + 1
    assert list(found) == ["s1", ("side", "s2"), "s3"]
    assert found["s1"].stability == pytest.approx(1.0, abs=1e-9)
    assert found[("side", "s2")].turns == len(DRIFTING)


def test_a_session_without_turns_and_a_bad_normalisation_are_errors() -> None:
    counting = CountingEmbedder()
    with pytest.raises(ValueError, match="no turns"):
        session_stabilities({"empty": []}, embedder=counting)
    with pytest.raises(ValueError, match="max_std"):
        session_stabilities({"s": ["a"]}, embedder=counting, max_std=0)
    assert counting.calls == []


# -- overall score and grade ----------------------------------------------------------------


def test_overall_score_weights_authenticity_safety_and_stability() -> None:
    assert overall_score(0.8, 0.6, 0.5) == pytest.approx(0.5 * 0.8 + 0.3 * 0.6 + 0.2 * 0.5)
    assert overall_score(1.0, 0.0, 0.0) == pytest.approx(0.5)
    assert overall_score(0.0, 1.0, 0.0) == pytest.approx(0.3)
    assert overall_score(0.0, 0.0, 1.0) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="safety"):
        overall_score(0.5, 1.5, 0.5)
    with pytest.raises(ValueError, match="stability"):
        overall_score(0.5, 0.5, float("nan"))


@pytest.mark.parametrize(
    ("score", "grade"),
    [
        (1.0, "A"),
        (0.9, "A"),
        (0.8999, "B"),
        (0.8, "B"),
        (0.7999, "C"),
        (0.7, "C"),
        (0.6999, "D"),
        (0.6, "D"),
        (0.5999, "F"),
        (0.0, "F"),
    ],
)
def test_letter_grade_band_edges(score: float, grade: str) -> None:
    assert letter_grade(score) == grade


def test_float_noise_at_a_band_edge_keeps_the_grade() -> None:
    # 0.5 x 0.69 + 0.3 x 0.95 + 0.2 x 0.85 is exactly 0.8, but 0.7999999999999999 in floats
    assert overall_score(0.69, 0.95, 0.85) < 0.8
    assert letter_grade(overall_score(0.69, 0.95, 0.85)) == "B"


# -- summary over sessions ------------------------------------------------------------------


def test_summary_gives_per_session_overall_mean_interval_and_grade() -> None:
    summary = session_summary(
        {"a": 0.9, "b": 0.8, "c": 0.7},
        {"a": 1.0, "b": 1.0, "c": 0.5},
        {"a": 1.0, "b": 0.5, "c": 0.9},
    )
    overall = [0.45 + 0.3 + 0.2, 0.4 + 0.3 + 0.1, 0.35 + 0.15 + 0.18]
    assert [s.session for s in summary.sessions] == ["a", "b", "c"]
    assert [s.overall for s in summary.sessions] == pytest.approx(overall)
    assert summary.mean == pytest.approx(sum(overall) / 3)
    assert summary.grade == letter_grade(summary.mean) == "B"
    assert (summary.authenticity, summary.safety, summary.stability) == pytest.approx((0.8, 2.5 / 3, 2.4 / 3))
    assert summary.low is not None and summary.high is not None
    assert min(overall) <= summary.low <= summary.mean <= summary.high <= max(overall)
    assert summary.method == "percentile" and summary.note is None
    data = summary.to_dict()
    assert data["n_sessions"] == 3 and data["grade"] == "B" and data["interval_method"] == "percentile"
    assert data["sessions"][0] == {
        "session": "a",
        "authenticity": 0.9,
        "safety": 1.0,
        "stability": 1.0,
        "overall": pytest.approx(0.95),
    }


def test_summary_interval_is_seeded() -> None:
    args = ({"a": 0.9, "b": 0.4, "c": 0.7}, {"a": 1, "b": 1, "c": 1}, {"a": 1, "b": 1, "c": 1})
    assert session_summary(*args) == session_summary(*args)


def test_a_single_session_has_no_interval() -> None:
    summary = session_summary({"only": 0.9}, {"only": 1.0}, {"only": 1.0})
    assert isinstance(summary, SessionSummary)
    assert (summary.low, summary.high) == (None, None)
    assert summary.note == "one session: no interval"
    assert summary.grade == "A"
    assert bootstrap_mean_interval([0.5]) is None


def test_equal_sessions_give_a_point_interval() -> None:
    assert bootstrap_mean_interval([0.8, 0.8, 0.8]) == (0.8, 0.8)


def test_summary_refuses_mismatched_or_missing_sessions() -> None:
    with pytest.raises(ValueError, match="same sessions"):
        session_summary({"a": 1.0}, {"b": 1.0}, {"a": 1.0})
    with pytest.raises(ValueError, match="no sessions"):
        session_summary({}, {}, {})
    with pytest.raises(ValueError, match="authenticity"):
        session_summary({"a": 1.2}, {"a": 1.0}, {"a": 1.0})


def test_bootstrap_interval_covers_the_true_mean_at_about_its_nominal_rate() -> None:
    """200 seeded simulations of 20 sessions with skewed overall scores (Beta(8, 2), mean 0.8).

    The percentile bootstrap under-covers a little at n = 20 (about 92-93% here); the whole
    simulation is seeded, so the count is fixed, and 88% leaves room for a different random
    stream in another numpy without accepting a broken interval (a bug that, e.g., reported a
    standard-error band instead would cover ~68%).
    """
    rng = np.random.default_rng(20240601)
    true_mean = 8 / (8 + 2)
    covered = 0
    widths = []
    for i in range(200):
        values = rng.beta(8, 2, size=20).tolist()
        interval = bootstrap_mean_interval(values, n_resamples=2000, seed=i)
        assert interval is not None
        covered += interval[0] <= true_mean <= interval[1]
        widths.append(interval[1] - interval[0])
    assert covered >= 176, covered
    assert covered < 200  # not trivially wide
    assert 0.05 < float(np.mean(widths)) < 0.15  # ~ 2 x 1.96 x sd(0.12) / sqrt(20) = 0.105
