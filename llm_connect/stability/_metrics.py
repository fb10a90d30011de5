"""The four stability metrics and the exact-agreement rates, over the successful runs.

Each metric is a consistency in 0..1 (1 = every run the same) with a variance
class from :class:`~llm_connect.stability.StabilityConfig`:

* **semantic** — each run's answer text is embedded (one batched call); the score
  is the mean cosine of each unit vector to the centroid of the unit vectors.
* **tool** — each run's tool calls as an order-independent multiset of
  ``(name, canonical arguments)``, the arguments parsed as JSON and re-serialised
  with sorted keys (arguments that are not JSON are compared as their stripped
  text); the score is the share of runs whose multiset equals the most common one.
  A run without tool calls has the empty multiset.
* **structural** — each run's text is classified ``json``, ``code``, ``markdown``,
  ``list`` or ``text`` (first match in that order); the score is the share of the
  most common structure.
* **length** — the coefficient of variation ``cv = pstdev / mean`` of the answer
  lengths in words; ``score = max(0, 1 - cv / length_cv_zero)``.

A run's *answer text* (embedded and measured) is its text followed by one line
``name(canonical arguments)`` per tool call, so a tool-only answer is not empty.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from llm_connect.stability._config import StabilityConfig
from llm_connect.stability._report import AgreementRates, MetricResult
from llm_connect.types import LLMResponse, ToolCall

__all__ = [
    "STRUCTURES",
    "agreement_rates",
    "answer_text",
    "canonical_arguments",
    "detect_structure",
    "length_consistency",
    "normalized_answer",
    "semantic_consistency",
    "structural_consistency",
    "tool_consistency",
    "tool_signature",
    "word_count",
]

STRUCTURES: tuple[str, ...] = ("json", "code", "markdown", "list", "text")
"""The output structures :func:`detect_structure` tells apart, in detection order."""

_FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)
_WHOLE_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*)\n\s*```\s*$", re.DOTALL)
_MARKDOWN = (
    re.compile(r"^#{1,6}\s+\S", re.MULTILINE),  # heading
    re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$", re.MULTILINE),  # table rule
    re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__"),  # bold
    re.compile(r"\[[^\]\n]+\]\([^)\s]+\)"),  # link
    re.compile(r"^>\s+\S", re.MULTILINE),  # block quote
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+\S", re.MULTILINE)


def canonical_arguments(call: ToolCall) -> str:
    """The call's arguments as canonical JSON (sorted keys, no spaces), or their stripped
    text when they are not JSON."""
    try:
        parsed = call.parsed_arguments()
    except ValueError:
        return call.arguments.strip()
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tool_signature(calls: Sequence[ToolCall]) -> tuple[tuple[str, str], ...]:
    """The order-independent multiset of ``(name, canonical arguments)`` of a run's calls."""
    return tuple(sorted((c.name, canonical_arguments(c)) for c in calls))


def answer_text(response: LLMResponse) -> str:
    """The text a run is embedded and measured by: its text plus one line per tool call."""
    lines = [response.text] if response.text else []
    lines.extend(f"{c.name}({canonical_arguments(c)})" for c in response.tool_calls)
    return "\n".join(lines)


def word_count(text: str) -> int:
    """Whitespace-separated words."""
    return len(text.split())


def _parse_json_text(text: str) -> Any:
    """The JSON object or array ``text`` holds (bare or as one fenced block), else ``None``."""
    body = text.strip()
    fenced = _WHOLE_FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body or body[0] not in "[{":
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, (dict, list)) else None


def detect_structure(text: str) -> str:
    """``json`` (the whole text is a JSON object or array, bare or fenced), ``code``
    (a fenced block), ``markdown`` (a heading, table, bold, link or quote), ``list``
    (two or more list-item lines) or ``text``."""
    if _parse_json_text(text) is not None:
        return "json"
    if _FENCE.search(text):
        return "code"
    if any(p.search(text) for p in _MARKDOWN):
        return "markdown"
    if len(_LIST_ITEM.findall(text)) >= 2:
        return "list"
    return "text"


