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
5. People decide. When the calibration has a ``"human"`` reference that
   reached a verdict (pass or fail, :func:`~llm_connect.calibration._human.judge_human`),
   that verdict alone is the calibration's: ``"pass"``, or ``"fail: human: ..."``,
   whatever the other references and the probes say (they are still
   reported, and the report's notes say what they would have decided). A
   human reference with insufficient data decides nothing: rules 1-4 apply
   with it counted as a reference with insufficient data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from llm_connect.calibration._human import HUMAN, HumanReference
from llm_connect.calibration._human_stats import HumanAgreement
from llm_connect.calibration._probes import LengthProbe, PositionProbe, SelfPreferenceProbe
from llm_connect.calibration._stats import JudgeAgreement
from llm_connect.errors import ConfigurationError

__all__ = [
    "FORMAT_VERSION",
    "CalibrationReport",
    "CalibrationThresholds",
    "ReferenceResult",
    "evaluate",
    "judge_human",
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
    min_human_n: int = 20
    """Fewest labelled cases graded by the judge for a verdict against people."""
    min_human_kappa: float = 0.4
    """Smallest Cohen's kappa of the judge's and people's verdicts (three classes)."""
    min_human_agreement: float = 0.7
    """Smallest agreement with people on the cases where neither says tie."""
    max_human_length_difference: float | None = 0.1
    """Largest excess of the judge's longer-answer rate over people's; ``None``: report only."""

    def __post_init__(self) -> None:
        for name in ("min_spearman", "min_kappa", "min_human_kappa"):
            value = getattr(self, name)
            if not -1.0 <= value <= 1.0:
                raise ConfigurationError(f"CalibrationThresholds.{name} must lie in -1..1, not {value!r}")
        if not 0.0 <= self.min_position_consistency <= 1.0:
            raise ConfigurationError(
                f"CalibrationThresholds.min_position_consistency must lie in 0..1, "
                f"not {self.min_position_consistency!r}"
            )
        if not 0.0 <= self.min_human_agreement <= 1.0:
            raise ConfigurationError(
                "CalibrationThresholds.min_human_agreement must lie in 0..1, "
                f"not {self.min_human_agreement!r}"
            )
        for name in ("min_n", "min_human_n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(
                    f"CalibrationThresholds.{name} must be a positive integer, not {value!r}"
                )
        for name in ("max_length_excess", "max_self_preference", "max_human_length_difference"):
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
    agreement: JudgeAgreement
    status: str
    """``"pass"``, ``"fail"`` or ``"insufficient data"`` against the thresholds."""
    reasons: tuple[str, ...] = ()
    """Why it did not pass."""
    spec: Mapping[str, Any] | None = None
    """The reference's judge spec, when the ledger holds one."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-strict form: the agreement's figures, then the reference's verdict.

        ``status`` is the verdict (pass, fail, insufficient data); the agreement's own status
        (``ok`` or why its figures are undefined) is ``agreement_status``.
        """
        figures = self.agreement.to_dict()
        agreement_status = figures.pop("status")
        return {
            "reference": self.reference,
            "spec": None if self.spec is None else dict(self.spec),
            "status": self.status,
            "reasons": list(self.reasons),
            "agreement_status": agreement_status,
            **figures,
        }


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def judge_reference(
    reference: str,
    agreement: JudgeAgreement,
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


def judge_human(
    agreement: HumanAgreement,
    thresholds: CalibrationThresholds,
    *,
    labelled_cases: int = 0,
    unmatched: int = 0,
) -> HumanReference:
    """Pass, fail or insufficient data against people (the rule of ``contracts/calibration.md``).

    Insufficient data below ``min_human_n`` labelled cases graded by the judge. Otherwise it
    passes when Cohen's kappa of the three verdicts is at least ``min_human_kappa``, the
    non-tie agreement at least ``min_human_agreement`` (point estimates; undefined does not
    pass) and, unless ``max_human_length_difference`` is ``None``, ``length_preference`` is not
    flagged.
    """
    extra = {"labelled_cases": labelled_cases, "unmatched": unmatched}
    if agreement.status != "ok" or agreement.n < thresholds.min_human_n:
        why = (
            f"{HUMAN}: n={agreement.n} labelled cases graded by the judge "
            f"< min_human_n={thresholds.min_human_n}"
        )
        return HumanReference(agreement, "insufficient data", (why,), **extra)
    reasons = []
    kappa = agreement.cohen_kappa.value
    if kappa is None or kappa < thresholds.min_human_kappa:
        reasons.append(f"{HUMAN}: kappa {_fmt(kappa)} < {thresholds.min_human_kappa}")
    non_tie = agreement.agreement_non_tie.value
    if non_tie is None or non_tie < thresholds.min_human_agreement:
        reasons.append(f"{HUMAN}: agreement without ties {_fmt(non_tie)} < {thresholds.min_human_agreement}")
    length = agreement.length_preference
    if thresholds.max_human_length_difference is not None and length.flagged:
        reasons.append(
            f"{HUMAN}: picks the longer answer {_fmt(length.difference.value)} more often than people "
            f"(> {length.margin})"
        )
    return HumanReference(agreement, "fail" if reasons else "pass", tuple(reasons), **extra)


def evaluate(
    references: Sequence[ReferenceResult],
    thresholds: CalibrationThresholds,
    *,
    position: PositionProbe | None = None,
    length: LengthProbe | None = None,
    self_preference: SelfPreferenceProbe | None = None,
    human: HumanReference | None = None,
) -> tuple[str, bool]:
    """The verdict string and whether it passes (rules 2-5 of the module docstring)."""
    if human is not None and human.decides:
        return ("pass", True) if human.status == "pass" else ("fail: " + "; ".join(human.reasons), False)
    failures: list[str] = []
    insufficient: list[str] = []
    passing = [r for r in references if r.status == "pass"]
    if thresholds.require_all_references or not passing:
        for ref in references:
            if ref.status == "fail":
                failures.extend(ref.reasons)
            elif ref.status == "insufficient data":
                insufficient.extend(ref.reasons)
        if human is not None:  # here it did not decide: insufficient data
            insufficient.extend(human.reasons)
    if not references and human is None:
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
    human: HumanReference | None = None
    """Agreement with people's labels (``against=["human"]``): the ``"human"`` entry of the JSON
    ``references``."""
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
            "references": [r.to_dict() for r in self.references]
            + ([] if self.human is None else [self.human.to_dict()]),
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
