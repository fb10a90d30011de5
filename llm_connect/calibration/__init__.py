"""Judge calibration: does a judge agree with people and with non-LLM judges, and how is it biased?

:func:`calibrate` pairs the grades of the judge under test with those of
reference judges (same prompt, same baseline and candidate texts) from a
:class:`~llm_connect.ledger.QualityLedger`, computes agreement statistics with
reproducible bootstrap intervals, runs bias probes (position, length,
self-preference), gives a verdict against :class:`CalibrationThresholds` and
stores the :class:`CalibrationReport` in the ledger's calibrations table,
where routing reads it: ``Router.decide`` uses an LLM judge's grades only
after a passing calibration. The reference ``"human"`` (``against=["human"]``)
compares the judge's stored grades with people's labels (:mod:`llm_connect.labels`);
where it reaches a verdict it alone decides. ``contracts/calibration.md`` defines
every figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_connect.calibration._calibrate import PROBES, calibrate, pair_key, resolve_grader
from llm_connect.calibration._fill import FillPlan, FillReport, fill_missing_grades, plan_fill, rebuild_judge
from llm_connect.calibration._human import HUMAN, HumanReference
from llm_connect.calibration._human_stats import HumanAgreement, HumanCase, LengthPreference, human_agreement
from llm_connect.calibration._probes import (
    SCALES,
    LengthProbe,
    PositionProbe,
    SelfPreferenceProbe,
    length_probe,
    model_family,
    position_probe,
    self_preference_probe,
)
from llm_connect.calibration._report import (
    CalibrationReport,
    CalibrationThresholds,
    ReferenceResult,
    evaluate,
)
from llm_connect.calibration._stats import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_SEED,
    MIN_PAIRS,
    Agreement,
    ConfusionMatrix,
    Estimate,
    agreement,
    cohen_kappa,
)

if TYPE_CHECKING:
    from llm_connect.calibration._plot import write_plot

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "DEFAULT_SEED",
    "HUMAN",
    "MIN_PAIRS",
    "PROBES",
    "SCALES",
    "Agreement",
    "CalibrationReport",
    "CalibrationThresholds",
    "ConfusionMatrix",
    "Estimate",
    "FillPlan",
    "FillReport",
    "HumanAgreement",
    "HumanCase",
    "HumanReference",
    "LengthPreference",
    "LengthProbe",
    "PositionProbe",
    "ReferenceResult",
    "SelfPreferenceProbe",
    "agreement",
    "calibrate",
    "cohen_kappa",
    "evaluate",
    "fill_missing_grades",
    "human_agreement",
    "length_probe",
    "model_family",
    "pair_key",
    "plan_fill",
    "position_probe",
    "rebuild_judge",
    "resolve_grader",
    "self_preference_probe",
    "write_plot",
]


def __getattr__(name: str) -> Any:
    if name == "write_plot":  # matplotlib loads only when a plot is written
        from llm_connect.calibration._plot import write_plot

        return write_plot
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
