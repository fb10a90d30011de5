"""Judges: compare a candidate response with a baseline response.

Built-in judges: :class:`ExactMatchJudge` (``exact``),
:class:`EmbeddingSimilarityJudge` (``embedding``), :class:`LLMJudge` (``llm``);
rule-based, VRTY, persona and safety judges come from :mod:`llm_connect.scoring`.
Heavy dependencies load only when a judge that needs them is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_connect.grading.judges._exact import ExactMatchJudge
from llm_connect.grading.judges._registry import (
    ENTRY_POINT_GROUP,
    JudgeContext,
    build_judge,
    format_judge_spec,
    judge_names,
    parse_judge_spec,
    register_judge,
)

if TYPE_CHECKING:
    from llm_connect.grading.judges._embedding import EmbeddingSimilarityJudge
    from llm_connect.grading.judges._llm import LLMJudge

__all__ = [
    "ENTRY_POINT_GROUP",
    "EmbeddingSimilarityJudge",
    "ExactMatchJudge",
    "JudgeContext",
    "LLMJudge",
    "build_judge",
    "format_judge_spec",
    "judge_names",
    "parse_judge_spec",
    "register_judge",
]

_LAZY = {
    "EmbeddingSimilarityJudge": "llm_connect.grading.judges._embedding",
    "LLMJudge": "llm_connect.grading.judges._llm",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
