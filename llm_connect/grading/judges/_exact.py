"""ExactMatchJudge: 1.0 when the two response texts (and tool calls) are equal, else 0.0."""

from __future__ import annotations

import re
from typing import Any

from llm_connect.grading._protocols import Case, judge_spec
from llm_connect.grading._results import GradingResult
from llm_connect.grading.judges._registry import JudgeContext
from llm_connect.grading.judges._tools import tool_calls_match
from llm_connect.types import LLMResponse, RunConfig

__all__ = ["ExactMatchJudge", "make_exact_judge"]

_WHITESPACE = re.compile(r"\s+")


def _fold(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip().casefold()


class ExactMatchJudge:
    """Grades 1.0 when the candidate's text equals the baseline's, 0.0 otherwise.

    With ``normalize=True`` both texts are case-folded and every run of
    whitespace becomes one space (leading/trailing whitespace dropped) first.

    When either side called tools, the tool calls must match too: the same
    multiset of (function name, arguments as parsed JSON), order ignored (see
    :func:`~llm_connect.grading.judges._tools.tool_calls_match`; ``normalize``
    does not touch arguments). Two answers that are only different tool calls
    (both texts empty) score 0.0. ``details["tool_calls_match"]`` is then set.
    """

    asks_llm = False
    """A string comparison gives the grade; no LLM is asked."""

    def __init__(self, *, normalize: bool = False) -> None:
        self.normalize = bool(normalize)
        self.grader_id = "exact:normalized" if self.normalize else "exact"

    def __repr__(self) -> str:
        return f"ExactMatchJudge(normalize={self.normalize})"

    def judge(
        self,
        baseline_response: LLMResponse,
        candidate_response: LLMResponse,
        *,
        prompt: str,
        run_config: RunConfig,
        case: Case | None = None,
    ) -> GradingResult:
        """1.0 for matching texts (and matching tool calls, when there are any), 0.0 otherwise."""
        a, b = baseline_response.text, candidate_response.text
        if self.normalize:
            a, b = _fold(a), _fold(b)
        texts_match = a == b
        notes = "texts match" if texts_match else "texts differ"
        matched = texts_match
        tool_details: dict[str, Any] = {}
        if baseline_response.tool_calls or candidate_response.tool_calls:
            calls_match = tool_calls_match(baseline_response.tool_calls, candidate_response.tool_calls)
            matched = texts_match and calls_match
            tool_details = {"texts_match": texts_match, "tool_calls_match": calls_match}
            notes += ", tool calls match" if calls_match else ", tool calls differ"
        details: dict[str, Any] = {  # key order as before tool calls: stored grades compare as JSON
            "match": matched,
            "normalize": self.normalize,
            **tool_details,
            "judge_spec": judge_spec("exact", asks_llm=self.asks_llm, normalize=self.normalize),
        }
        return GradingResult(
            quality_score=1.0 if matched else 0.0,
            notes=notes,
            grader_id=self.grader_id,
            baseline_response=baseline_response,
            candidate_response=candidate_response,
            details=details,
            prompt=prompt,
            run_config=run_config,
            asks_llm=self.asks_llm,
        )

    async def ajudge(
        self,
        baseline_response: LLMResponse,
        candidate_response: LLMResponse,
        *,
        prompt: str,
        run_config: RunConfig,
        case: Case | None = None,
    ) -> GradingResult:
        """Same as :meth:`judge` (cheap enough to run on the event loop)."""
        import asyncio

        await asyncio.sleep(0)
        return self.judge(
            baseline_response, candidate_response, prompt=prompt, run_config=run_config, case=case
        )


def make_exact_judge(context: JudgeContext, *, normalize: bool = False) -> ExactMatchJudge:
    """Registry factory for ``exact`` (``exact:normalize=true`` folds case/whitespace)."""
    return ExactMatchJudge(normalize=normalize)
