"""Rule-based scorers: format, JSON Schema, correctness, length, relevance, completeness.

Each scorer scores one response on its own (``score(text, *, prompt, case)``);
each ``make_*_judge`` factory wraps one in a :class:`~llm_connect.scoring.RelativeJudge`
for the judge registry (``--judge format:json``, ``--judge schema:schema.json``...).
Invalid options raise :class:`~llm_connect.errors.ConfigurationError` when the
judge is built; a case lacking the data a scorer needs raises
:class:`~llm_connect.errors.CaseDataError` when that case is judged.
"""

from __future__ import annotations

from llm_connect.scoring.rules._format import FORMATS, FormatScorer, make_format_judge
from llm_connect.scoring.rules._schema import DRAFTS, SchemaScorer, make_schema_judge
from llm_connect.scoring.rules._text import (
    STOP_WORDS,
    CompletenessScorer,
    CorrectnessScorer,
    LengthScorer,
    RelevanceScorer,
    content_words,
    make_completeness_judge,
    make_correctness_judge,
    make_length_judge,
    make_relevance_judge,
)

__all__ = [
    "DRAFTS",
    "FORMATS",
    "STOP_WORDS",
    "CompletenessScorer",
    "CorrectnessScorer",
    "FormatScorer",
    "LengthScorer",
    "RelevanceScorer",
    "SchemaScorer",
    "content_words",
    "make_completeness_judge",
    "make_correctness_judge",
    "make_format_judge",
    "make_length_judge",
    "make_relevance_judge",
    "make_schema_judge",
]
