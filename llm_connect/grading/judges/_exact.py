"""ExactMatchJudge: 1.0 when the two response texts (and tool calls) are equal, else 0.0."""

from __future__ import annotations

import re
from typing import Any

from llm_connect.grading._protocols import JudgePair, judge_spec
from llm_connect.grading.judges._base import BaseJudge, Scored
from llm_connect.grading.judges._registry import JudgeContext
from llm_connect.grading.judges._tools import tool_calls_match

__all__ = ["ExactMatchJudge", "make_exact_judge"]

_WHITESPACE = re.compile(r"\s+")


def _fold(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip().casefold()


class ExactMatchJudge(BaseJudge):
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

    def score(self, pair: JudgePair) -> Scored:
        """1.0 for matching texts (and matching tool calls, when there are any), 0.0 otherwise."""
        baseline, candidate = pair.baseline_response, pair.candidate_response
        a, b = baseline.text, candidate.text
        if self.normalize:
            a, b = _fold(a), _fold(b)
        texts_match = a == b
        notes = "texts match" if texts_match else "texts differ"
        matched = texts_match
        tool_details: dict[str, Any] = {}
        if baseline.tool_calls or candidate.tool_calls:
            calls_match = tool_calls_match(baseline.tool_calls, candidate.tool_calls)
            matched = texts_match and calls_match
            tool_details = {"texts_match": texts_match, "tool_calls_match": calls_match}
            notes += ", tool calls match" if calls_match else ", tool calls differ"
        details: dict[str, Any] = {  # key order as before tool calls: stored grades compare as JSON
            "match": matched,
            "normalize": self.normalize,
            **tool_details,
            "judge_spec": judge_spec("exact", asks_llm=self.asks_llm, normalize=self.normalize),
        }
        return Scored(1.0 if matched else 0.0, notes, details)


def make_exact_judge(context: JudgeContext, *, normalize: bool = False) -> ExactMatchJudge:
    """Registry factory for ``exact`` (``exact:normalize=true`` folds case/whitespace)."""
    return ExactMatchJudge(normalize=normalize)
