"""Single-response scorers: VRTY, rule-based checks, persona and safety.

A :class:`Scorer` scores one response on its own;
:class:`~llm_connect.grading.judges.RelativeJudge` (with every other judge, in
:mod:`llm_connect.grading.judges`) turns any scorer into a paired judge
(candidate score relative to the baseline's, :func:`relative_quality`). Each
family lives in its own module and is imported on first use. Scorers sit below
judges: this package imports nothing from :mod:`llm_connect.grading` (the
``Case`` it reads and ``validate_quality_score`` come from
:mod:`llm_connect.values`), so no scorer module imports its own importer.
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
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
