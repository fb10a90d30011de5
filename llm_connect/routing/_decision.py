"""RoutingDecision and its evidence (defined in :mod:`llm_connect.values`, re-exported here)."""

from __future__ import annotations

from llm_connect.values import CandidateEvidence, GraderEvidence, IgnoredGrader, RoutingDecision

__all__ = ["CandidateEvidence", "GraderEvidence", "IgnoredGrader", "RoutingDecision"]
