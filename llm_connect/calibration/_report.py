"""CalibrationReport, the thresholds it is judged against, and the verdict rule.

The verdict (also in ``contracts/calibration.md``):

1. Each reference *passes* when its agreement has ``n >= min_n``, Spearman's
   rho ``>= min_spearman`` and Cohen's kappa ``>= min_kappa`` (point
   estimates; an undefined statistic does not pass). With fewer than
   ``min_n`` pairs (or fewer than the bare minimum, when no numbers are
   computed) it has *insufficient data*.
2. With ``require_all_references`` (default) every reference must pass;
   otherwise one passing reference is enough.
3. A probe that ran and is flagged fails the verdict: position consistency
   below ``min_position_consistency``; length excess above
   ``max_length_excess``; self-preference above ``max_self_preference``
   (a ``None`` threshold turns that check off). Each probe's ``flagged``
   is defined in :mod:`llm_connect.calibration._probes`.
4. The verdict is ``"fail: <reasons>"`` when anything failed, else
   ``"insufficient data: <reasons>"`` when the references could not be
   judged, else ``"pass"``. Only ``"pass"`` has ``passed=True``; routing
   uses an LLM judge's grades only after a passing calibration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from llm_connect.calibration._probes import LengthProbe, PositionProbe, SelfPreferenceProbe
from llm_connect.calibration._stats import Agreement
from llm_connect.errors import ConfigurationError

__all__ = [
    "FORMAT_VERSION",
    "CalibrationReport",
    "CalibrationThresholds",
    "ReferenceResult",
    "evaluate",
]

FORMAT_VERSION = 1
"""Version of :meth:`CalibrationReport.to_dict`'s layout. Do not reorder or rename keys without bumping it."""


