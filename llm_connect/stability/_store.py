"""Storing a stability analysis in the ledger, where routing reads it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from llm_connect.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_connect.stability._report import StabilityReport

__all__ = ["StabilityStore", "record_report"]


class StabilityStore(Protocol):
    """Where an analysis is stored: :class:`~llm_connect.ledger.QualityLedger` is one.

    A protocol, so this layer imports nothing from the ledger (the layers test).
    """

    def record_stability(
        self,
        *,
        task: str,
        model: str,
        adapter_id: str,
        prompt_sha256: str,
        runs: int,
        successful_runs: int,
        overall_score: float,
        verdict: str,
        report: Mapping[str, Any],
        responses: Sequence[Mapping[str, Any]] = (),
        endpoint: str | None = None,
    ) -> int:
        """Store one analysis; return its id."""
        ...


def record_report(
    ledger: StabilityStore,
    report: StabilityReport,
    *,
    task: str,
    model: str | None = None,
    endpoint: str | None = None,
) -> int:
    """Store ``report`` (its verdict, score, full JSON and every run's answer) under ``task``.

    ``model`` is the model as asked for (default: the part of ``report.adapter_id``
    after ``provider:``), the name ``Router.decide(..., min_stability=...)`` looks
    the analysis up by, as grades are keyed. Returns the stored analysis's id.

    Raises:
        ConfigurationError: an empty task.
        LedgerError: the ledger refused the write (nothing is stored).
    """
    if not isinstance(task, str) or not task.strip():
        raise ConfigurationError(f"task must be a non-empty string, not {task!r}")
    asked = model or report.adapter_id.split(":", 1)[-1]
    responses: list[dict[str, Any]] = []
    for run in report.runs:
        response = run.response
        responses.append(
            {
                "run_index": run.index,
                "text": None if response is None else response.text,
                "tool_calls": None
                if response is None or not response.tool_calls
                else [c.to_dict() for c in response.tool_calls],
                "latency_ms": None if response is None else response.latency_ms,
                "served_model": None if response is None else response.model,
                "error": run.error,
            }
        )
    return ledger.record_stability(
        task=task,
        model=asked,
        adapter_id=report.adapter_id,
        endpoint=endpoint,
        prompt_sha256=report.query_digest,
        runs=len(report.runs),
        successful_runs=sum(1 for r in report.runs if r.ok),
        overall_score=min(1.0, max(0.0, float(report.score))),
        verdict=report.verdict,
        report=report.to_dict(),
        responses=responses,
    )
