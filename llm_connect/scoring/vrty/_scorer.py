"""VrtyScorer: one response's VRTY composite (the ``vrty`` judge is in :mod:`llm_connect.grading.judges`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from llm_connect.scoring._base import Score
from llm_connect.scoring.vrty._idf import idf_table
from llm_connect.scoring.vrty._score import VrtyResult, analyse_prompt, score_response

if TYPE_CHECKING:
    from llm_connect.values import Case

__all__ = ["GRADER_ID", "VRTY_VERSION", "VrtyScorer", "analyse"]

VRTY_VERSION: Final[str] = "1.0.1"
"""The VRTY release whose scores this implementation reproduces."""

GRADER_ID: Final[str] = f"vrty:{VRTY_VERSION}"
"""Grader id of the ``vrty`` judge in the ledger."""


def analyse(prompt: str, response: str) -> VrtyResult:
    """The four VRTY 1.0.1 dimensions and the composite of ``response`` to ``prompt``.

    Equals ``vrty.score(prompt, response)`` field for field. The first call
    reads and verifies the shipped IDF table
    (:class:`~llm_connect.errors.ScorerDataError` if it was modified).
    """
    table = idf_table()
    return score_response(analyse_prompt(prompt, table), response, table)


class VrtyScorer:
    """Scores a response with VRTY 1.0.1 (deterministic, no model, no network).

    ``score()`` returns the composite as :attr:`Score.value` with the four
    dimensions, the token and sentence counts, ``vrty_version`` and
    ``idf_sha256`` in :attr:`Score.details`; :meth:`analyse` returns them as a
    :class:`VrtyResult`. The IDF table is read on first use, not when the
    scorer is built.
    """

    name: str = GRADER_ID

    def __init__(self) -> None:
        self.spec: Mapping[str, Any] = {"name": "vrty", "args": {}}

    def __repr__(self) -> str:
        return "VrtyScorer()"

    @property
    def idf_sha256(self) -> str:
        """SHA-256 of the IDF table in use (reads and verifies it on first use)."""
        return idf_table().sha256

    def analyse(self, prompt: str, response: str) -> VrtyResult:
        """All four dimensions and the composite of ``response`` to ``prompt``."""
        return analyse(prompt, response)

    def _score(self, result: VrtyResult, sha256: str) -> Score:
        details = result.to_dict()
        details["vrty_version"] = VRTY_VERSION
        details["idf_sha256"] = sha256
        return Score(result.composite, details)

    def score(self, text: str, *, prompt: str, case: Case | None = None) -> Score:
        """The VRTY composite of ``text`` as an answer to ``prompt``."""
        table = idf_table()
        return self._score(score_response(analyse_prompt(prompt, table), text, table), table.sha256)

    def score_pair(
        self, baseline_text: str, candidate_text: str, *, prompt: str, case: Case | None = None
    ) -> tuple[Score, Score]:
        """Both responses' scores; the prompt is analysed once for the pair."""
        table = idf_table()
        terms = analyse_prompt(prompt, table)
        return (
            self._score(score_response(terms, baseline_text, table), table.sha256),
            self._score(score_response(terms, candidate_text, table), table.sha256),
        )
