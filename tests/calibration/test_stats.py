"""Agreement statistics match scipy/numpy on fixed data; undefined figures are None, never NaN."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from llm_connect.calibration import MIN_PAIRS, judge_agreement, pass_fail_kappa
from llm_connect.calibration._stats import (
    _kendall_rows,
    _pearson_rows,
    _spearman_rows,
    bootstrap_indices,
    confusion_matrix,
    estimate_from_replicates,
    kendall_tau,
    mean_abs_diff,
    pearson,
    spearman,
)

# Fixed data with ties on both sides (LLM judges answer in steps of 0.1).
JUDGE = [0.9, 0.8, 0.8, 0.3, 1.0, 0.5, 0.5, 0.2, 0.7, 0.9, 0.4, 0.6, 0.8, 0.1, 0.5]
REF = [0.85, 0.7, 0.9, 0.2, 0.95, 0.55, 0.4, 0.3, 0.6, 0.9, 0.5, 0.45, 0.8, 0.3, 0.5]


def test_point_estimates_equal_scipy_with_ties() -> None:
    assert pearson(JUDGE, REF) == (pytest.approx(stats.pearsonr(JUDGE, REF).statistic, abs=1e-15), None)
    assert spearman(JUDGE, REF) == (pytest.approx(stats.spearmanr(JUDGE, REF).statistic, abs=1e-15), None)
    assert kendall_tau(JUDGE, REF) == (pytest.approx(stats.kendalltau(JUDGE, REF).statistic, abs=1e-15), None)
    assert mean_abs_diff(JUDGE, REF) == pytest.approx(float(np.mean(np.abs(np.subtract(JUDGE, REF)))))


def test_kappa_and_confusion_match_the_textbook_formula() -> None:
    cm = confusion_matrix(JUDGE, REF, 0.5)
    a, b, c, d = cm.both_pass, cm.judge_pass_ref_fail, cm.judge_fail_ref_pass, cm.both_fail
    n = a + b + c + d
    assert n == len(JUDGE)
    assert (a, b, c, d) == (9, 2, 1, 3)  # counted by hand: pass means score >= 0.5
    po = (a + d) / n
    pe = ((a + b) / n) * ((a + c) / n) + ((c + d) / n) * ((b + d) / n)
    value, reason = pass_fail_kappa(JUDGE, REF, 0.5)
    assert reason is None
    assert value == pytest.approx((po - pe) / (1 - pe))
    assert cm.to_dict()["matrix"] == [[a, b], [c, d]]


def test_threshold_is_inclusive() -> None:
    cm = confusion_matrix([0.5, 0.49], [0.5, 0.5], 0.5)
    assert (cm.both_pass, cm.judge_fail_ref_pass) == (1, 1)


@pytest.mark.parametrize(
    ("x", "y", "who"),
    [
        ([0.5] * 12, list(np.linspace(0, 1, 12)), "the judge's scores are constant"),
        (list(np.linspace(0, 1, 12)), [1.0] * 12, "the reference's scores are constant"),
        ([1.0] * 12, [1.0] * 12, "both judges' scores are constant"),
    ],
)
def test_constant_scores_give_undefined_correlations_not_nan(
    x: list[float], y: list[float], who: str
) -> None:
    result = judge_agreement(x, y)
    for name in ("pearson", "spearman", "kendall_tau"):
        est = getattr(result, name)
        assert est.value is None and est.ci_low is None and est.ci_high is None
        assert est.reason is not None and who in est.reason
    assert result.mean_abs_diff.value is not None
    text = json.dumps(result.to_dict(), allow_nan=False)  # strict JSON: raises on NaN
    assert "NaN" not in text


def test_kappa_undefined_when_every_verdict_is_the_same() -> None:
    value, reason = pass_fail_kappa([0.9] * 5, [0.8] * 5, 0.5)
    assert value is None and reason is not None and "same verdict" in reason
    # opposite constant verdicts: p_e = 0, kappa defined and 0 - agreement no better than chance
    assert pass_fail_kappa([0.9] * 5, [0.1] * 5, 0.5) == (0.0, None)


def test_fewer_than_the_minimum_pairs_is_insufficient_data() -> None:
    result = judge_agreement(JUDGE[: MIN_PAIRS - 1], REF[: MIN_PAIRS - 1])
    assert result.status == "insufficient data"
    assert result.n == MIN_PAIRS - 1
    assert result.spearman.value is None and "insufficient data" in (result.spearman.reason or "")
    assert result.confusion is None
    assert judge_agreement(JUDGE[:MIN_PAIRS], REF[:MIN_PAIRS]).status == "ok"


def test_tiny_samples_are_computed_when_the_minimum_allows() -> None:
    # Two pairs: scipy defines r = rho = tau = 1 for two increasing points.
    result = judge_agreement([0.1, 0.9], [0.2, 0.8], min_pairs=2, n_boot=200)
    assert result.pearson.value == pytest.approx(1.0)
    assert result.kendall_tau.value == pytest.approx(1.0)
    # most resamples of 2 points hold one point twice: the interval is refused, with a reason
    assert result.pearson.ci_low is None and "bootstrap" in (result.pearson.reason or "")
    assert pearson([0.3], [0.4]) == (None, "Pearson's r needs at least 2 pairs")


def test_bootstrap_is_reproducible_and_seeded() -> None:
    first = judge_agreement(JUDGE, REF).to_dict()
    assert judge_agreement(JUDGE, REF).to_dict() == first
    other = judge_agreement(JUDGE, REF, seed=7).to_dict()
    assert other["spearman"]["value"] == first["spearman"]["value"]
    assert other["spearman"]["ci_low"] != first["spearman"]["ci_low"]


def test_intervals_contain_the_estimate_on_informative_data() -> None:
    rng = np.random.default_rng(1)
    x = rng.random(80)
    y = np.clip(x + rng.normal(0, 0.15, 80), 0, 1)
    result = judge_agreement(x, y)
    for name in ("pearson", "spearman", "kendall_tau", "mean_abs_diff", "cohen_kappa", "agreement_rate"):
        est = getattr(result, name)
        assert est.ci_low is not None and est.ci_high is not None, name
        assert est.ci_low <= est.value <= est.ci_high, name  # type: ignore[operator]


def test_vectorised_replicates_equal_scipy_on_each_resample() -> None:
    x = np.array(JUDGE)
    y = np.array(REF)
    idx = bootstrap_indices(x.size, n_boot=300, seed=11)
    pr, sr, kr = _pearson_rows(x[idx], y[idx]), _spearman_rows(x[idx], y[idx]), _kendall_rows(x, y, idx)
    checked = 0
    for b in range(idx.shape[0]):
        xb, yb = x[idx[b]], y[idx[b]]
        if np.ptp(xb) == 0 or np.ptp(yb) == 0:
            assert math.isnan(pr[b]) and math.isnan(kr[b])
            continue
        assert pr[b] == pytest.approx(stats.pearsonr(xb, yb).statistic, abs=1e-12)
        assert sr[b] == pytest.approx(stats.spearmanr(xb, yb).statistic, abs=1e-12)
        assert kr[b] == pytest.approx(stats.kendalltau(xb, yb).statistic, abs=1e-12)
        checked += 1
    assert checked > 250


def test_interval_is_the_2_5_and_97_5_percentile_of_defined_replicates() -> None:
    reps = np.arange(100, dtype=float)
    est = estimate_from_replicates(50.0, reps)
    assert (est.ci_low, est.ci_high) == (
        pytest.approx(np.percentile(reps, 2.5)),
        pytest.approx(np.percentile(reps, 97.5)),
    )
    some_nan = np.concatenate([reps, [np.nan] * 5])  # under 10% undefined: ignored
    assert estimate_from_replicates(50.0, some_nan).ci_low == est.ci_low
    many_nan = np.concatenate([reps, [np.nan] * 20])
    refused = estimate_from_replicates(50.0, many_nan)
    assert refused.ci_low is None and "undefined in" in (refused.reason or "")


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="same length"):
        judge_agreement([0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="finite"):
        judge_agreement([0.1, float("nan")], [0.1, 0.2], min_pairs=1)


def test_confusion_cells_carry_rates_with_intervals() -> None:
    cm = judge_agreement(JUDGE, REF).confusion
    assert cm is not None
    assert cm.rates["both_pass"].value == pytest.approx(cm.both_pass / cm.n)
    assert sum(e.value for e in cm.rates.values() if e.value is not None) == pytest.approx(1.0)
    for est in cm.rates.values():
        assert est.ci_low is not None and est.ci_high is not None
        assert est.ci_low <= est.value <= est.ci_high  # type: ignore[operator]


def test_kendall_replicates_above_the_pairwise_limit_use_scipy_per_resample() -> None:
    from llm_connect.calibration._stats import _PAIRWISE_LIMIT

    rng = np.random.default_rng(4)
    n = _PAIRWISE_LIMIT + 100
    x = np.round(rng.random(n), 2)
    y = np.round(x + rng.normal(0, 0.3, n), 2)
    idx = bootstrap_indices(n, n_boot=5, seed=2)
    reps = _kendall_rows(x, y, idx)
    for b in range(5):
        assert reps[b] == pytest.approx(stats.kendalltau(x[idx[b]], y[idx[b]]).statistic, abs=1e-12)


def test_the_old_names_still_work_for_one_release_with_a_warning() -> None:
    import llm_connect.calibration as calibration
    from llm_connect.calibration import JudgeAgreement

    with pytest.warns(DeprecationWarning, match="renamed JudgeAgreement"):
        assert calibration.Agreement is JudgeAgreement
    with pytest.warns(DeprecationWarning, match="renamed judge_agreement"):
        assert calibration.agreement is judge_agreement
    assert "Agreement" not in calibration.__all__ and "agreement" not in calibration.__all__
