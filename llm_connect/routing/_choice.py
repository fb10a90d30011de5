"""The routing rule once the evidence is in: which candidate, and the reason in words.

:class:`~llm_connect.routing.Router` (which stores its decision) and the HTML
report (which never writes) both choose and explain with these two functions,
so a report cannot say something the router would not.
"""

from __future__ import annotations

from collections.abc import Sequence

from llm_connect.routing._decision import CandidateEvidence, IgnoredGrader
from llm_connect.routing._evidence import method_name
from llm_connect.values import STABILITY_VERDICTS

__all__ = ["STABILITY_ORDER", "cheapest_proven", "explain_decision"]

STABILITY_ORDER = STABILITY_VERDICTS
"""Stability verdicts, best first (``min_stability="RISKY"`` accepts SAFE and RISKY)."""


def cheapest_proven(evidence: Sequence[CandidateEvidence], order: Sequence[str]) -> CandidateEvidence | None:
    """The passing candidate with the lowest mean cost (unknown costs last, then the order given)."""
    passing = [c for c in evidence if c.passed]
    if not passing:
        return None
    return min(
        passing,
        key=lambda c: (
            c.mean_cost_usd is None,
            c.mean_cost_usd if c.mean_cost_usd is not None else 0.0,
            list(order).index(c.model),
        ),
    )


def _pct(level: float) -> str:
    return f"{100.0 * level:.4g}%"


def _unstable(candidate: CandidateEvidence, task: str) -> list[str]:
    """Why ``candidate`` misses ``min_stability`` (empty when it meets it)."""
    if candidate.stability_ok:
        return []
    if candidate.stability is None:
        return [f"no stability analysis stored on {task} (run llm-connect stability --task {task})"]
    return [f"stability {candidate.stability} on {task}, below the minimum"]


def explain_decision(
    chosen: CandidateEvidence | None,
    task: str,
    baseline: str,
    evidence: Sequence[CandidateEvidence],
    used: Sequence[str],
    ignored: Sequence[IgnoredGrader],
    *,
    min_quality: float,
    min_samples: int,
    alpha: float,
    fixed_n: bool = False,
    min_stability: str | None = None,
) -> str:
    """The decision in a sentence: the rule, each candidate's evidence (its own ``why``), the cost."""
    notes = "".join(f" Ignored {g.why}." for g in ignored)
    if not evidence:
        return f"Kept the baseline {baseline}: no candidates were given.{notes}"
    if not used:
        return f"Kept the baseline {baseline}: no usable grader remains, so no candidate has evidence.{notes}"
    k = len(evidence)
    rule = (
        f"{method_name(fixed_n)} {_pct(1.0 - alpha)} lower bound of mean per-case quality >= "
        f"{min_quality:g} with >= {min_samples} cases on {' and '.join(used)}"
        + (f"; {_pct(1.0 - alpha * k)} over {k} candidates (Bonferroni)" if k > 1 else "")
        + (f"; stability {min_stability} or better" if min_stability is not None else "")
    )
    if chosen is None:
        failures = "; ".join(
            f"{c.model}: " + ", ".join([g.why for g in c.graders if not g.passed] + _unstable(c, task))
            for c in evidence
        )
        return f"Kept the baseline {baseline}: no candidate is proven ({rule}). {failures}.{notes}"
    cost = (
        f"mean cost {chosen.cost_ratio:.2f}x the baseline's"
        if chosen.cost_ratio is not None
        else "cost unknown, first qualifying candidate in the order given"
    )
    others = [c.model for c in evidence if c.passed and c is not chosen]
    also = f" Also qualified: {', '.join(others)}." if others else ""
    proof = "; ".join(g.why for g in chosen.graders)
    if min_stability is not None:
        proof += f"; stability {chosen.stability} on {task}"
    return (
        f"Routed to {chosen.model} instead of {baseline}: the cheapest proven candidate ({rule}): "
        f"{proof}; {cost}.{also}{notes}"
    )
