"""What the report says in words: the decision in one sentence, the quality gate, the run's failures.

The long reason of a decision (:attr:`RoutingDecision.reason`) stays on the
page behind a ``<details>`` disclosure; :func:`decision_sentence` (from ``routing``,
which the CLI prints too) is the one plain sentence shown above it. :func:`check_gate`
accepts the quality gate a caller computed (the report never computes or softens it: the banner shows
exactly the outcome it is given). :func:`failures` reads the cases of the
selection that could not be graded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError
from llm_connect.routing import GATE_FAILED, GATE_NOT_SETTLED, GATE_PASSED, decision_sentence, more_cases

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = ["GATE_OUTCOMES", "MAX_FAILURES", "check_gate", "decision_sentence", "failures", "more_cases"]

GATE_OUTCOMES = (GATE_PASSED, GATE_FAILED, GATE_NOT_SETTLED)
"""The quality gate's outcomes: every candidate proven on every routing judge / one ruled out / otherwise."""

MAX_FAILURES = 500
"""At most this many failures are listed (the newest); the section says how many more there are."""


def check_gate(gate: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The quality gate to show as the page's banner, checked (``None``: no banner).

    ``gate`` is ``{"outcome": "passed" | "failed" | "not settled", "min_quality": Q,
    "lines": [str, ...]}`` (``min_quality`` and ``lines`` optional). The outcome is
    shown exactly as given; anything else raises :class:`ConfigurationError`.
    """
    if gate is None:
        return None
    if not isinstance(gate, Mapping):
        raise ConfigurationError(f"gate must be a mapping with an 'outcome', not {type(gate).__name__}")
    unknown = sorted(set(gate) - {"outcome", "min_quality", "lines"})
    if unknown:
        raise ConfigurationError(f"gate: unknown key(s) {', '.join(map(repr, unknown))}")
    outcome = gate.get("outcome")
    if outcome not in GATE_OUTCOMES:
        raise ConfigurationError(f"gate outcome must be one of {', '.join(GATE_OUTCOMES)}, not {outcome!r}")
    q = gate.get("min_quality")
    if q is not None and (isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 <= q <= 1.0):
        raise ConfigurationError(f"gate min_quality must be a number in 0..1, not {q!r}")
    lines = gate.get("lines") or ()
    if isinstance(lines, str) or not all(isinstance(line, str) for line in lines):
        raise ConfigurationError("gate lines must be a list of strings")
    return {"outcome": outcome, "min_quality": q, "lines": list(lines)}


def failures(
    ledger: QualityLedger,
    *,
    run_ids: Sequence[str],
    tasks: Sequence[str] | None,
    since: datetime | None,
) -> tuple[list[dict[str, Any]], int]:
    """The selection's cases that could not be graded (newest :data:`MAX_FAILURES`, oldest first)
    and how many there are in all. ``tasks=None``: every task."""
    rows = [r for run_id in run_ids for r in ledger.failures(run_id)] if run_ids else ledger.failures()
    wanted = None if tasks is None else set(tasks)
    kept = [
        r
        for r in rows
        if (wanted is None or r.task in wanted) and (since is None or _aware(r.created_at) >= since)
    ]
    kept.sort(key=lambda r: r.id)
    shown = kept[-MAX_FAILURES:]
    return [
        {
            "run": r.run_id,
            "case": r.case_id,
            "task": r.task,
            "stage": r.stage,
            "adapter": r.adapter_id or "-",
            "error_type": r.error_type,
            "message": r.message,
            "at": _aware(r.created_at).strftime("%Y-%m-%d %H:%M:%S UTC"),
        }
        for r in shown
    ], len(kept)


def _aware(value: datetime) -> datetime:
    from datetime import UTC

    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
