"""The four VRTY 1.0.1 dimensions and their composite, computed in one pass.

With ``w(t) = count(t) * idf(t)`` over a capped token list (see ``_text``):

* relevance    = cosine(w over the prompt, w over the response)
* coherence    = mean cosine of adjacent sentences' w vectors; 1.0 below 2 sentences
* completeness = sum of idf over the prompt's distinct non-stop-word tokens found in
  the response / the same sum over all of them (0.0 when the prompt has none)
* conciseness  = distinct non-stop-word response tokens / response tokens
* composite    = 0.35 relevance + 0.20 coherence + 0.30 completeness + 0.15 conciseness

A cosine with a zero vector is 0.0; a cosine or composite above 1.0 (one ulp
of rounding) is clamped to 1.0. A response without tokens scores 0.0
everywhere; an empty prompt gives 0.0 relevance and completeness.

Reproducibility: every float sum is an explicit left-to-right loop over
tokens in sorted order, never ``sum()`` (whose algorithm changed in Python
3.12) and never set or dict iteration order (which depends on
``PYTHONHASHSEED``). The order is the one VRTY 1.0.1 uses, so results equal
``vrty.score()`` bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from math import sqrt
from types import MappingProxyType
from typing import Any, Final

from llm_connect.scoring.vrty._idf import IdfTable
from llm_connect.scoring.vrty._text import capped_tokens, split_text

try:  # the C helper behind collections.Counter, without Counter's overhead
    from collections import _count_elements  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - other Python implementations

    def _count_elements(mapping: dict[str, int], iterable: list[str]) -> None:
        get = mapping.get
        for item in iterable:
            mapping[item] = get(item, 0) + 1


__all__ = ["WEIGHTS", "PromptTerms", "VrtyResult", "analyse_prompt", "score_response"]

W_RELEVANCE: Final[float] = 0.35
W_COHERENCE: Final[float] = 0.20
W_COMPLETENESS: Final[float] = 0.30
W_CONCISENESS: Final[float] = 0.15

WEIGHTS: Final = MappingProxyType(
    {
        "relevance": W_RELEVANCE,
        "coherence": W_COHERENCE,
        "completeness": W_COMPLETENESS,
        "conciseness": W_CONCISENESS,
    }
)
"""The fixed composite weights (they sum to exactly 1.0)."""


@dataclass(frozen=True, slots=True)
class VrtyResult:
    """One response's VRTY 1.0.1 scores, each in 0.0..1.0."""

    composite: float
    """The weighted sum of the four dimensions."""
    relevance: float
    """TF-IDF cosine between prompt and response."""
    coherence: float
    """Mean TF-IDF cosine of adjacent sentences (1.0 for fewer than two)."""
    completeness: float
    """IDF-weighted share of the prompt's content terms found in the response."""
    conciseness: float
    """Distinct content tokens over all tokens."""
    response_tokens: int
    """Response tokens scored (at most the 2,048-token cap). Named so that the
    ledger's secret redaction, which drops keys containing "token" unless they
    end in "_tokens", keeps it."""
    sentences: int
    """Response sentences that fit under the cap (what coherence compared)."""

    def to_dict(self) -> dict[str, Any]:
        """The scores as a plain JSON-serialisable dict."""
        return {
            "composite": self.composite,
            "relevance": self.relevance,
            "coherence": self.coherence,
            "completeness": self.completeness,
            "conciseness": self.conciseness,
            "response_tokens": self.response_tokens,
            "sentences": self.sentences,
        }


EMPTY_RESULT: Final = VrtyResult(0.0, 0.0, 0.0, 0.0, 0.0, 0, 0)


@dataclass(frozen=True, slots=True)
class PromptTerms:
    """What scoring needs from a prompt, computed once per prompt."""

    weights: dict[str, float]
    """Token -> count * idf over the capped prompt tokens."""
    keys: tuple[str, ...]
    """``weights``' tokens, sorted."""
    norm: float
    """Euclidean norm of ``weights`` (0.0 for a prompt without tokens)."""
    terms: tuple[tuple[str, float], ...]
    """Distinct non-stop-word tokens, sorted, each with its idf."""
    terms_total: float
    """Sum of the terms' idf (0.0 when there are none)."""


