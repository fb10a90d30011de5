"""Judge calibration: does a judge agree with people and with non-LLM judges, and how is it biased?

:func:`calibrate` pairs the grades of the judge under test with those of
reference judges (same prompt, same baseline and candidate texts) from a
:class:`~llm_connect.ledger.QualityLedger`, computes agreement statistics with
reproducible bootstrap intervals (:func:`judge_agreement`, :class:`JudgeAgreement`; against
people :func:`human_agreement`), runs bias probes (position, length,
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

from llm_connect._renamed import renamed_attribute
from llm_connect.calibration._bridge import BridgeReport, bridge_judges
from llm_connect.calibration._calibrate import PROBES, calibrate, pair_key, resolve_grader
from llm_connect.calibration._drift import DriftState, DriftVerdict
from llm_connect.calibration._fill import FillPlan, FillReport, fill_missing_grades, plan_fill, rebuild_judge
from llm_connect.calibration._human import HUMAN, HumanReference
from llm_connect.calibration._human_stats import HumanAgreement, HumanCase, LengthPreference, human_agreement
from llm_connect.calibration._judge_checks import (
    CheckReport,
    anchor_store,
    check_judge,
    freeze_anchor,
    judge_identities,
    last_verdict,
)
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
    ConfusionMatrix,
    Estimate,
    JudgeAgreement,
    judge_agreement,
    pass_fail_kappa,
)

if TYPE_CHECKING:
    from llm_connect.calibration._plot import PLOT_SUFFIXES, write_plot

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "DEFAULT_SEED",
    "HUMAN",
    "MIN_PAIRS",
    "PLOT_SUFFIXES",
    "PROBES",
    "SCALES",
    "BridgeReport",
    "CalibrationReport",
    "CalibrationThresholds",
    "CheckReport",
    "ConfusionMatrix",
    "DriftState",
    "DriftVerdict",
    "Estimate",
    "FillPlan",
    "FillReport",
    "HumanAgreement",
    "HumanCase",
    "HumanReference",
    "JudgeAgreement",
    "LengthPreference",
    "LengthProbe",
    "PositionProbe",
    "ReferenceResult",
    "SelfPreferenceProbe",
    "anchor_store",
    "bridge_judges",
    "calibrate",
    "check_judge",
    "evaluate",
    "fill_missing_grades",
    "freeze_anchor",
    "human_agreement",
    "judge_agreement",
    "judge_identities",
    "last_verdict",
    "length_probe",
    "model_family",
    "pair_key",
    "pass_fail_kappa",
    "plan_fill",
    "position_probe",
    "rebuild_judge",
    "resolve_grader",
    "self_preference_probe",
    "write_plot",
]


_RENAMED = {"Agreement": "JudgeAgreement", "agreement": "judge_agreement"}
"""Old names kept for one release (``contracts/calibration.md`` named them): they clashed with
:mod:`llm_connect.labels`' ``Agreement`` and ``agreement``, which mean agreement between annotators."""


def __getattr__(name: str) -> Any:
    if name in ("PLOT_SUFFIXES", "write_plot"):  # matplotlib loads only when a plot is written
        from llm_connect.calibration import _plot

        return getattr(_plot, name)
    return renamed_attribute(__name__, _RENAMED, globals(), name)
