"""Grading: compare a candidate model's response with a baseline's.

:class:`PairedGrader` calls both adapters with the same prompt and run config
and hands both responses to a :class:`Judge`; every judge returns a validated
:class:`GradingResult`. :class:`BatchGrader` grades a suite (:func:`grade_suite`); in a shared
run each worker (:func:`new_worker_id`) pulls its cases from a :class:`FleetSource`.
:func:`recorded_summary` says which run settings recorded with production traffic applied, and
:func:`capped_answers` finds candidate answers a token cap cut where the baseline's was not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_connect.grading._paired import PairedGrader, judge_async
from llm_connect.grading._protocols import BaselineGrader, BatchJudge, Case, Judge, JudgePair
from llm_connect.grading._results import GradingResult, validate_quality_score
from llm_connect.grading.judges import (
    ExactMatchJudge,
    JudgeContext,
    build_judge,
    judge_names,
    parse_judge_spec,
    register_judge,
)

if TYPE_CHECKING:
    from llm_connect.grading._batch import (
        BatchGrader,
        BatchReport,
        BatchResult,
        CaseFailure,
        NotApplicable,
        grade_suite,
        side_from_spec,
    )
    from llm_connect.grading._fleet import FleetSource, new_worker_id
    from llm_connect.grading._recorded import capped_answers, recorded_summary
    from llm_connect.grading._retry import CallLimit, RateLimiter, ResilientAdapter, RetryPolicy
    from llm_connect.grading._shared_limit import SharedRateLimiter
    from llm_connect.grading._suite import Suite, load_suite, suite_of
    from llm_connect.grading.judges import EmbeddingSimilarityJudge, LLMJudge, PairwiseJudge

__all__ = [
    "BaselineGrader",
    "BatchGrader",
    "BatchJudge",
    "BatchReport",
    "BatchResult",
    "CallLimit",
    "Case",
    "CaseFailure",
    "EmbeddingSimilarityJudge",
    "ExactMatchJudge",
    "FleetSource",
    "GradingResult",
    "Judge",
    "JudgeContext",
    "JudgePair",
    "LLMJudge",
    "NotApplicable",
    "PairedGrader",
    "PairwiseJudge",
    "RateLimiter",
    "ResilientAdapter",
    "RetryPolicy",
    "SharedRateLimiter",
    "Suite",
    "build_judge",
    "capped_answers",
    "grade_suite",
    "judge_async",
    "judge_names",
    "load_suite",
    "new_worker_id",
    "parse_judge_spec",
    "recorded_summary",
    "register_judge",
    "side_from_spec",
    "suite_of",
    "validate_quality_score",
]


# The batch engine, shared runs, recorded settings, retries and suite loading load on first use
# (``import llm_connect`` stays cheap).
_LAZY = {
    **dict.fromkeys(
        (
            "BatchGrader",
            "BatchReport",
            "BatchResult",
            "CaseFailure",
            "NotApplicable",
            "grade_suite",
            "side_from_spec",
        ),
        "llm_connect.grading._batch",
    ),
    **dict.fromkeys(("FleetSource", "new_worker_id"), "llm_connect.grading._fleet"),
    **dict.fromkeys(("capped_answers", "recorded_summary"), "llm_connect.grading._recorded"),
    **dict.fromkeys(
        ("CallLimit", "RateLimiter", "ResilientAdapter", "RetryPolicy"), "llm_connect.grading._retry"
    ),
    **dict.fromkeys(("Suite", "load_suite", "suite_of"), "llm_connect.grading._suite"),
    "SharedRateLimiter": "llm_connect.grading._shared_limit",
}


def __getattr__(name: str) -> Any:
    if name in ("EmbeddingSimilarityJudge", "LLMJudge", "PairwiseJudge"):
        from llm_connect.grading import judges

        return getattr(judges, name)
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
