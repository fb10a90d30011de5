"""Every weight and threshold of a stability analysis, in one frozen dataclass.

The defaults are the Ruvrics values (``shared/seeds/ruvrics-readme.md``): weights
40/25/20/15, SAFE at 0.90 and RISKY from 0.70, and per metric the LOW/MEDIUM/HIGH
variance bounds. Scores are fractions in 0..1 (the seed prints them as percent).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from llm_connect.errors import ConfigurationError

__all__ = ["METRICS", "StabilityConfig", "Variance", "Verdict"]

Verdict = Literal["SAFE", "RISKY", "DO_NOT_SHIP"]
"""The risk class of a stability score."""
Variance = Literal["LOW", "MEDIUM", "HIGH"]
"""How much one metric varies across runs."""

METRICS: tuple[str, ...] = ("semantic", "tool", "structural", "length")
"""The four scored metrics, in report order."""

_FRACTIONS = (
    "safe_threshold",
    "risky_threshold",
    "semantic_low",
    "semantic_medium",
    "tool_low",
    "tool_medium",
    "structural_low",
    "structural_medium",
    "claim_low_share",
    "claim_high_share",
    "min_success_rate",
)


@dataclass(frozen=True)
class StabilityConfig:
    """Weights and thresholds of :func:`~llm_connect.stability.analyze`.

    Override any of them: ``StabilityConfig(safe_threshold=0.95)`` or
    ``StabilityConfig().replace(length_weight=0.0, semantic_weight=0.55)``.
    Lower bounds are inclusive (a score equal to ``safe_threshold`` is SAFE).

    Raises:
        ConfigurationError: a value is out of range, the weights do not sum to 1,
            or a LOW bound lies below its MEDIUM bound.
    """

    semantic_weight: float = 0.40
    """Weight of semantic consistency in the overall score."""
    tool_weight: float = 0.25
    """Weight of tool consistency."""
    structural_weight: float = 0.20
    """Weight of structural consistency."""
    length_weight: float = 0.15
    """Weight of length consistency."""

    safe_threshold: float = 0.90
    """Overall score at or above which the verdict is SAFE."""
    risky_threshold: float = 0.70
    """Overall score at or above which (and below ``safe_threshold``) the verdict is RISKY;
    below it, DO_NOT_SHIP."""

    semantic_low: float = 0.85
    """Semantic consistency at or above this is LOW variance."""
    semantic_medium: float = 0.70
    """Semantic consistency at or above this (below ``semantic_low``) is MEDIUM; below, HIGH."""
    tool_low: float = 0.95
    """Tool consistency at or above this is LOW variance."""
    tool_medium: float = 0.80
    """Tool consistency at or above this is MEDIUM; below, HIGH."""
    structural_low: float = 0.95
    """Structural consistency at or above this is LOW variance."""
    structural_medium: float = 0.85
    """Structural consistency at or above this is MEDIUM; below, HIGH."""

    length_cv_low: float = 0.15
    """A coefficient of variation of the lengths below this is LOW variance."""
    length_cv_medium: float = 0.30
    """A CV below this (at or above ``length_cv_low``) is MEDIUM; at or above it, HIGH."""
    length_cv_zero: float = 0.40
    """The CV at which the length score reaches 0: ``score = max(0, 1 - cv / length_cv_zero)``."""
    length_min_mean_words: float = 5.0
    """When the mean length is below this many words, lengths are too short to vary
    meaningfully: CV 0, score 1."""

    claim_low_share: float = 0.20
    """Runs with risky claims: a share below this (or above ``claim_high_share``) is
    consistent (LOW); zero is NONE."""
    claim_high_share: float = 0.80
    """A share of runs with risky claims from ``claim_low_share`` to this, inclusive, is
    HIGH: the model makes such claims unpredictably."""

    min_success_rate: float = 0.75
    """At least ``max(2, ceil(min_success_rate * runs))`` runs must succeed (15 of 20,
    the Ruvrics default); otherwise the analysis raises
    :class:`~llm_connect.errors.InsufficientRunsError`."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigurationError(f"StabilityConfig.{f.name} must be a finite number, not {value!r}")
            if value < 0:
                raise ConfigurationError(f"StabilityConfig.{f.name} must be >= 0, not {value!r}")
        for name in _FRACTIONS:
            if getattr(self, name) > 1:
                raise ConfigurationError(
                    f"StabilityConfig.{name} must be within 0..1, not {getattr(self, name)!r}"
                )
        total = self.semantic_weight + self.tool_weight + self.structural_weight + self.length_weight
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise ConfigurationError(f"StabilityConfig weights must sum to 1, not {total:g}")
        for low, medium in (
            ("safe_threshold", "risky_threshold"),
            ("semantic_low", "semantic_medium"),
            ("tool_low", "tool_medium"),
            ("structural_low", "structural_medium"),
            ("claim_high_share", "claim_low_share"),
        ):
            if getattr(self, low) < getattr(self, medium):
                raise ConfigurationError(f"StabilityConfig.{low} must be >= {medium}")
        if self.length_cv_medium < self.length_cv_low:
            raise ConfigurationError("StabilityConfig.length_cv_medium must be >= length_cv_low")
        if self.length_cv_zero <= 0:
            raise ConfigurationError("StabilityConfig.length_cv_zero must be > 0")

    # -- derived ------------------------------------------------------------------

    @property
    def weights(self) -> dict[str, float]:
        """``{metric: weight}`` in :data:`METRICS` order."""
        return {
            "semantic": self.semantic_weight,
            "tool": self.tool_weight,
            "structural": self.structural_weight,
            "length": self.length_weight,
        }

    def min_successful_runs(self, runs: int) -> int:
        """The fewest successful runs an analysis of ``runs`` runs accepts (never below 2)."""
        return max(2, math.ceil(self.min_success_rate * runs - 1e-9))

    def verdict(self, score: float) -> Verdict:
        """SAFE, RISKY or DO_NOT_SHIP for an overall ``score`` in 0..1."""
        if score >= self.safe_threshold:
            return "SAFE"
        if score >= self.risky_threshold:
            return "RISKY"
        return "DO_NOT_SHIP"

    def variance(self, metric: str, value: float) -> Variance:
        """The variance class of ``metric``: its consistency score, or for ``length`` its CV."""
        if metric == "length":
            if value < self.length_cv_low:
                return "LOW"
            return "MEDIUM" if value < self.length_cv_medium else "HIGH"
        if metric not in METRICS:
            raise ConfigurationError(f"unknown stability metric {metric!r} (known: {', '.join(METRICS)})")
        low, medium = getattr(self, f"{metric}_low"), getattr(self, f"{metric}_medium")
        if value >= low:
            return "LOW"
        return "MEDIUM" if value >= medium else "HIGH"

    # -- serialisation --------------------------------------------------------------

    def replace(self, **changes: Any) -> StabilityConfig:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, float]:
        """Every field, JSON-serialisable."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StabilityConfig:
        """Build from :meth:`to_dict` output or any subset of its keys (the rest default).

        Raises:
            ConfigurationError: not a mapping, an unknown key, or an invalid value.
        """
        if not isinstance(data, Mapping):
            raise ConfigurationError(f"a stability config must be an object, not {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigurationError(f"unknown StabilityConfig field {unknown[0]!r}")
        return cls(**dict(data))