@lru_cache(maxsize=256)
def analyse_prompt(prompt: str, table: IdfTable) -> PromptTerms:
    """The prompt's vector and content terms (cached: a suite repeats prompts)."""
    words = capped_tokens(prompt)
    idf_get = table.idf.get
    oov = table.oov
    counts: dict[str, int] = {}
    _count_elements(counts, words)
    keys = tuple(sorted(counts))
    weights: dict[str, float] = {}
    norm_sq = 0.0
    for key in keys:
        w = counts[key] * idf_get(key, oov)
        weights[key] = w
        norm_sq += w * w
    stopwords = table.stopwords
    terms = tuple((key, idf_get(key, oov)) for key in keys if key not in stopwords)
    total = 0.0
    for _, w in terms:
        total += w
    return PromptTerms(weights, keys, sqrt(norm_sq), terms, total)


def _coherence(sentences: list[list[str]], idf_of: dict[str, float]) -> float:
    """Mean cosine of adjacent sentence vectors (the caller ensures >= 2 sentences).

    ``idf_of`` holds the idf of every token of ``sentences``.
    """
    total = 0.0
    prev_vec: dict[str, float] = {}
    prev_keys: list[str] = []
    prev_norm = 0.0
    first = True
    for words in sentences:
        if len(words) == 1:
            key = words[0]
            w = idf_of[key]
            vec = {key: w}
            keys = words
            norm = sqrt(w * w)
        else:
            vec = {}
            _count_elements(vec, words)
            keys = sorted(vec)
            norm_sq = 0.0
            for key in keys:
                w = vec[key] * idf_of[key]
                vec[key] = w
                norm_sq += w * w
            norm = sqrt(norm_sq)
        if first:
            first = False
        else:
            dot = 0.0
            if len(keys) <= len(prev_keys):
                for key in keys:
                    if key in prev_vec:
                        dot += prev_vec[key] * vec[key]
            else:
                for key in prev_keys:
                    if key in vec:
                        dot += prev_vec[key] * vec[key]
            cos = dot / (prev_norm * norm)
            total += 1.0 if cos > 1.0 else cos
        prev_vec, prev_keys, prev_norm = vec, keys, norm
    return total / (len(sentences) - 1)


def score_response(prompt: PromptTerms, response: str, table: IdfTable) -> VrtyResult:
    """Score ``response`` against an analysed prompt."""
    words, sentences = split_text(response)
    n_words = len(words)
    if not n_words:
        return EMPTY_RESULT
    counts: dict[str, int] = {}
    _count_elements(counts, words)
    keys = sorted(counts)
    # Each distinct token's idf, looked up once (a plain dict subscript is the
    # cheapest lookup in the loops below).
    idf_of = dict(zip(keys, map(table.idf.get, keys, repeat(table.oov)), strict=True))
    if not response.isascii():  # sentences are tokenised apart from the text there
        idf_get = table.idf.get
        oov = table.oov
        for found in sentences:
            for key in found:
                if key not in idf_of:
                    idf_of[key] = idf_get(key, oov)

    relevance = 0.0
    if prompt.norm != 0.0:
        norm_sq = 0.0
        for key in keys:
            w = counts[key] * idf_of[key]
            norm_sq += w * w
        p_weights = prompt.weights
        dot = 0.0
        if len(prompt.keys) <= len(keys):
            for key in prompt.keys:
                if key in counts:
                    dot += p_weights[key] * (counts[key] * idf_of[key])
        else:
            for key in keys:
                if key in p_weights:
                    dot += p_weights[key] * (counts[key] * idf_of[key])
        cos = dot / (prompt.norm * sqrt(norm_sq))
        relevance = 1.0 if cos > 1.0 else cos

    coherence = _coherence(sentences, idf_of) if len(sentences) > 1 else 1.0

    completeness = 0.0
    if prompt.terms_total != 0.0:
        covered = 0.0
        for key, w in prompt.terms:
            if key in counts:
                covered += w
        completeness = covered / prompt.terms_total

    conciseness = len(counts.keys() - table.stopwords) / n_words

    composite = (
        W_RELEVANCE * relevance
        + W_COHERENCE * coherence
        + W_COMPLETENESS * completeness
        + W_CONCISENESS * conciseness
    )
    if composite > 1.0:
        composite = 1.0
    return VrtyResult(composite, relevance, coherence, completeness, conciseness, n_words, len(sentences))
