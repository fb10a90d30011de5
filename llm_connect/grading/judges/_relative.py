"""RelativeJudge: any single-response scorer as a paired judge (candidate relative to baseline)."""

from __future__ import annotations

from llm_connect.grading._protocols import JudgePair
from llm_connect.grading._results import GradingResult
from llm_connect.grading.judges._base import BaseJudge, Scored
from llm_connect.scoring import Score, Scorer, relative_quality
from llm_connect.types import LLMResponse, RunConfig

__all__ = ["RelativeJudge"]


class RelativeJudge(BaseJudge):
    """Turns a :class:`~llm_connect.scoring.Scorer` into a paired judge.

    Both responses are scored on their own; the grade is
    :func:`~llm_connect.scoring.relative_quality` of the two scores, with both absolute scores and
    their details kept in ``GradingResult.details``. A scorer that offers
    ``score_pair(baseline_text, candidate_text, *, prompt, case)`` is asked
    for both at once (so it can, e.g., tokenise the prompt once).

    ``asks_llm`` is the scorer's own ``asks_llm`` (``False`` when it declares
    none); results and the stored ``judge_spec`` carry it. ``ajudge`` scores in a worker
    thread, off the event loop.
    """

    in_thread = True

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

    def _scores(self, pair: JudgePair) -> tuple[Score, Score]:
        baseline, candidate = pair.baseline_response.text, pair.candidate_response.text
        prompt, case = pair.prompt, pair.case
        both = getattr(self.scorer, "score_pair", None)
        if both is not None:
            base_score, cand_score = both(baseline, candidate, prompt=prompt, case=case)
            return base_score, cand_score
        return (
            self.scorer.score(baseline, prompt=prompt, case=case),
            self.scorer.score(candidate, prompt=prompt, case=case),
        )

    def score(self, pair: JudgePair) -> Scored:
        """Score both responses and grade the candidate relative to the baseline (:meth:`compare`)."""
        return self.compare(*self._scores(pair))

    def compare(self, base: Score, cand: Score) -> Scored:
        """The candidate's grade from the two responses' own scores: their
        :func:`~llm_connect.scoring.relative_quality`, both scores and their details."""
        quality = relative_quality(base.value, cand.value)
        notes = f"{self.scorer.name}: candidate {cand.value:.3f} vs baseline {base.value:.3f}" + (
            " (at least as good)" if quality == 1.0 else f" (ratio {quality:.3f})"
        )
        details = {
            "baseline_score": base.value,
            "candidate_score": cand.value,
            "baseline": dict(base.details),
            "candidate": dict(cand.details),
            "judge_spec": {**self.scorer.spec, "asks_llm": self.asks_llm},
        }
        return Scored(quality, notes, details)

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
        pair = JudgePair(baseline_response, candidate_response, prompt, run_config)
        return self.grading_result(self.compare(base, cand), pair)
