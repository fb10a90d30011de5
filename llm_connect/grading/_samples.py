"""Samples: one case answered K times per side, graded as one per-case value.

With ``--samples K`` each side answers each case K times (sample k of the
baseline is paired with sample k of the candidate) and every judge grades each
pair. The K grades of one judge become **one** grade of the case: the case stays
the unit of evidence, so K samples never count as K cases.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from typing import Any

from llm_connect.errors import ConfigurationError
from llm_connect.grading._results import GradingResult
from llm_connect.types import LLMResponse

__all__ = ["MAX_SAMPLES", "check_samples", "merge_samples"]

MAX_SAMPLES = 100
"""The most samples per case and side one run may ask for."""

_PER_SIDE_SCORES = ("candidate_score", "baseline_score")


def check_samples(samples: object) -> int:
    """``samples`` as an integer in 1..:data:`MAX_SAMPLES`, else :class:`ConfigurationError`."""
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise ConfigurationError(f"samples must be an integer in 1..{MAX_SAMPLES}, not {samples!r}")
    return samples


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def _merged_response(responses: Sequence[LLMResponse]) -> LLMResponse:
    """Sample 0's response with latency and cost replaced by their means over the samples."""
    first = responses[0]
    return dataclasses.replace(
        first,
        latency_ms=_mean([r.latency_ms for r in responses]),
        cost_usd=_mean([r.cost_usd for r in responses]),
    )


def _sample_entry(result: GradingResult) -> dict[str, Any]:
    return {
        "quality_score": result.quality_score,
        "notes": result.notes,
        "details": dict(result.details),
        "baseline_text": result.baseline_response.text,
        "candidate_text": result.candidate_response.text,
        "baseline_tool_calls": [c.to_dict() for c in result.baseline_response.tool_calls],
        "candidate_tool_calls": [c.to_dict() for c in result.candidate_response.tool_calls],
        "baseline_cost_usd": result.baseline_response.cost_usd,
        "candidate_cost_usd": result.candidate_response.cost_usd,
    }


def merge_samples(results: Sequence[GradingResult]) -> GradingResult:
    """One grade of a case from its K sample grades (one judge, in sample order).

    * ``quality_score``: the mean of the samples' scores;
    * ``details``: sample 0's details, with ``candidate_score`` / ``baseline_score``
      (single-response scorers) replaced by their means, plus ``samples`` (K) and
      ``sample_grades``: each sample's score, notes, details, texts, tool calls and costs;
    * responses: sample 0's, with ``latency_ms`` and ``cost_usd`` the means over the
      samples (what one call costs; the ledger's cost and latency figures stay per call);
    * ``notes``: the mean and the per-sample scores, then sample 0's notes.

    A single result is returned unchanged.
    """
    if not results:
        raise ValueError("merge_samples needs at least one result")
    if len(results) == 1:
        return results[0]
    first = results[0]
    scores = [r.quality_score for r in results]
    details: dict[str, Any] = dict(first.details)
    for key in _PER_SIDE_SCORES:
        values = [r.details.get(key) for r in results]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            details[key] = statistics.fmean(float(v) for v in values)  # type: ignore[arg-type]
    details["samples"] = len(results)
    details["sample_grades"] = [_sample_entry(r) for r in results]
    mean = statistics.fmean(scores)
    listed = ", ".join(f"{s:.2f}" for s in scores)
    return dataclasses.replace(
        first,
        quality_score=min(1.0, max(0.0, mean)),
        notes=f"mean of {len(results)} samples {mean:.3f} ({listed}); sample 1: {first.notes}",
        details=details,
        baseline_response=_merged_response([r.baseline_response for r in results]),
        candidate_response=_merged_response([r.candidate_response for r in results]),
    )
