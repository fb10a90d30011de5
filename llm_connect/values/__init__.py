"""Value types shared across layers: what grading produces and routing decides.

The ledger stores these and grading/routing build them, so they live below
all three (``llm_connect.types`` < ``llm_connect.values`` < ``ledger`` <
``grading`` < ``routing``): the ledger never imports grading or routing.

* :class:`GradingResult` — one validated grade (re-exported by :mod:`llm_connect.grading`).
* :class:`NotApplicable` — a (case, judge) pair the judge had no data for.
* :class:`RoutingDecision` and its evidence, and the :class:`RoutingPolicy` a decision is
  made under (re-exported by :mod:`llm_connect.routing`).
* :class:`HumanLabel` and :class:`CaseLabels` — what people said (re-exported by :mod:`llm_connect.labels`).
"""

from __future__ import annotations

from llm_connect.values._decision import (
    STABILITY_VERDICTS,
    CandidateEvidence,
    GraderEvidence,
    IgnoredGrader,
    RoutingDecision,
)
from llm_connect.values._labels import (
    LABEL_FIELDS,
    PREFERENCE_VALUES,
    PREFERENCES,
    CaseLabels,
    HumanLabel,
    human_value,
    score_verdict,
)
from llm_connect.values._outcomes import NotApplicable
from llm_connect.values._policy import PolicyError, RoutingPolicy
from llm_connect.values._result import GradingResult, validate_quality_score

__all__ = [
    "LABEL_FIELDS",
    "PREFERENCES",
    "PREFERENCE_VALUES",
    "STABILITY_VERDICTS",
    "CandidateEvidence",
    "CaseLabels",
    "GraderEvidence",
    "GradingResult",
    "HumanLabel",
    "IgnoredGrader",
    "NotApplicable",
    "PolicyError",
    "RoutingDecision",
    "RoutingPolicy",
    "human_value",
    "score_verdict",
    "validate_quality_score",
]
