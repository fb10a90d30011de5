"""Judges: compare a candidate response with a baseline response. Every judge lives here.

Every judge is a :class:`BaseJudge`: it writes its scoring logic only (``score`` and/or
``ascore``, returning a :class:`Scored`), and the base gives it ``judge``, ``ajudge`` and
the validated :class:`~llm_connect.grading.GradingResult`.

Built-in judges: :class:`ExactMatchJudge` (``exact``), :class:`ToolCallJudge`
(``tools``), :class:`EmbeddingSimilarityJudge` (``embedding``), :class:`LLMJudge`
(``llm``), :class:`PairwiseJudge` (``pairwise``), :class:`VrtyJudge` (``vrty``),
:class:`PersonaJudge` (``persona``), and the
rule-based and safety judges (``format``, ``schema``, ``correctness``,
``length``, ``relevance``, ``completeness``, ``safety``), each a
:class:`RelativeJudge` over a single-response scorer from
:mod:`llm_connect.scoring`. Heavy dependencies load only when a judge that
needs them is built.

:data:`BUILTIN_JUDGES` names the built-in judges without importing any; :func:`judge_asks_llm`
says whether a judge asks an LLM, and :func:`is_llm_grader_id` guesses it from a stored grader id
(grades stored before judges declared it).

:func:`response_formats_used` says which structured-output format (``json_schema``,
``json_object_schema``, ``json_object`` or ``text``) each judge that asks an LLM used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_connect._structured import response_formats_used
from llm_connect.grading.judges._base import BaseJudge, Scored
from llm_connect.grading.judges._exact import ExactMatchJudge
from llm_connect.grading.judges._registry import (
    BUILTIN_JUDGES,
    ENTRY_POINT_GROUP,
    JudgeContext,
    build_judge,
    format_judge_spec,
    is_llm_grader_id,
    judge_asks_llm,
    judge_names,
    parse_judge_spec,
    register_judge,
)
from llm_connect.grading.judges._tools import ToolCallJudge

if TYPE_CHECKING:
    from llm_connect.grading.judges._embedding import EmbeddingSimilarityJudge
    from llm_connect.grading.judges._llm import LLMJudge
    from llm_connect.grading.judges._pairwise import PairwiseJudge
    from llm_connect.grading.judges._persona import PersonaJudge
    from llm_connect.grading.judges._relative import RelativeJudge
    from llm_connect.grading.judges._vrty import VrtyJudge

__all__ = [
    "BUILTIN_JUDGES",
    "ENTRY_POINT_GROUP",
    "BaseJudge",
    "EmbeddingSimilarityJudge",
    "ExactMatchJudge",
    "JudgeContext",
    "LLMJudge",
    "PairwiseJudge",
    "PersonaJudge",
    "RelativeJudge",
    "Scored",
    "ToolCallJudge",
    "VrtyJudge",
    "build_judge",
    "format_judge_spec",
    "is_llm_grader_id",
    "judge_asks_llm",
    "judge_names",
    "parse_judge_spec",
    "register_judge",
    "response_formats_used",
]

_LAZY = {
    "EmbeddingSimilarityJudge": "llm_connect.grading.judges._embedding",
    "LLMJudge": "llm_connect.grading.judges._llm",
    "PairwiseJudge": "llm_connect.grading.judges._pairwise",
    "PersonaJudge": "llm_connect.grading.judges._persona",
    "RelativeJudge": "llm_connect.grading.judges._relative",
    "VrtyJudge": "llm_connect.grading.judges._vrty",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
