"""Single-response scorers: VRTY, rule-based checks, persona and safety.

A :class:`Scorer` scores one response; :class:`RelativeJudge` turns any scorer
into a paired judge (candidate score relative to the baseline's). Each family
lives in its own module and is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from llm_connect.scoring._base import RelativeJudge, Score, Scorer, relative_quality

__all__ = [
    "CompletenessScorer",
    "CorrectnessScorer",
    "FormatScorer",
    "LengthScorer",
    "PersonaScorer",
    "RelativeJudge",
    "RelevanceScorer",
    "SafetyScorer",
    "SchemaScorer",
    "Score",
    "Scorer",
    "VrtyScorer",
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