def normalized_answer(response: LLMResponse) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A run's parsed answer: canonical JSON when the text is JSON, else the text
    case-folded with whitespace collapsed; plus its tool-call multiset."""
    parsed = _parse_json_text(response.text)
    if parsed is not None:
        text = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    else:
        text = " ".join(response.text.casefold().split())
    return text, tool_signature(response.tool_calls)


def _most_common_share(keys: Sequence[Any]) -> tuple[float, int, Any]:
    """(share of the most common key, number of distinct keys, the key); ties go to the first seen."""
    counts = Counter(keys)
    top = max(counts.values())
    key = next(k for k in keys if counts[k] == top)
    return top / len(keys), len(counts), key


def semantic_consistency(vectors: Any, config: StabilityConfig) -> MetricResult:
    """Mean cosine similarity of each run's embedding to the centroid (clamped to 0..1).

    ``vectors``: one row per run (a float array from the embedder, or sequences of floats);
    a zero vector counts as similarity 0.
    """
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    units = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    centroid = units.mean(axis=0)
    c_norm = float(np.linalg.norm(centroid))
    sims = [float(s) for s in (units @ centroid / c_norm if c_norm > 0 else np.zeros(len(units)))]
    score = min(1.0, max(0.0, statistics.fmean(sims)))
    return MetricResult(
        name="semantic",
        score=score,
        variance=config.variance("semantic", score),
        weight=config.semantic_weight,
        details={"min_similarity": min(sims), "similarities": [round(s, 6) for s in sims]},
    )


def tool_consistency(responses: Sequence[LLMResponse], config: StabilityConfig) -> MetricResult:
    """Share of runs whose tool-call multiset equals the most common one."""
    signatures = [tool_signature(r.tool_calls) for r in responses]
    score, distinct, top = _most_common_share(signatures)
    using = sum(1 for s in signatures if s)
    names = Counter(name for s in signatures for name in dict.fromkeys(n for n, _ in s))
    return MetricResult(
        name="tool",
        score=score,
        variance=config.variance("tool", score),
        weight=config.tool_weight,
        details={
            "tool_usage_rate": using / len(signatures),
            "runs_with_tool_calls": using,
            "distinct_call_sets": distinct,
            "most_common_calls": [{"name": n, "arguments": a} for n, a in top],
            "runs_per_tool": dict(names.most_common()),
        },
    )


def structural_consistency(responses: Sequence[LLMResponse], config: StabilityConfig) -> MetricResult:
    """Share of runs with the most common structure."""
    structures = [detect_structure(r.text) for r in responses]
    score, _, top = _most_common_share(structures)
    return MetricResult(
        name="structural",
        score=score,
        variance=config.variance("structural", score),
        weight=config.structural_weight,
        details={
            "most_common": top,
            "counts": {s: structures.count(s) for s in STRUCTURES if s in structures},
        },
    )


def length_consistency(lengths: Sequence[int], config: StabilityConfig) -> MetricResult:
    """Score from the coefficient of variation of the answer lengths (in words)."""
    mean = statistics.fmean(lengths)
    std = statistics.pstdev(lengths)
    short = mean < config.length_min_mean_words
    cv = 0.0 if short or mean == 0 else std / mean
    score = max(0.0, 1.0 - cv / config.length_cv_zero)
    return MetricResult(
        name="length",
        score=score,
        variance=config.variance("length", cv),
        weight=config.length_weight,
        details={
            "cv": cv,
            "mean_words": mean,
            "std_words": std,
            "min_words": min(lengths),
            "max_words": max(lengths),
            "too_short_to_measure": short,
        },
    )


def agreement_rates(responses: Sequence[LLMResponse]) -> AgreementRates:
    """Shares of runs whose raw text, and whose parsed answer, equal the most common one."""
    raw, raw_distinct, _ = _most_common_share([r.text for r in responses])
    parsed, parsed_distinct, _ = _most_common_share([normalized_answer(r) for r in responses])
    return AgreementRates(
        raw_text=raw, parsed_answer=parsed, distinct_texts=raw_distinct, distinct_answers=parsed_distinct
    )
