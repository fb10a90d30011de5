"""Registry factories of the rule-based judges: format, schema, correctness, length,
relevance, completeness.

Each wraps its single-response scorer from :mod:`llm_connect.scoring.rules` in a
:class:`~llm_connect.grading.judges.RelativeJudge` (candidate relative to baseline).
Invalid options raise :class:`~llm_connect.errors.ConfigurationError` here, when
the judge is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_connect.grading.judges._options import check_no_unknown
from llm_connect.grading.judges._registry import JudgeContext
from llm_connect.grading.judges._relative import RelativeJudge
from llm_connect.scoring.rules import (
    CompletenessScorer,
    CorrectnessScorer,
    FormatScorer,
    LengthScorer,
    RelevanceScorer,
    SchemaScorer,
)

__all__ = [
    "make_completeness_judge",
    "make_correctness_judge",
    "make_format_judge",
    "make_length_judge",
    "make_relevance_judge",
    "make_schema_judge",
]


def make_format_judge(context: JudgeContext, fmt: str = "json", **unknown: Any) -> RelativeJudge:
    """Registry factory for ``format`` (``format:json``, ``format:fmt=yaml``)."""
    check_no_unknown("format", unknown, ["fmt"])
    return RelativeJudge(FormatScorer(fmt))


def make_schema_judge(
    context: JudgeContext,
    schema: Mapping[str, Any] | str | None = None,
    *,
    draft: str | None = None,
    check_formats: bool = False,
    **unknown: Any,
) -> RelativeJudge:
    """Registry factory for ``schema`` (``schema:path/to/schema.json``, ``schema:draft=7``).

    Without a ``schema`` option each case must carry ``expected.schema``.
    """
    check_no_unknown("schema", unknown, ["check_formats", "draft", "schema"])
    return RelativeJudge(SchemaScorer(schema, draft=draft, check_formats=check_formats, context=context))


def make_correctness_judge(
    context: JudgeContext,
    answer: str | None = None,
    *,
    keywords: list[str] | str | None = None,
    normalize: bool = True,
    match: str = "exact",
    mode: str | None = None,
    **unknown: Any,
) -> RelativeJudge:
    """Registry factory for ``correctness`` (``correctness:Paris``, ``correctness:keywords=[...]``)."""
    check_no_unknown("correctness", unknown, ["answer", "keywords", "match", "mode", "normalize"])
    return RelativeJudge(
        CorrectnessScorer(answer=answer, keywords=keywords, normalize=normalize, match=match, mode=mode)
    )


def make_length_judge(
    context: JudgeContext,
    *,
    min_chars: int | None = None,
    max_chars: int | None = None,
    min_words: int | None = None,
    max_words: int | None = None,
    **unknown: Any,
) -> RelativeJudge:
    """Registry factory for ``length`` (``length:min_words=5,max_words=200``)."""
    check_no_unknown("length", unknown, ["max_chars", "max_words", "min_chars", "min_words"])
    return RelativeJudge(
        LengthScorer(min_chars=min_chars, max_chars=max_chars, min_words=min_words, max_words=max_words)
    )


def make_relevance_judge(context: JudgeContext, **unknown: Any) -> RelativeJudge:
    """Registry factory for ``relevance`` (takes no options)."""
    check_no_unknown("relevance", unknown, [])
    return RelativeJudge(RelevanceScorer())


def make_completeness_judge(
    context: JudgeContext,
    *,
    sections: list[str] | str | None = None,
    headings_only: bool = False,
    **unknown: Any,
) -> RelativeJudge:
    """Registry factory for ``completeness`` (``completeness:sections=["Intro","Results"]``)."""
    check_no_unknown("completeness", unknown, ["headings_only", "sections"])
    return RelativeJudge(CompletenessScorer(sections=sections, headings_only=headings_only))
