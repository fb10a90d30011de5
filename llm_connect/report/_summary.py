"""What the report says in words: the decision in one sentence, the quality gate, the run's failures.

The long reason of a decision (:attr:`RoutingDecision.reason`) stays on the
page behind a ``<details>`` disclosure; :func:`decision_sentence` is the one
plain sentence shown above it. :func:`check_gate` accepts the quality gate a
caller computed (the report never computes or softens it: the banner shows
exactly the outcome it is given). :func:`failures` reads the cases of the
selection that could not be graded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger
    from llm_connect.values import CandidateEvidence, GraderEvidence, RoutingDecision

__all__ = ["GATE_OUTCOMES", "MAX_FAILURES", "check_gate", "decision_sentence", "failures", "more_cases"]

GATE_OUTCOMES = ("passed", "failed", "not settled")
"""The quality gate's outcomes: every candidate proven on every routing judge / one ruled out / otherwise."""

MAX_FAILURES = 500
"""At most this many failures are listed (the newest); the section says how many more there are."""


def more_cases(ev: GraderEvidence, min_samples: int) -> int | None:
    """About how many more cases would settle ``ev`` (``None``: settled, or too close to call).

    ``GraderEvidence.cases_needed`` is a total over all cases; this is what is
    still missing. An ``insufficient`` figure needs at least ``min_samples``.
    """
    if ev.status not in ("undecided", "insufficient"):
        return None
    total = ev.cases_needed
    if ev.status == "insufficient":
        total = max(min_samples, total or 0)
    return None if total is None else max(0, total - ev.n)


def _candidate_more(cand: CandidateEvidence, min_samples: int) -> int | None:
    needed = [more_cases(g, min_samples) for g in cand.graders if g.status != "proven"]
    known = [n for n in needed if n is not None]
    return max(known) if known and len(known) == len(needed) else None


def _join(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def decision_sentence(decision: RoutingDecision) -> str:
    """The decision in one plain sentence, e.g. ``Keep gpt-4o: no candidate is proven at 0.9 yet;
    gpt-4o-mini needs about 60 more cases.`` (the full reason is ``decision.reason``)."""
    d = decision
    q = f"{d.min_quality:g}"
    if d.routed:
        chosen = d.evidence_for(d.model)
        n = len(d.used_grader_ids)
        on = "its routing judge" if n == 1 else "both routing judges" if n == 2 else f"all {n} routing judges"
        cost = "" if chosen.cost_ratio is None else f", at {chosen.cost_ratio:.2f}x the baseline's cost"
        return f"Route to {d.model} instead of {d.baseline}: proven at {q} on {on}{cost}."
    if not d.candidates:
        return f"Keep {d.baseline}: there is no candidate to compare with it."
    if not d.used_grader_ids:
        return f"Keep {d.baseline}: no routing judge is usable (an LLM judge needs a passing calibration)."
    ruled = [c.model for c in d.candidates if c.status == "ruled out"]
    parts = []
    unsettled = False
    for c in d.candidates:
        if c.status == "ruled out":
            continue
        if c.status == "proven":
            parts.append(f"{c.model} is proven but fails its stability check")
            continue
        unsettled = True
        if c.status in ("no grades", "no graders"):
            parts.append(f"{c.model} has no grades on a routing judge")
            continue
        more = _candidate_more(c, d.min_samples)
        parts.append(
            f"{c.model} is too close to call" if more is None else f"{c.model} needs about {more} more cases"
        )
    if ruled:
        parts.append(f"{_join(ruled)} {'is' if len(ruled) == 1 else 'are'} ruled out")
    head = f"no candidate is proven at {q}" + (" yet" if unsettled else "")
    return f"Keep {d.baseline}: {head}; {', '.join(parts)}."


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
