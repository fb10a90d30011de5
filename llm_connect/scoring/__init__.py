"""Single-response scorers: VRTY, rule-based checks, persona and safety.

A :class:`Scorer` scores one response on its own;
:class:`~llm_connect.grading.judges.RelativeJudge` (with every other judge, in
:mod:`llm_connect.grading.judges`) turns any scorer into a paired judge
(candidate score relative to the baseline's, :func:`relative_quality`). Each
family lives in its own module and is imported on first use. This package
imports nothing from :mod:`llm_connect.grading` but the ``Case`` protocol
module and the ``GradingResult`` value module; ``RelativeJudge`` is still
reachable here for old imports.
"""

from __future__ import annotations

import importlib
from typing import Any

from llm_connect.scoring._base import PathResolver, Score, Scorer, WorkingDirectory, relative_quality

__all__ = [
    "CompletenessScorer",
    "CorrectnessScorer",
    "FormatScorer",
    "LengthScorer",
    "PathResolver",
    "PersonaScorer",
    "RelevanceScorer",
    "SafetyScorer",
    "SchemaScorer",
    "Score",
    "Scorer",
    "VrtyScorer",
    "WorkingDirectory",
    "relative_quality",
]

_LAZY = {
    "VrtyScorer": "llm_connect.scoring.vrty",
    "FormatScorer": "llm_connect.scoring.rules",
    "SchemaScorer": "llm_connect.scoring.rules",
    "CorrectnessScorer": "llm_connect.scoring.rules",
    "LengthScorer": "llm_connect.scoring.rules",
    "RelevanceScorer": "llm_connect.scoring.rules",
    "CompletenessScorer": "llm_connect.scoring.rules",
    "PersonaScorer": "llm_connect.scoring.persona",
    "SafetyScorer": "llm_connect.scoring.safety",
}


def __getattr__(name: str) -> Any:
    if name == "RelativeJudge":  # moved to llm_connect.grading.judges; kept for old imports
        from llm_connect.grading.judges._relative import RelativeJudge

        return RelativeJudge
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
