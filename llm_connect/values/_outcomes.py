"""Outcomes of grading that are not grades (a judge that does not apply to a case)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NotApplicable"]


@dataclass(frozen=True)
class NotApplicable:
    """A (case, judge) pair the judge had no data for: neither a grade nor a failure.

    A rule judge raising :class:`~llm_connect.errors.CaseDataError` for a case
    whose ``expected`` lacks the field it needs (``--judge schema`` on a case
    without ``expected.schema``) does not apply to that case.
    """

    case_id: str
    task: str
    grader_id: str
    candidate: str
    """The candidate side's spec."""
    field: str | None
    """The case field the judge needed (``expected.schema``)."""
    reason: str
    """The judge's message (``no JSON schema: give the judge option 'schema' ...``)."""
    line: int | None = None
    """The case's line in the suite file."""
    candidate_model: str | None = None
    """The candidate model as it was asked for (``LLMResponse.asked_model``); the ledger keys the
    outcome by it."""
