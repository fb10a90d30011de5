"""GradingResult: one validated grade (defined in :mod:`llm_connect.values`, re-exported here)."""

from __future__ import annotations

from llm_connect.values import GradingResult, validate_quality_score

__all__ = ["GradingResult", "validate_quality_score"]
