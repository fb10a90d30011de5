"""Value types shared across layers: what grading produces and routing decides.

The ledger stores these and grading/routing build them, so they live below
all three (``llm_connect.types`` < ``llm_connect.values`` < ``ledger`` <
``grading`` < ``routing``): the ledger never imports grading or routing.

* :class:`Case` — one suite case as judges and scorers read it (re-exported by :mod:`llm_connect.grading`).
* :class:`GradingResult` — one validated grade (re-exported by :mod:`llm_connect.grading`).
* :class:`NotApplicable` — a (case, judge) pair the judge had no data for.
* :class:`RoutingDecision` and its evidence, and the :class:`RoutingPolicy` a decision is
  made under (re-exported by :mod:`llm_connect.routing`); a candidate's statuses (:data:`PROVEN`,
  :data:`RULED_OUT`, :data:`UNDECIDED`, :data:`INSUFFICIENT`, :data:`NO_GRADES`,
  :data:`NO_HUMAN_LABELS`; :data:`SETTLED` the two more cases cannot change) and the policy's
  defaults (:data:`DEFAULT_MIN_QUALITY`, :data:`DEFAULT_WIN_RATE`); :data:`PREFERENCE_JUDGES` /
  :func:`is_preference_judge`, the judges whose grade is a preference on people's scale.
* :class:`IdentityChange` and :func:`identity_of` — a judge's identity as its grades record it.
* :class:`SliceDecisions` (one decision per slice of a task, ``Router.decide_slices``) and the
  slice keys (:func:`parse_slice_key`, :func:`slice_of`).
* :class:`HumanLabel` and :class:`CaseLabels` — what people said (re-exported by :mod:`llm_connect.labels`).
"""

from __future__ import annotations

from llm_connect.values._case import Case
from llm_connect.values._decision import (
    INSUFFICIENT,
    NO_GRADES,
    NO_HUMAN_LABELS,
    PROVEN,
    RULED_OUT,
    SETTLED,
    STABILITY_VERDICTS,
    UNDECIDED,
    CandidateEvidence,
    GraderEvidence,
    IgnoredGrader,
    RoutingDecision,
    crossed_bounds,
)
from llm_connect.values._identity import (
    FIRST_GRADE,
    SERVED_KEYS,
    IdentityChange,
    describe_change,
    identity_changed,
    identity_of,
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
from llm_connect.values._policy import (
    DEFAULT_MIN_QUALITY,
    DEFAULT_WIN_RATE,
    PREFERENCE_JUDGES,
    PolicyError,
    RoutingPolicy,
    is_preference_judge,
)
from llm_connect.values._result import GradingResult, validate_quality_score
from llm_connect.values._slice_key import (
    LENGTH_SLICES,
    NO_TOOLS,
    NO_VALUE,
    SLICE_KINDS,
    TOOLS,
    SliceError,
    SliceKey,
    length_cuts,
    parse_slice_key,
    slice_of,
)
from llm_connect.values._slices import SliceCandidate, SliceDecision, SliceDecisions
from llm_connect.values._watch import Rollback, RoutedSince

__all__ = [
    "DEFAULT_MIN_QUALITY",
    "DEFAULT_WIN_RATE",
    "FIRST_GRADE",
    "INSUFFICIENT",
    "LABEL_FIELDS",
    "LENGTH_SLICES",
    "NO_GRADES",
    "NO_HUMAN_LABELS",
    "NO_TOOLS",
    "NO_VALUE",
    "PREFERENCES",
    "PREFERENCE_JUDGES",
    "PREFERENCE_VALUES",
    "PROVEN",
    "RULED_OUT",
    "SERVED_KEYS",
    "SETTLED",
    "SLICE_KINDS",
    "STABILITY_VERDICTS",
    "TOOLS",
    "UNDECIDED",
    "CandidateEvidence",
    "Case",
    "CaseLabels",
    "GraderEvidence",
    "GradingResult",
    "HumanLabel",
    "IdentityChange",
    "IgnoredGrader",
    "NotApplicable",
    "PolicyError",
    "Rollback",
    "RoutedSince",
    "RoutingDecision",
    "RoutingPolicy",
    "SliceCandidate",
    "SliceDecision",
    "SliceDecisions",
    "SliceError",
    "SliceKey",
    "crossed_bounds",
    "describe_change",
    "human_value",
    "identity_changed",
    "identity_of",
    "is_preference_judge",
    "length_cuts",
    "parse_slice_key",
    "score_verdict",
    "slice_of",
    "validate_quality_score",
]