@dataclass(frozen=True)
class CalibrationThresholds:
    """What a calibration must show for its verdict to be ``"pass"``."""

    min_spearman: float = 0.5
    """Smallest Spearman's rho between judge and reference scores."""
    min_kappa: float = 0.4
    """Smallest Cohen's kappa of the pass/fail verdicts at the calibration threshold."""
    min_n: int = 50
    """Fewest paired grades per reference for the figures to count."""
    min_position_consistency: float = 0.8
    """Smallest position-consistency rate (when the position probe ran)."""
    max_length_excess: float | None = 0.2
    """Largest length-following excess over the references; ``None``: report only."""
    max_self_preference: float | None = 0.1
    """Largest own-family score advantage; ``None``: report only."""
    require_all_references: bool = True
    """Every reference must pass (``False``: at least one)."""

    def __post_init__(self) -> None:
        for name in ("min_spearman", "min_kappa"):
            value = getattr(self, name)
            if not -1.0 <= value <= 1.0:
                raise ConfigurationError(f"CalibrationThresholds.{name} must lie in -1..1, not {value!r}")
        if not 0.0 <= self.min_position_consistency <= 1.0:
            raise ConfigurationError(
                f"CalibrationThresholds.min_position_consistency must lie in 0..1, "
                f"not {self.min_position_consistency!r}"
            )
        if isinstance(self.min_n, bool) or not isinstance(self.min_n, int) or self.min_n < 1:
            raise ConfigurationError(
                f"CalibrationThresholds.min_n must be a positive integer, not {self.min_n!r}"
            )
        for name in ("max_length_excess", "max_self_preference"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigurationError(f"CalibrationThresholds.{name} must be >= 0 or None, not {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CalibrationThresholds:
        """Inverse of :meth:`to_dict` (unknown keys are an error)."""
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ConfigurationError(f"unknown calibration threshold(s): {', '.join(sorted(unknown))}")
        return cls(**dict(data))


@dataclass(frozen=True)
class ReferenceResult:
    """Agreement of the judge under test with one reference judge."""

    reference: str
    """The reference's grader id."""
    agreement: Agreement
    status: str
    """``"pass"``, ``"fail"`` or ``"insufficient data"`` against the thresholds."""
    reasons: tuple[str, ...] = ()
    """Why it did not pass."""
    spec: Mapping[str, Any] | None = None
    """The reference's judge spec, when the ledger holds one."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-strict form."""
        return {
            "reference": self.reference,
            "spec": None if self.spec is None else dict(self.spec),
            "status": self.status,
            "reasons": list(self.reasons),
            **self.agreement.to_dict(),
        }


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def judge_reference(
    reference: str,
    agreement: Agreement,
    thresholds: CalibrationThresholds,
    spec: Mapping[str, Any] | None = None,
) -> ReferenceResult:
    """Judge one reference's agreement against the thresholds (rule 1 of the module docstring)."""
    if agreement.status != "ok" or agreement.n < thresholds.min_n:
        why = f"{reference}: n={agreement.n} < min_n={thresholds.min_n}"
        return ReferenceResult(reference, agreement, "insufficient data", (why,), spec)
    reasons = []
    rho, kappa = agreement.spearman.value, agreement.cohen_kappa.value
    if rho is None or rho < thresholds.min_spearman:
        reasons.append(f"{reference}: Spearman {_fmt(rho)} < {thresholds.min_spearman}")
    if kappa is None or kappa < thresholds.min_kappa:
        reasons.append(f"{reference}: kappa {_fmt(kappa)} < {thresholds.min_kappa}")
    return ReferenceResult(reference, agreement, "fail" if reasons else "pass", tuple(reasons), spec)


def evaluate(
    references: Sequence[ReferenceResult],
    thresholds: CalibrationThresholds,
    *,
    position: PositionProbe | None = None,
    length: LengthProbe | None = None,
    self_preference: SelfPreferenceProbe | None = None,
) -> tuple[str, bool]:
    """The verdict string and whether it passes (rules 2-4 of the module docstring)."""
    failures: list[str] = []
    insufficient: list[str] = []
    passing = [r for r in references if r.status == "pass"]
    if thresholds.require_all_references or not passing:
        for ref in references:
            if ref.status == "fail":
                failures.extend(ref.reasons)
            elif ref.status == "insufficient data":
                insufficient.extend(ref.reasons)
    if not references:
        insufficient.append("no reference judge")
    if position is not None and position.status == "ok":
        rate = position.consistency_rate.value
        if rate is not None and rate < thresholds.min_position_consistency:
            failures.append(f"position consistency {_fmt(rate)} < {thresholds.min_position_consistency}")
    limit = thresholds.max_length_excess
    if length is not None and limit is not None and length.excess is not None and length.excess > limit:
        failures.append(
            f"length bias: judge follows length {_fmt(length.excess)} more than the references (> {limit})"
        )
    if self_preference is not None and thresholds.max_self_preference is not None and self_preference.flagged:
        diffs = [e.value for e in self_preference.residual_difference.values() if e.value is not None]
        deciding = min(diffs) if diffs else self_preference.difference.value
        failures.append(
            f"self-preference: {self_preference.judge_family} candidates score {_fmt(deciding)} higher "
            f"(> {self_preference.margin})"
        )
    if failures:
        return "fail: " + "; ".join(failures), False
    if insufficient:
        return "insufficient data: " + "; ".join(insufficient), False
    return "pass", True


@dataclass(frozen=True)
class CalibrationReport:
    """The calibration of one judge against reference judges: figures, probes, verdict.

    :meth:`to_dict` is strict JSON (no NaN; undefined figures are ``None``
    with a reason) and is what the ledger's calibrations table stores.
    """

    judge: str
    """Grader id of the judge under test."""
    references: tuple[ReferenceResult, ...]
    task: str | None
    """The task the grades came from (``None``: every task)."""
    since: str | None
    """Only grades recorded at or after this time (ISO 8601), when given."""
    threshold: float
    """Pass/fail threshold of a score for kappa and the confusion matrix."""
    thresholds: CalibrationThresholds
    verdict: str
    passed: bool
    n_bootstrap: int
    seed: int
    position: PositionProbe | None = None
    length: LengthProbe | None = None
    self_preference: SelfPreferenceProbe | None = None
    judge_spec: Mapping[str, Any] | None = None
    """The judge's stored spec, when the ledger holds one."""
    n_judge_grades: int = 0
    """Distinct pairs the judge graded (within the task and time filters)."""
    notes: tuple[str, ...] = ()
    """Things a reader should know (probes skipped and why)."""
    calibration_id: int | None = None
    """Row id in the ledger's calibrations table, once stored."""
    scores: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict, compare=False)
    """Per reference: (judge score, reference score) of every pair, for plots; not stored."""

    def reference(self, grader_id: str) -> ReferenceResult:
        """The result for one reference (``KeyError`` if it was not a reference)."""
        for ref in self.references:
            if ref.reference == grader_id:
                return ref
        raise KeyError(grader_id)

    def to_dict(self, *, include_scores: bool = False) -> dict[str, Any]:
        """JSON-strict form, ``version`` first. ``include_scores`` adds the paired scores."""
        out: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "judge": self.judge,
            "judge_spec": None if self.judge_spec is None else dict(self.judge_spec),
            "task": self.task,
            "since": self.since,
            "threshold": self.threshold,
            "n_judge_grades": self.n_judge_grades,
            "references": [r.to_dict() for r in self.references],
            "probes": {
                "position": None if self.position is None else self.position.to_dict(),
                "length": None if self.length is None else self.length.to_dict(),
                "self_preference": None if self.self_preference is None else self.self_preference.to_dict(),
            },
            "thresholds": self.thresholds.to_dict(),
            "bootstrap": {
                "method": "percentile",
                "resamples": self.n_bootstrap,
                "seed": self.seed,
                "confidence": 0.95,
            },
            "verdict": self.verdict,
            "passed": self.passed,
            "notes": list(self.notes),
            "calibration_id": self.calibration_id,
        }
        if include_scores:
            out["scores"] = {k: [list(p) for p in v] for k, v in self.scores.items()}
        return out
