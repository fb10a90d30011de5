"""Value types shared across layers: what grading produces and routing decides.

The ledger stores these and grading/routing build them, so they live below
all three (``llm_connect.types`` < ``llm_connect.values`` < ``ledger`` <
``grading`` < ``routing``): the ledger never imports grading or routing.

* :class:`GradingResult` — one validated grade (re-exported by :mod:`llm_connect.grading`).
* :class:`NotApplicable` — a (case, judge) pair the judge had no data for.
* :class:`RoutingDecision` and its evidence (re-exported by :mod:`llm_connect.routing`).
"""

from __future__ import annotations

from llm_connect.values._decision import (
    STABILITY_VERDICTS,
    CandidateEvidence,
    GraderEvidence,
    IgnoredGrader,
    RoutingDecision,
)
from llm_connect.values._outcomes import NotApplicable
from llm_connect.values._result import GradingResult, validate_quality_score

__all__ = [
    "STABILITY_VERDICTS",
    "CandidateEvidence",
    "GraderEvidence",
    "GradingResult",
    "IgnoredGrader",
    "NotApplicable",
    "RoutingDecision",
    "validate_quality_score",
]
