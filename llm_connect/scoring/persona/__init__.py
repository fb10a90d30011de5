"""Persona scorer: how closely a response matches a brand voice (Alignmenter's authenticity).

A persona file (YAML) gives example responses, declared traits and a lexicon::

    name: analyst
    examples:
      - "Our baseline analysis shows a clear signal in the Q3 numbers."
    traits: {formality: formal, tone: technical, verbosity: concise}
    lexicon: {preferred: [baseline, signal], avoided: [lol, hype]}

``--judge persona:voices/analyst.yaml`` grades the candidate's authenticity
relative to the baseline's (:class:`~llm_connect.grading.judges.PersonaJudge`).

Over a multi-turn session (suite cases sharing a ``session``), :func:`session_stability`
measures how steadily one side answered, and :func:`session_summary` combines authenticity,
safety and stability into Alignmenter's overall score, its bootstrap interval and a letter
grade (:mod:`llm_connect.scoring.persona._session`).
"""

from __future__ import annotations

from llm_connect.scoring.persona._file import TRAIT_VALUES, Persona, load_persona
from llm_connect.scoring.persona._scorer import (
    LEXICON_WEIGHT,
    STYLE_WEIGHT,
    TRAIT_WEIGHT,
    PersonaScorer,
)
from llm_connect.scoring.persona._session import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    GRADE_BANDS,
    SESSION_AUTHENTICITY_WEIGHT,
    SESSION_SAFETY_WEIGHT,
    SESSION_STABILITY_WEIGHT,
    STABILITY_MAX_STD,
    SessionScore,
    SessionStability,
    SessionSummary,
    bootstrap_mean_interval,
    letter_grade,
    overall_score,
    session_stabilities,
    session_stability,
    session_summary,
)
from llm_connect.scoring.persona._traits import detect_traits

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "GRADE_BANDS",
    "LEXICON_WEIGHT",
    "SESSION_AUTHENTICITY_WEIGHT",
    "SESSION_SAFETY_WEIGHT",
    "SESSION_STABILITY_WEIGHT",
    "STABILITY_MAX_STD",
    "STYLE_WEIGHT",
    "TRAIT_VALUES",
    "TRAIT_WEIGHT",
    "Persona",
    "PersonaScorer",
    "SessionScore",
    "SessionStability",
    "SessionSummary",
    "bootstrap_mean_interval",
    "detect_traits",
    "letter_grade",
    "load_persona",
    "overall_score",
    "session_stabilities",
    "session_stability",
    "session_summary",
]
