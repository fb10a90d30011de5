"""Rule-based scorers: format, JSON Schema, correctness, length, relevance, completeness.

Each scorer scores one response on its own (``score(text, *, prompt, case)``);
the judges built on them (``--judge format:json``, ``--judge schema:schema.json``...)
are in :mod:`llm_connect.grading.judges` (their ``make_*_judge`` factories in
``llm_connect.grading.judges._rules``). Invalid options raise
:class:`~llm_connect.errors.ConfigurationError` when the scorer is built; a case
lacking the data a scorer needs raises :class:`~llm_connect.errors.CaseDataError`
when that case is scored.
"""

from __future__ import annotations

from typing import Any

from llm_connect._renamed import renamed_attribute
from llm_connect.scoring.rules._format import ANSWER_FORMATS, FormatScorer
from llm_connect.scoring.rules._schema import DRAFTS, SchemaScorer
from llm_connect.scoring.rules._text import (
    STOP_WORDS,
    CompletenessScorer,
    CorrectnessScorer,
    LengthScorer,
    RelevanceScorer,
    content_words,
)

__all__ = [
    "ANSWER_FORMATS",
    "DRAFTS",
    "STOP_WORDS",
    "CompletenessScorer",
    "CorrectnessScorer",
    "FormatScorer",
    "LengthScorer",
    "RelevanceScorer",
    "SchemaScorer",
    "content_words",
]


_RENAMED = {"FORMATS": "ANSWER_FORMATS"}
"""Old names kept for one release (``contracts/scorers.md`` named it): ``FORMATS`` clashed with
:mod:`llm_connect.traffic`'s ``FORMATS``, which are traffic file formats."""


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)
