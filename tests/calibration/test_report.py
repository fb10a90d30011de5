"""The verdict rule, the thresholds, the report's strict JSON, and plot-path validation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from llm_connect.calibration import (
    CalibrationReport,
    CalibrationThresholds,
    evaluate,
    judge_agreement,
    length_probe,
    position_probe,
    write_plot,
)
from llm_connect.calibration._report import judge_reference
from llm_connect.errors import ConfigurationError

RNG = np.random.default_rng(9)
X = RNG.random(60)
GOOD = judge_reference(
    "good", judge_agreement(X, np.clip(X + RNG.normal(0, 0.05, 60), 0, 1)), CalibrationThresholds()
)
BAD = judge_reference("bad", judge_agreement(X, RNG.random(60)), CalibrationThresholds())
FEW = judge_reference("few", judge_agreement(X[:20], X[:20]), CalibrationThresholds())


def test_every_reference_must_pass_unless_told_otherwise() -> None:
    assert GOOD.status == "pass" and BAD.status == "fail" and FEW.status == "insufficient data"
    assert evaluate([GOOD], CalibrationThresholds()) == ("pass", True)
    verdict, passed = evaluate([GOOD, BAD], CalibrationThresholds())
    assert not passed and verdict.startswith("fail: bad: Spearman")
    assert evaluate([GOOD, BAD], CalibrationThresholds(require_all_references=False)) == ("pass", True)
    assert evaluate([GOOD, FEW], CalibrationThresholds()) == (
        "insufficient data: few: n=20 < min_n=50",
        False,
    )


def test_a_flagged_probe_fails_the_verdict_unless_its_threshold_is_off() -> None:
    inconsistent = position_probe([0.3] * 20, [0.3] * 20)
    assert evaluate([GOOD], CalibrationThresholds(), position=inconsistent)[0].startswith(
        "fail: position consistency 0.000 < 0.8"
    )
    ratios = np.linspace(0.2, 3.0, 60)
    verbose = length_probe(ratios / 3.0, ratios, {"good": (list(X), list(ratios))})
    assert not evaluate([GOOD], CalibrationThresholds(), length=verbose)[1]
    assert evaluate([GOOD], CalibrationThresholds(max_length_excess=None), length=verbose) == ("pass", True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_spearman": 1.5},
        {"min_kappa": -2},
        {"min_n": 0},
        {"min_position_consistency": 1.2},
        {"max_length_excess": -0.1},
    ],
)
def test_invalid_thresholds_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError, match="CalibrationThresholds"):
        CalibrationThresholds(**kwargs)  # type: ignore[arg-type]


def test_thresholds_round_trip_and_reject_unknown_keys() -> None:
    t = CalibrationThresholds(min_n=20, max_self_preference=None)
    assert CalibrationThresholds.from_dict(t.to_dict()) == t
    with pytest.raises(ConfigurationError, match="min_rho"):
        CalibrationThresholds.from_dict({"min_rho": 0.3})


def _report() -> CalibrationReport:
    constant = judge_reference("flat", judge_agreement([0.5] * 60, X), CalibrationThresholds())
    verdict, passed = evaluate([GOOD, constant], CalibrationThresholds())
    return CalibrationReport(
        judge="llm:openai:gpt-4.1:rubric-v1",
        references=(GOOD, constant),
        task=None,
        since=None,
        threshold=0.5,
        thresholds=CalibrationThresholds(),
        verdict=verdict,
        passed=passed,
        n_bootstrap=2000,
        seed=20261121,
        scores={"good": tuple((float(a), float(a)) for a in X)},
    )


def test_report_json_is_strict_versioned_and_undefined_figures_are_null() -> None:
    data = _report().to_dict()
    assert next(iter(data)) == "version" and data["version"] == 1
    text = json.dumps(data, allow_nan=False)
    flat = data["references"][1]
    assert flat["spearman"]["value"] is None and "constant" in flat["spearman"]["reason"]
    assert "scores" not in data and "NaN" not in text
    assert len(_report().to_dict(include_scores=True)["scores"]["good"]) == 60


def test_plot_path_must_be_png_or_html_checked_before_matplotlib_loads(tmp_path: Path) -> None:
    loaded = "matplotlib" in sys.modules
    with pytest.raises(ConfigurationError, match=r"\.png or \.html"):
        write_plot(_report(), tmp_path / "plot.svg")
    assert ("matplotlib" in sys.modules) == loaded
    out = write_plot(_report(), tmp_path / "plot.png")
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_public_names_are_sorted_resolve_and_import_light() -> None:
    import subprocess

    import llm_connect.calibration as calibration

    exported = list(calibration.__all__)
    order = sorted(exported, key=lambda n: (0 if n.isupper() else 1 if n[:1].isupper() else 2, n))
    assert exported == order
    assert all(getattr(calibration, name) is not None for name in exported)
    probe = (
        "import sys, llm_connect.calibration\n"
        "print(sorted(m for m in ('scipy.stats', 'openai', 'matplotlib', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_reference_entry_says_its_verdict_not_the_agreements_status() -> None:
    refs = {r["reference"]: r for r in _report().to_dict()["references"]}
    assert refs["good"]["status"] == "pass" and refs["good"]["reasons"] == []
    assert refs["flat"]["status"] == "fail" and "Spearman undefined" in refs["flat"]["reasons"][0]
    assert refs["good"]["agreement_status"] == refs["flat"]["agreement_status"] == "ok"
