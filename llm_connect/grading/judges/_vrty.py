"""VrtyJudge: the candidate's VRTY composite relative to the baseline's (``--judge vrty``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from llm_connect.grading.judges._relative import RelativeJudge
from llm_connect.scoring.vrty._idf import idf_table
from llm_connect.scoring.vrty._score import WEIGHTS
from llm_connect.scoring.vrty._scorer import VRTY_VERSION, VrtyScorer

if TYPE_CHECKING:
    from llm_connect.grading._protocols import Case
    from llm_connect.grading._results import GradingResult
    from llm_connect.grading.judges._registry import JudgeContext
    from llm_connect.types import LLMResponse, RunConfig

__all__ = ["VrtyJudge", "make_vrty_judge"]


class VrtyJudge(RelativeJudge):
    """The ``vrty`` judge: the candidate's VRTY composite relative to the baseline's.

    ``quality_score`` is 1.0 when the candidate's composite is at least the
    baseline's, otherwise candidate / baseline, so ``quality >= k`` is VRTY's
    gate "candidate >= k x baseline on the same prompt". ``details`` holds
    ``baseline_score`` and ``candidate_score`` (the composites), ``baseline``
    and ``candidate`` (each side's dimensions), ``vrty_version``,
    ``idf_sha256``, ``weights`` and ``judge_spec``.
    """

    def __init__(self, scorer: VrtyScorer | None = None) -> None:
        super().__init__(scorer or VrtyScorer())

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
        result = super().judge(
            baseline_response, candidate_response, prompt=prompt, run_config=run_config, case=case
        )
        details = dict(result.details)
        details["vrty_version"] = VRTY_VERSION
        details["idf_sha256"] = idf_table().sha256
        details["weights"] = dict(WEIGHTS)
        return dataclasses.replace(result, details=details)


def make_vrty_judge(context: JudgeContext) -> VrtyJudge:
    """Registry factory for ``vrty`` (takes no options)."""
    return VrtyJudge()
