"""Routing: choose which model serves a task from the evidence in the ledger.

:class:`Router` picks the cheapest candidate whose lower confidence bound of
mean quality clears a threshold with enough grades, otherwise the baseline,
and stores every :class:`RoutingDecision` in the ledger for audit.
"""

from __future__ import annotations

from llm_connect.routing._decision import CandidateEvidence, GraderEvidence, IgnoredGrader, RoutingDecision
from llm_connect.routing._router import Router

__all__ = ["CandidateEvidence", "GraderEvidence", "IgnoredGrader", "Router", "RoutingDecision"]
