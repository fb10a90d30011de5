"""RelativeJudge: any single-response scorer as a paired judge (candidate relative to baseline)."""

from __future__ import annotations

import asyncio

from llm_connect.grading._protocols import Case
from llm_connect.grading._results import GradingResult
from llm_connect.scoring._base import Score, Scorer, relative_quality
from llm_connect.types import LLMResponse, RunConfig

__all__ = ["RelativeJudge"]


class RelativeJudge:
    """Turns a :class:`~llm_connect.scoring.Scorer` into a paired judge.

    Both responses are scored on their own; the grade is
    :func:`~llm_connect.scoring.relative_quality` of the two scores, with both absolute scores and
    their details kept in ``GradingResult.details``. A scorer that offers
    ``score_pair(baseline_text, candidate_text, *, prompt, case)`` is asked
    for both at once (so it can, e.g., tokenise the prompt once).

    ``asks_llm`` is the scorer's own ``asks_llm`` (``False`` when it declares
    none); results and the stored ``judge_spec`` carry it.
    """

    def __init__(self, scorer: Scorer) -> None:
        self.scorer = scorer
        self.grader_id = scorer.name
        declared = getattr(scorer, "asks_llm", False)
        self.asks_llm: bool = declared if isinstance(declared, bool) else True
        """Whether the scorer asks an LLM (its own ``asks_llm``, default ``False``)."""

    def __repr__(self) -> str:
        return f"RelativeJudge({self.scorer!r})"

    def formats_used(self) -> dict[str, str]:
        """The scorer's ``formats_used()`` (``{adapter id: response format}`` its LLM's requests
        succeeded in, e.g. the ``safety`` judge's); empty for a scorer that asks no LLM."""
        used = getattr(self.scorer, "formats_used", None)
        return dict(used()) if callable(used) else {}

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
        notes = f"{self.scorer.name}: candidate {cand.value:.3f} vs baseline {base.value:.3f}" + (
            " (at least as good)" if quality == 1.0 else f" (ratio {quality:.3f})"
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
