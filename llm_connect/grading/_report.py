"""What a batch run reports: its grades, its failures and its counters."""

from __future__ import annotations

from dataclasses import dataclass, field

from llm_connect.grading._protocols import Case
from llm_connect.grading._results import GradingResult

__all__ = ["BatchReport", "BatchResult", "CaseFailure", "case_failure"]


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
    """Cases finished in this process (graded, skipped as complete, or failed)."""
    cases_skipped: int = 0
    """Cases skipped because a resumed run already held all their grades."""
    results: list[BatchResult] = field(default_factory=list)
    failures: list[CaseFailure] = field(default_factory=list)
    model_calls: int = 0
    """Responses requested from live adapters (cache misses; retries not counted)."""
    cache_hits: int = 0
    elapsed_s: float = 0.0
    interrupted: bool = False
    """The run was stopped (Ctrl-C) before every case finished."""
    observed_models: dict[str, set[str]] = field(default_factory=dict)
    """Side spec -> model names its responses carried."""


def case_failure(case: Case, stage: str, exc: Exception, adapter_id: str | None) -> CaseFailure:
    """A :class:`CaseFailure` for ``exc`` raised at ``stage`` of ``case`` (first line, 500 chars)."""
    message = str(exc).strip() or type(exc).__name__
    return CaseFailure(
        case_id=case.id,
        task=case.task,
        stage=stage,
        error_type=type(exc).__name__,
        message=message.splitlines()[0][:500],
        adapter_id=adapter_id,
        line=case.line,
    )
