"""VrtyJudge: the candidate's VRTY composite relative to the baseline's (``--judge vrty``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from llm_connect.grading.judges._relative import RelativeJudge
from llm_connect.scoring.vrty import IDF_SHA256, VRTY_VERSION, WEIGHTS, VrtyScorer

if TYPE_CHECKING:
    from llm_connect.grading.judges._base import Scored
    from llm_connect.grading.judges._registry import JudgeContext
    from llm_connect.scoring import Score

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

    def compare(self, base: Score, cand: Score) -> Scored:
        """The relative grade of the two composites, with VRTY's version, IDF table and weights."""
        scored = super().compare(base, cand)
        details = {
            **scored.details,
            "vrty_version": VRTY_VERSION,
            "idf_sha256": IDF_SHA256,  # the table the scorer read is verified against it
            "weights": dict(WEIGHTS),
        }
        return dataclasses.replace(scored, details=details)


def make_vrty_judge(context: JudgeContext) -> VrtyJudge:
    """Registry factory for ``vrty`` (takes no options)."""
    return VrtyJudge()
