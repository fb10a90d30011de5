"""Routing: choose which model serves a task from the evidence in the ledger.

:class:`Router` decides under one :class:`RoutingPolicy` (every setting that changes a
decision, validated when built). It picks the cheapest candidate whose anytime-valid lower
confidence bound of mean per-case quality clears a threshold with enough
cases, otherwise the baseline, and stores every :class:`RoutingDecision` in
the ledger for audit. :func:`gather` / :func:`assess` (``routing/_evidence.py``)
compute that evidence; every figure llm-connect prints about a candidate
comes from them; :func:`human_evidence` is the evidence about what people would say (the mean
human quality, from the judge's grades and people's labels). Active labelling chooses cases for
a label with :func:`inclusion_probabilities`, which grow with :func:`judge_uncertainty` and never
fall below :data:`ACTIVE_FLOOR` times the rate. :meth:`Router.decide_slices` decides each slice
of a task too (:class:`SliceDecisions`), with :func:`e_bh` across the slices. Each name loads
its module on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_connect.routing._choice import (
        STABILITY_ORDER,
        cheapest_proven,
        decision_sentence,
        explain_decision,
        judge_and_people,
        scale_note,
        threshold_phrase,
    )
    from llm_connect.routing._decision import (
        CandidateEvidence,
        GraderEvidence,
        IgnoredGrader,
        RoutingDecision,
    )
    from llm_connect.routing._evidence import assess, candidate_alpha, gather
    from llm_connect.routing._gate import (
        GATE_FAILED,
        GATE_NOT_SETTLED,
        GATE_PASSED,
        GateItem,
        GateResult,
        more_cases,
        quality_gate,
    )
    from llm_connect.routing._human_cache import human_evidence
    from llm_connect.routing._ppi import ACTIVE_FLOOR, inclusion_probabilities, judge_uncertainty
    from llm_connect.routing._router import Router
    from llm_connect.routing._slices import e_bh
    from llm_connect.values import PolicyError, RoutingPolicy, SliceDecision, SliceDecisions, SliceError

__all__ = [
    "ACTIVE_FLOOR",
    "GATE_FAILED",
    "GATE_NOT_SETTLED",
    "GATE_PASSED",
    "STABILITY_ORDER",
    "CandidateEvidence",
    "GateItem",
    "GateResult",
    "GraderEvidence",
    "IgnoredGrader",
    "PolicyError",
    "Router",
    "RoutingDecision",
    "RoutingPolicy",
    "SliceDecision",
    "SliceDecisions",
    "SliceError",
    "assess",
    "candidate_alpha",
    "cheapest_proven",
    "decision_sentence",
    "e_bh",
    "explain_decision",
    "gather",
    "human_evidence",
    "inclusion_probabilities",
    "judge_and_people",
    "judge_uncertainty",
    "more_cases",
    "quality_gate",
    "scale_note",
    "threshold_phrase",
]

_LAZY = {
    **dict.fromkeys(
        (
            "STABILITY_ORDER",
            "cheapest_proven",
            "decision_sentence",
            "explain_decision",
            "judge_and_people",
            "scale_note",
            "threshold_phrase",
        ),
        "llm_connect.routing._choice",
    ),
    **dict.fromkeys(
        ("CandidateEvidence", "GraderEvidence", "IgnoredGrader", "RoutingDecision"),
        "llm_connect.routing._decision",
    ),
    **dict.fromkeys(("assess", "candidate_alpha", "gather"), "llm_connect.routing._evidence"),
    **dict.fromkeys(
        (
            "GATE_FAILED",
            "GATE_NOT_SETTLED",
            "GATE_PASSED",
            "GateItem",
            "GateResult",
            "more_cases",
            "quality_gate",
        ),
        "llm_connect.routing._gate",
    ),
    "human_evidence": "llm_connect.routing._human_cache",
    **dict.fromkeys(
        ("ACTIVE_FLOOR", "inclusion_probabilities", "judge_uncertainty"), "llm_connect.routing._ppi"
    ),
    "Router": "llm_connect.routing._router",
    "e_bh": "llm_connect.routing._slices",
    **dict.fromkeys(
        ("PolicyError", "RoutingPolicy", "SliceDecision", "SliceDecisions", "SliceError"),
        "llm_connect.values",
    ),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
