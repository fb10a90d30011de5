"""Single-response scorers and the judge that compares two of their scores."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from llm_connect.grading._protocols import Case
from llm_connect.grading._results import GradingResult, validate_quality_score
from llm_connect.types import LLMResponse, RunConfig

__all__ = ["RelativeJudge", "Score", "Scorer", "relative_quality"]


@dataclass(frozen=True)
class Score:
    """One response's score: ``value`` in 0..1 plus evidence in ``details``."""

    value: float
    """The score, validated to lie in 0.0..1.0."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """JSON-serialisable evidence (what matched, what was missing, errors)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", validate_quality_score(self.value, what="score"))


@runtime_checkable
class Scorer(Protocol):
    """Scores one response on its own (no baseline).

    ``name`` becomes the grader id of the :class:`RelativeJudge` built on it
    and should carry the scorer's version or distinguishing option
    (``vrty:1.0.1``, ``format:json``). ``spec`` is the registry spec that
    rebuilds the scorer's judge (``{"name": ..., "args": {...}}``).

    A scorer that asks an LLM must also set ``asks_llm = True`` (the safety
    scorer with an LLM safety judge does); :class:`RelativeJudge` reads it
    with ``False`` as the default, so routing gates such grades until the
    judge is calibrated.
    """

    name: str
    spec: Mapping[str, Any]

    def score(self, text: str, *, prompt: str, case: Case | None = None) -> Score:
        """Score ``text`` as an answer to ``prompt``."""
        ...


def relative_quality(baseline: float, candidate: float) -> float:
    """Candidate quality relative to the baseline.

    1.0 when the candidate scores at least the baseline (so 1.0 when both are
    0), otherwise ``candidate / baseline``. Gating on ``quality >= k`` is then
    VRTY's rule "candidate >= k x baseline on the same prompt".
    """
    if candidate >= baseline:
        return 1.0
    ratio = candidate / baseline  # baseline > candidate >= 0, so baseline > 0
    return min(1.0, max(0.0, ratio)) if math.isfinite(ratio) else 0.0


class RelativeJudge:
    """Turns a :class:`Scorer` into a paired judge.

    Both responses are scored on their own; the grade is
    :func:`relative_quality` of the two scores, with both absolute scores and
    their details kept in ``GradingResult.details``. A scorer that offers
    ``score_pair(baseline_text, candidate_text, *, prompt, case)`` is asked
    for both at once (so it can, e.g., tokenise the prompt once).
    """

    def __init__(self, scorer: Scorer) -> None:
        self.scorer = scorer
        self.grader_id = scorer.name
        declared = getattr(scorer, "asks_llm", False)
        self.asks_llm: bool = declared if isinstance(declared, bool) else True
        """Whether the scorer asks an LLM (its own ``asks_llm``, default ``False``)."""

    def __repr__(self) -> str:
        return f"RelativeJudge({self.scorer!r})"

    def _scores(self, baseline: str, candidate: str, prompt: str, case: Case | None) -> tuple[Score, Score]:
        pair = getattr(self.scorer, "score_pair", None)
        if pair is not None:
            base_score, cand_score = pair(baseline, candidate, prompt=prompt, case=case)
            return base_score, cand_score
        return (
            self.scorer.score(baseline, prompt=prompt, case=case),
            self.scorer.score(candidate, prompt=prompt, case=case),
        )

    def judge(
        self,
        baseline_response: LLMResponse,
        candidate_response: LLMResponse,
        *,
        prompt: str,
        run_config: RunConfig,
        case: Case | None = None,
    ) -> GradingResult:
        """Score both responses and grade the candidate relative to the baseline."""
        base, cand = self._scores(baseline_response.text, candidate_response.text, prompt, case)
        return self.result(
            base, cand, baseline_response, candidate_response, prompt=prompt, run_config=run_config
        )

    def result(
        self,
        base: Score,
        cand: Score,
        baseline_response: LLMResponse,
        candidate_response: LLMResponse,
        *,
        prompt: str,
        run_config: RunConfig,
    ) -> GradingResult:
        """The grade for two scores already computed (what :meth:`judge` returns);
        lets a subclass score many pairs at once and still build the same result."""
        quality = relative_quality(base.value, cand.value)
        notes = (
            f"{self.scorer.name}: candidate {cand.value:.3f} vs baseline {base.value:.3f}"
            + (" (at least as good)" if quality == 1.0 else f" (ratio {quality:.3f})")
        )
        return GradingResult(
            quality_score=quality,
            notes=notes,
            grader_id=self.grader_id,
            baseline_response=baseline_response,
            candidate_response=candidate_response,
            details={
                "baseline_score": base.value,
                "candidate_score": cand.value,
                "baseline": dict(base.details),
                "candidate": dict(cand.details),
                "judge_spec": {**self.scorer.spec, "asks_llm": self.asks_llm},
            },
            prompt=prompt,
            run_config=run_config,
            asks_llm=self.asks_llm,
        )

    async def ajudge(
        self,
        baseline_response: LLMResponse,
        candidate_response: LLMResponse,
        *,
        prompt: str,
        run_config: RunConfig,
        case: Case | None = None,
    ) -> GradingResult:
        """:meth:`judge` in a worker thread, off the event loop."""
        return await asyncio.to_thread(
            self.judge,
            baseline_response,
            candidate_response,
            prompt=prompt,
            run_config=run_config,
            case=case,
        )
