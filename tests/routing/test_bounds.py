"""The bounds behind every decision: validity checked by seeded simulation, not only by formula."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binomtest

from llm_connect.routing._bounds import cases_needed, clopper_pearson, lower_bound, mean_interval, upper_bound


def test_thirty_perfect_scores_do_not_prove_099() -> None:
    low = lower_bound([1.0] * 30, 0.05)
    assert low is not None and low < 0.9  # a valid bound for 30 scores is far below 0.99
    # One look at a fixed n, 0/1 scores: the exact binomial bound, 0.05 ** (1/30).
    assert lower_bound([1.0] * 30, 0.05, fixed_n=True) == pytest.approx(0.05 ** (1 / 30))


def test_clopper_pearson_matches_scipy_binomtest() -> None:
    for k, n in [(0, 10), (3, 10), (27, 30), (30, 30)]:
        low, high = clopper_pearson(k, n, 0.05)
        ci = binomtest(k, n).proportion_ci(confidence_level=0.90, method="exact")
        assert low == pytest.approx(ci.low) and high == pytest.approx(ci.high)


def test_upper_bound_mirrors_the_lower_bound() -> None:
    x = np.random.default_rng(1).beta(5, 2, 80)
    assert upper_bound(x, 0.05) == pytest.approx(1.0 - lower_bound(1.0 - x, 0.05))
    low, high = lower_bound(x, 0.05), upper_bound(x, 0.05)
    assert low < x.mean() < high


def test_the_anytime_lower_bound_never_falls_as_cases_accrue() -> None:
    x = np.random.default_rng(2).beta(9, 1, 300)
    bounds = [lower_bound(x[:k], 0.05) for k in range(1, 301)]
    assert all(b2 >= b1 for b1, b2 in itertools.pairwise(bounds))  # running maximum


def _ever_above(rng: np.random.Generator, draw, n: int, threshold: float, alpha: float, runs: int) -> int:
    # The bound is a running maximum: its final value is the highest it reached at any look.
    return sum(lower_bound(draw(rng, n), alpha) >= threshold for _ in range(runs))


@pytest.mark.parametrize(
    ("name", "draw", "mean"),
    [
        ("beta(9,1)", lambda rng, n: rng.beta(9.0, 1.0, n), 0.9),
        ("bernoulli(0.9)", lambda rng, n: (rng.random(n) < 0.9).astype(float), 0.9),
        ("two-point 0.8/1.0", lambda rng, n: np.where(rng.random(n) < 0.5, 0.8, 1.0), 0.9),
    ],
)
def test_repeated_looks_keep_the_error_rate(name: str, draw, mean: float) -> None:
    # True mean exactly at the threshold, a look after every case up to 500: the chance that the
    # bound ever reaches the threshold is at most alpha = 5%. 1,000 seeded runs; allowing 7.5%
    # leaves > 3.5 binomial standard deviations of margin even at a true rate of exactly 5%.
    runs = 1000
    hits = _ever_above(np.random.default_rng(11), draw, 500, mean, 0.05, runs)
    assert hits / runs <= 0.075, name


def test_fixed_n_interval_keeps_its_rate_at_one_look() -> None:
    rng = np.random.default_rng(5)
    runs = 2000
    hits = sum(lower_bound(rng.beta(9, 1, 60), 0.05, fixed_n=True) >= 0.9 for _ in range(runs))
    assert hits / runs <= 0.075


def test_a_clearly_better_candidate_is_proven() -> None:
    x = np.random.default_rng(3).beta(19.4, 0.6, 200)  # mean 0.97
    assert lower_bound(x, 0.05) >= 0.9


def test_paired_differences_interval_covers_the_mean_difference() -> None:
    rng = np.random.default_rng(4)
    d = np.clip(rng.normal(-0.04, 0.05, 400), -1.0, 1.0)
    low, high = mean_interval(d, 0.05, low=-1.0, high=1.0)
    assert low < d.mean() < high and high < 0.0  # "0.04 lower than the baseline" is a number


def test_cases_needed_projects_roughly_what_a_simulation_needs() -> None:
    # True mean 0.95 (Beta(19, 1)): the projection is within a factor 1.5 of the simulated median.
    rng = np.random.default_rng(6)
    a, b = 19.0, 1.0
    var = a * b / ((a + b) ** 2 * (a + b + 1))
    firsts = []
    for _ in range(100):
        x = rng.beta(a, b, 1000)
        firsts.append(next((k for k in range(10, 1001, 10) if lower_bound(x[:k], 0.05) >= 0.9), 1001))
    median = float(np.median(firsts))
    projected = cases_needed(0.95, var, 0.9, 0.05)
    assert projected is not None and median / 1.5 <= projected <= median * 1.5
    assert cases_needed(0.9, var, 0.9, 0.05) is None  # a mean at the threshold never settles
    assert cases_needed(0.80, var, 0.9, 0.05) is not None  # ruling out is projected too


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match=r"0\.\.1"):
        lower_bound([0.5, 1.2], 0.05)
    with pytest.raises(ValueError, match="alpha"):
        lower_bound([0.5], 1.0)
    assert lower_bound([], 0.05) is None and upper_bound([], 0.05) is None
