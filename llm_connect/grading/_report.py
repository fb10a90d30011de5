"""What a batch run reports: its grades, its failures and its counters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_connect.errors import CaseDataError, whole_message
from llm_connect.grading._protocols import Case
from llm_connect.values import GradingResult, NotApplicable

__all__ = [
    "BatchReport",
    "BatchResult",
    "CaseFailure",
    "NotApplicable",
    "case_failure",
    "lacks_case_data",
    "not_applicable",
]


@dataclass(frozen=True)
class CaseFailure:
    """A case (or one side or judge of it) that could not be graded."""

    case_id: str
    task: str
    stage: str
    """``baseline``, ``candidate`` or ``judge``."""
    error_type: str
    """The exception class name (``ServerError``, ``RateLimitError``...)."""
    message: str
    adapter_id: str | None = None
    """The side or judge that failed (adapter id, or the judge's grader id)."""
    line: int | None = None
    """The case's line in the suite file."""


@dataclass(frozen=True)
class BatchResult:
    """One grade produced by a run, with the case and side it belongs to."""

    case_id: str
    task: str
    candidate: str
    """The candidate side's spec."""
    result: GradingResult


@dataclass
class BatchReport:
    """What a batch run did. ``results`` holds only the grades made in this process."""

    run_id: str | None
    suite: str
    cases_total: int
    cases_done: int = 0
    """Cases finished (graded or failed in this process, or skipped as complete by a resume);
    a case skipped as settled (:attr:`cases_settled_skipped`) is not done. Unless the run was
    interrupted, ``cases_done + cases_settled_skipped == cases_total``."""
    cases_skipped: int = 0
    """Cases skipped because a resumed run already held all their grades."""
    results: list[BatchResult] = field(default_factory=list)
    failures: list[CaseFailure] = field(default_factory=list)
    not_applicable: list[NotApplicable] = field(default_factory=list)
    """(case, judge, candidate) triples a judge had no case data for, in suite order
    (see :class:`NotApplicable`)."""
    model_calls: int = 0
    """Responses requested from live adapters (cache misses; retries not counted)."""
    cache_hits: int = 0
    journal_replayed: int = 0
    """Cases an earlier process kept in the run's journal (the ledger had failed), recorded first."""
    elapsed_s: float = 0.0
    interrupted: bool = False
    """The run was stopped (Ctrl-C) before every case finished."""
    observed_models: dict[str, set[str]] = field(default_factory=dict)
    """Per side spec, every model name its server reported (``gpt-4o-mini-2024-07-18``)."""
    asked_models: dict[str, str] = field(default_factory=dict)
    """Per side spec, the model it asked for (what its grades are stored under)."""
    stopped: dict[str, dict[str, int]] = field(default_factory=dict)
    """Stopping early (``settled``): candidate spec (as in :attr:`BatchResult.candidate`) ->
    task -> that candidate's cases not graded because it was settled for the task (cases it
    still lacked a grade of; empty without ``settled``)."""
    calls_saved: int = 0
    """Stopping early: model calls not made because of settling: one per skipped candidate
    response, plus the baseline's when a whole case was skipped, each counted only when it
    would have been a model call (a live side whose response is not in the response cache;
    recorded and cached responses cost nothing). Judge calls are not counted."""
    cases_settled_skipped: int = 0
    """Stopping early: cases not started at all because every candidate still to grade on
    them was settled for their task (neither done nor failed)."""

    def served_as(self) -> dict[str, list[str]]:
        """Sides whose server reported a model name other than the one asked for:
        ``{spec: sorted reported names}``."""
        return {
            spec: sorted(names)
            for spec, names in self.observed_models.items()
            if names != {self.asked_models.get(spec)}
        }

    def not_applicable_by_judge(self) -> dict[str, dict[str, Any]]:
        """Per grader id: how many cases the judge did not apply to, and why.

        ``{grader_id: {"cases": N, "field": "expected.schema", "reason": FIRST
        MESSAGE, "first_case": CASE_ID}}``, judges in order of first appearance.
        """
        out: dict[str, dict[str, Any]] = {}
        seen: dict[str, set[str]] = {}
        for na in self.not_applicable:
            cases = seen.setdefault(na.grader_id, set())
            if na.grader_id not in out:
                out[na.grader_id] = {
                    "cases": 0,
                    "field": na.field,
                    "reason": na.reason,
                    "first_case": na.case_id,
                }
            if na.case_id not in cases:
                cases.add(na.case_id)
                out[na.grader_id]["cases"] += 1
        return out


def case_failure(case: Case, stage: str, exc: Exception, adapter_id: str | None) -> CaseFailure:
    """A :class:`CaseFailure` for ``exc`` raised at ``stage`` of ``case``.

    The message is the error's whole text (every line: a server's validation
    error explains itself on the lines after the first), credentials masked,
    bounded at :data:`~llm_connect.errors.MAX_ERROR_MESSAGE_CHARS` with a marker
    when cut (:func:`~llm_connect.errors.whole_message`).
    """
    message = whole_message(str(exc)) or type(exc).__name__
    return CaseFailure(
        case_id=case.id,
        task=case.task,
        stage=stage,
        error_type=type(exc).__name__,
        message=message,
        adapter_id=adapter_id,
        line=case.line,
    )


def lacks_case_data(case: Case, exc: CaseDataError) -> bool:
    """Whether ``exc`` says ``case`` has no data for the judge (not applicable), rather
    than bad data (a failure).

    The field named by the error (``expected.schema``) is absent, ``None`` or
    empty in the case: not applicable. A field that is there but unusable (a
    schema file that does not exist, keywords that are not strings) is a real
    error in the suite and stays a failure.
    """
    name = exc.field or ""
    expected = case.expected
    if expected is None:
        return True
    if name == "expected":
        return False
    if not name.startswith("expected."):
        return True
    key = name[len("expected.") :]
    if not isinstance(expected, Mapping):
        return key != "answer"  # a string or number ``expected`` is the answer
    value = expected.get(key)
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, (list, tuple, dict)) and not value


def not_applicable(
    case: Case, grader_id: str, candidate: str, exc: CaseDataError, candidate_model: str | None = None
) -> NotApplicable:
    """The :class:`NotApplicable` record of ``exc`` for ``case``."""
    reason = whole_message(getattr(exc, "message", None) or str(exc))
    return NotApplicable(
        case_id=case.id,
        task=case.task,
        grader_id=grader_id,
        candidate=candidate,
        field=exc.field,
        reason=reason or type(exc).__name__,
        line=case.line,
        candidate_model=candidate_model,
    )
