"""The batched path (every group of a decision at once) against the per-series reference.

``bounds_many``, ``cases_needed_many`` and ``assess_many`` must give what
``lower_bound``/``upper_bound``, ``cases_needed`` and the per-series
statistics give for each series alone: same bounds (to 1e-12), same statuses,
same ``cases_needed``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from llm_connect.ledger import CaseSeries
from llm_connect.routing._betting import cases_needed_many as betting_cases_needed
from llm_connect.routing._bounds import (
    bounds_many,
    cases_needed,
    cases_needed_many,
    continue_bounds,
    lower_bound,
    mean_interval,
    upper_bound,
)
from llm_connect.routing._evidence import INSUFFICIENT, PROVEN, RULED_OUT, UNDECIDED, assess, assess_many

TOL = 1e-12


def _random_series(rng: np.random.Generator, count: int) -> list[np.ndarray]:
    """Series of many lengths (1, 2, short, long, one very long) and kinds (continuous, 0/1, all equal)."""
    lengths = [1, 1, 2, 3, 7, 30, 31, 200, 257, 1000, 4500, *rng.integers(1, 600, count).tolist()]
    out: list[np.ndarray] = []
    for i, n in enumerate(lengths):
        kind = i % 5
        if kind == 0:
            x = rng.beta(9, 1, n)
        elif kind == 1:
            x = (rng.random(n) < 0.9).astype(float)  # binary
        elif kind == 2:
            x = np.full(n, rng.choice([0.0, 0.9, 1.0, 0.37]))  # all equal
        elif kind == 3:
            x = rng.random(n)
        else:
            x = np.clip(rng.normal(0.91, 0.05, n), 0.0, 1.0)
        out.append(x)
    return out


@pytest.mark.parametrize("fixed_n", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bounds_many_equals_the_per_series_bounds(seed: int, fixed_n: bool) -> None:
    rng = np.random.default_rng(seed)
    series = _random_series(rng, 40)
    alphas = [float(a) for a in rng.choice([0.05, 0.01, 0.025, 0.001], len(series))]
    lows, highs = bounds_many([*series, []], [*alphas, 0.05], fixed_n=fixed_n)
    assert lows[-1] is None and highs[-1] is None  # an empty series has no bound
    for x, a, low, high in zip(series, alphas, lows, highs, strict=False):
        ref_low = lower_bound(x, a, fixed_n=fixed_n)
        ref_high = upper_bound(x, a, fixed_n=fixed_n)
        assert low is not None and ref_low is not None and abs(low - ref_low) <= TOL, (x.size, low, ref_low)
        assert high is not None and ref_high is not None and abs(high - ref_high) <= TOL


def test_bounds_many_checks_its_input_like_the_reference() -> None:
    with pytest.raises(ValueError, match=r"0\.\.1"):
        bounds_many([[0.5], [1.5]], [0.05, 0.05])
    with pytest.raises(ValueError, match="alpha"):
        bounds_many([[0.5]], [1.0])
    with pytest.raises(ValueError, match="one alpha per series"):
        bounds_many([[0.5]], [0.05, 0.05])


@pytest.mark.parametrize("fixed_n", [False, True])
def test_cases_needed_many_equals_cases_needed(fixed_n: bool) -> None:
    rng = np.random.default_rng(5)
    means = [0.9, 0.0, 1.0, *rng.uniform(0.7, 1.0, 60).tolist()]
    variances = [0.0, 0.0, 0.0, *rng.uniform(0.0, 0.05, 60).tolist()]
    for threshold, alpha in [(0.9, 0.01), (0.85, 0.05)]:
        got = cases_needed_many(means, variances, threshold, alpha, fixed_n=fixed_n)
        want = [
            cases_needed(m, v, threshold, alpha, fixed_n=fixed_n)
            for m, v in zip(means, variances, strict=True)
        ]
        assert got == want
    assert cases_needed_many([], [], 0.9, 0.05) == []


def _series(rng: np.random.Generator, x: np.ndarray, *, with_delta: bool) -> CaseSeries:
    """A CaseSeries whose per-case values are ``x``: some cases graded twice, some with deltas."""
    grades = rng.integers(1, 4, x.size)
    delta_n = (rng.random(x.size) < 0.7).astype(int) * grades if with_delta else np.zeros(x.size, int)
    delta_sum = np.where(delta_n > 0, rng.uniform(-0.3, 0.2, x.size) * delta_n, 0.0)
    return CaseSeries(
        task="t",
        baseline_model="base",
        grader_id="g",
        candidate_model="m",
        grades=tuple(int(g) for g in grades),
        sum_quality=tuple(float(v) for v in x * grades),
        delta_n=tuple(int(d) for d in delta_n),
        delta_sum=tuple(float(d) for d in delta_sum),
    )


def _reference(
    series: CaseSeries,
    *,
    min_quality: float,
    min_samples: int,
    alpha: float,
    confidence: float,
    fixed_n: bool,
) -> dict[str, Any]:
    """What assess computed one series at a time before the batched path (the same formulas)."""
    grades = np.asarray(series.grades, dtype=float)
    values = np.clip(np.asarray(series.sum_quality, dtype=float) / grades, 0.0, 1.0)
    n = values.size
    mean, var = float(values.mean()), float(values.var())
    # anytime: the betting sequence aimed at the threshold; one look: the single-look interval
    aim = None if fixed_n else min_quality
    low = lower_bound(values, alpha, fixed_n=fixed_n, threshold=aim)
    high = upper_bound(values, alpha, fixed_n=fixed_n, threshold=aim)
    assert low is not None and high is not None
    counts = np.asarray(series.delta_n, dtype=float)
    has = counts > 0
    delta: tuple[Any, ...] = (None, None, None, 0)
    if has.any():
        deltas = np.asarray(series.delta_sum, dtype=float)[has] / counts[has]
        delta = (
            float(deltas.mean()),
            *mean_interval(deltas, 1.0 - confidence, low=-1.0, high=1.0, fixed_n=fixed_n),
            int(has.sum()),
        )
    needed = None
    if high < min_quality:
        status = RULED_OUT
    elif low >= min_quality and n >= min_samples:
        status = PROVEN
    elif low >= min_quality:
        status, needed = INSUFFICIENT, min_samples
    else:
        status = INSUFFICIENT if n < min_samples else UNDECIDED
        projected = (
            cases_needed(mean, var, min_quality, alpha, fixed_n=True)
            if fixed_n
            else betting_cases_needed([mean], [var], [min_quality], alpha)[0]
        )
        needed = None if projected is None else max(projected, min_samples, n + 1)
    return {
        "n": n,
        "n_grades": int(grades.sum()),
        "mean": mean,
        "std": float(values.std(ddof=1)) if n > 1 else None,
        "lower_bound": low,
        "upper_bound": high,
        "status": status,
        "cases_needed": needed,
        "delta_mean": delta[0],
        "delta_low": delta[1],
        "delta_high": delta[2],
        "delta_cases": delta[3],
    }


@pytest.mark.parametrize("fixed_n", [False, True])
@pytest.mark.parametrize("seed", [3, 4])
def test_assess_many_equals_the_per_series_reference(seed: int, fixed_n: bool) -> None:
    rng = np.random.default_rng(seed)
    xs = _random_series(rng, 30)
    items: list[tuple[CaseSeries | None, str]] = [
        (_series(rng, x, with_delta=i % 3 == 0), f"g{i}") for i, x in enumerate(xs)
    ]
    items.insert(4, (None, "none"))  # no grades, among the others
    settings: dict[str, Any] = {
        "min_quality": 0.9,
        "min_samples": 30,
        "alpha": 0.0125,
        "confidence": 0.95,
        "fixed_n": fixed_n,
    }
    got = assess_many(items, **settings)
    statuses: set[str] = set()
    for (series, grader_id), ev in zip(items, got, strict=True):
        assert ev.grader_id == grader_id
        if series is None:
            assert ev.n == 0 and ev.mean is None and ev.lower_bound is None
            continue
        ref = _reference(series, **settings)
        statuses.add(ev.status)
        assert (ev.n, ev.n_grades, ev.status, ev.cases_needed, ev.delta_cases) == (
            ref["n"],
            ref["n_grades"],
            ref["status"],
            ref["cases_needed"],
            ref["delta_cases"],
        )
        for field in ("mean", "std", "lower_bound", "upper_bound", "delta_mean", "delta_low", "delta_high"):
            value, want = getattr(ev, field), ref[field]
            assert (value is None) == (want is None), field
            if want is not None:
                assert abs(value - want) <= TOL, (field, value, want)
        # one series alone through assess gives the same evidence
        assert assess(series, grader_id, **settings) == ev
    assert {PROVEN, RULED_OUT, UNDECIDED, INSUFFICIENT} <= statuses  # every branch was compared


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_continued_bounds_equal_the_whole_series_bit_for_bit(seed: int) -> None:
    """A bound continued from running sums over a series fed in pieces (a routing loop: a few new
    cases at a time) is the whole series' bound exactly, not approximately."""
    rng = np.random.default_rng(seed)
    series = _random_series(rng, 8)
    alphas = [float(a) for a in rng.uniform(0.001, 0.2, len(series))]
    lows, highs = bounds_many(series, alphas)
    cuts = [np.sort(rng.integers(0, x.size + 1, 3)) for x in series]
    starts: list[Any] = [None] * len(series)
    for piece in range(4):
        new = [
            x[np.r_[0, c, x.size][piece] : np.r_[0, c, x.size][piece + 1]]
            for x, c in zip(series, cuts, strict=True)
        ]
        got_lows, got_highs, starts = continue_bounds(new, alphas, starts)
    assert got_lows == lows and got_highs == highs
    assert [s[0].t for s in starts] == [x.size for x in series]
    # Nothing new: the same bounds again, from the sums alone.
    again = continue_bounds([x[:0] for x in series], alphas, starts)
    assert again[0] == lows and again[1] == highs
