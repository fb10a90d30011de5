"""Confidence bounds for the mean of scores in [0, 1], valid at any number of looks.

The bound used by default is the *predictable plug-in empirical-Bernstein
confidence sequence* of Waudby-Smith & Ramdas, "Estimating means of bounded
random variables by betting", JRSS-B 86(1), 2024 (arXiv:2010.09686),
Theorem 2, in its one-sided form. For observations ``x_1..x_t`` in [0, 1]
with common mean ``mu`` and any bets ``lambda_i`` in [0, 1) fixed before
``x_i`` is seen,

    P( exists t:  mu < (sum lambda_i x_i - log(1/alpha) - sum v_i psi(lambda_i)) / sum lambda_i ) <= alpha

with ``v_i = 4 (x_i - mu_hat_{i-1})^2`` and ``psi(l) = (-log(1 - l) - l) / 4``:
the process ``prod exp(lambda_i (x_i - mu) - v_i psi(lambda_i))`` is a
non-negative supermartingale, and Ville's inequality bounds the chance it
ever reaches ``1/alpha``. Because the statement holds for all ``t`` at once,
the running maximum of the lower bounds is valid too, and so is asking for
the bound after every new observation.

Bets follow the paper's recommendation, tuned for a one-sided ``alpha``::

    lambda_t = min(c, sqrt(2 log(1/alpha) / (sigma2_{t-1} t log(1 + t))))
    mu_hat_t = (1/2 + sum_{i<=t} x_i) / (t + 1)
    sigma2_t = (1/4 + sum_{i<=t} (x_i - mu_hat_i)^2) / (t + 1)

with truncation ``c = 3/4`` (:data:`TRUNCATION`). The upper bound is the
lower bound of ``1 - x``, mapped back.

``fixed_n=True`` gives the single-look confidence interval of the same paper
(bets tuned for the sample size, ``lambda_t = min(c, sqrt(2 log(1/alpha) /
(n sigma2_{t-1})))``, no running maximum), valid for one look at a sample
size fixed in advance. For 0/1 scores it is the exact Clopper-Pearson bound
(``scipy.stats.beta``).

:func:`cases_needed` projects how many cases a bound needs before it crosses
a threshold, if future cases look like those seen so far (their mean and
variance): the expected value of each sum above, summed exactly for the first
cases and by the trapezoid rule over a geometric grid beyond.

:func:`bounds_many` and :func:`cases_needed_many` compute the same for many
series at once (one decision assesses every candidate x grader): the series
are padded into the rows of one matrix and every running sum is a cumulative
sum along a row, so each row's figures are those of :func:`lower_bound`,
:func:`upper_bound` and :func:`cases_needed` (the same operations in the same
order; ``tests/routing/test_bounds_many.py`` checks them against each other).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_connect.routing._sizes import running_sums, sample_sizes

__all__ = [
    "TRUNCATION",
    "RunningBound",
    "bounds_many",
    "cases_needed",
    "cases_needed_many",
    "clopper_pearson",
    "continue_bounds",
    "lower_bound",
    "mean_interval",
    "upper_bound",
]

TRUNCATION = 0.75
"""``c``: the largest bet; any value in (0, 1) keeps the guarantee (the paper suggests 1/2 or 3/4)."""


def _np() -> Any:
    import numpy

    return numpy


def _bets(x: Any, log_inv_alpha: float, fixed_n: bool) -> tuple[Any, Any]:
    """The bets ``lambda_t`` and the centres ``mu_hat_{t-1}`` for the observations ``x``."""
    np = _np()
    n = x.shape[0]
    t = np.arange(1, n + 1, dtype=float)
    mu_hat = (0.5 + np.cumsum(x)) / (t + 1.0)
    sigma2 = (0.25 + np.cumsum((x - mu_hat) ** 2)) / (t + 1.0)
    mu_prev = np.concatenate(([0.5], mu_hat[:-1]))
    sigma2_prev = np.concatenate(([0.25], sigma2[:-1]))
    scale = float(n) if fixed_n else t * np.log1p(t)
    lam = np.sqrt(2.0 * log_inv_alpha / (sigma2_prev * scale))
    return np.minimum(lam, TRUNCATION), mu_prev


def _eb_lower(x: Any, alpha: float, fixed_n: bool) -> float:
    np = _np()
    log_inv_alpha = math.log(1.0 / alpha)
    lam, mu_prev = _bets(x, log_inv_alpha, fixed_n)
    psi = (-np.log1p(-lam) - lam) / 4.0
    v = 4.0 * (x - mu_prev) ** 2
    if fixed_n:
        low = (float(np.dot(lam, x)) - log_inv_alpha - float(np.dot(v, psi))) / float(lam.sum())
    else:
        lows = (np.cumsum(lam * x) - log_inv_alpha - np.cumsum(v * psi)) / np.cumsum(lam)
        low = float(lows.max())
    return min(1.0, max(0.0, low))


_PAD_SLACK = 4096
"""Padding cells a batch of :func:`_eb_lower_many` may waste beyond doubling its real cells."""


@dataclass(frozen=True, slots=True)
class RunningBound:
    """The anytime lower bound of one series at one ``alpha`` after ``t`` observations, as
    running sums: what :func:`continue_bounds` needs to extend the bound by new observations
    without the old ones. Every sum is the running sum the full computation reaches at ``t``
    (``np.cumsum`` adds in order), so a continued bound equals the bound of the whole series
    bit for bit."""

    t: int = 0
    sum_x: float = 0.0
    sum_sq: float = 0.0
    """Σ (x_i - mu_hat_i)², the variance estimate's numerator."""
    sum_lam_x: float = 0.0
    sum_v_psi: float = 0.0
    sum_lam: float = 0.0
    best: float = -math.inf
    """The running maximum of the (unclipped) lower bounds."""

    @property
    def lower(self) -> float | None:
        """The bound so far (``None`` before the first observation)."""
        return None if self.t == 0 else min(1.0, max(0.0, self.best))


_START = RunningBound()


def _eb_lower_rows(
    xs: Sequence[Any], log_inv_alpha: Any, fixed_n: bool, starts: Sequence[RunningBound] | None = None
) -> tuple[Any, list[RunningBound] | None]:
    """:func:`_eb_lower` of each of ``xs`` (non-empty), padded into the rows of one matrix, and
    (anytime bounds) each row's running sums at its end.

    ``starts`` continue rows from earlier observations (:class:`RunningBound`; anytime bounds
    only): ``xs`` are then the observations after them. The padding (zeros after each series)
    never reaches a real cell: every running sum is a cumulative sum along the row, the maximum
    skips it, and the fixed-n bound is read at the row's last case.
    """
    np = _np()
    k = len(xs)
    lengths = np.fromiter((x.shape[0] for x in xs), dtype=np.intp, count=k)
    width = int(lengths.max())
    real = np.arange(width) < lengths[:, None]
    x = np.zeros((k, width))
    x[real] = np.concatenate(xs)
    lia = log_inv_alpha[:, None]
    starts = starts if starts is not None else [_START] * k
    t0 = np.fromiter((s.t for s in starts), dtype=float, count=k)[:, None]

    def running(first: Any, values: Any) -> Any:
        # cumulative sums continued from each row's start (sequential adds, as over the whole series)
        return np.cumsum(np.concatenate((first[:, None], values), axis=1), axis=1)[:, 1:]

    def column(field: str) -> Any:
        return np.fromiter((getattr(s, field) for s in starts), dtype=float, count=k)

    t = t0 + np.arange(1, width + 1, dtype=float)
    sum_x0, sum_sq0 = column("sum_x"), column("sum_sq")
    sum_x = running(sum_x0, x)
    mu_hat = (0.5 + sum_x) / (t + 1.0)
    sum_sq = running(sum_sq0, (x - mu_hat) ** 2)
    sigma2 = (0.25 + sum_sq) / (t + 1.0)
    # The estimates before each row's first new observation (a fresh row: exactly 0.5 and 0.25).
    mu_start = (0.5 + sum_x0[:, None]) / (t0 + 1.0)
    sigma2_start = (0.25 + sum_sq0[:, None]) / (t0 + 1.0)
    mu_prev = np.concatenate((mu_start, mu_hat[:, :-1]), axis=1)
    sigma2_prev = np.concatenate((sigma2_start, sigma2[:, :-1]), axis=1)
    scale = lengths[:, None].astype(float) if fixed_n else t * np.log1p(t)
    lam = np.minimum(np.sqrt(2.0 * lia / (sigma2_prev * scale)), TRUNCATION)
    psi = (-np.log1p(-lam) - lam) / 4.0
    v = 4.0 * (x - mu_prev) ** 2
    sum_lam_x = running(column("sum_lam_x"), lam * x)
    sum_v_psi = running(column("sum_v_psi"), v * psi)
    sum_lam = running(column("sum_lam"), lam)
    lows = (sum_lam_x - lia - sum_v_psi) / sum_lam
    rows = np.arange(k)
    last = lengths - 1
    if fixed_n:  # the bound at the row's last case (sequential sums: the same with or without padding)
        return np.minimum(1.0, np.maximum(0.0, lows[rows, last])), None
    best = np.maximum(column("best"), np.where(real, lows, -np.inf).max(axis=1))
    ends = [
        RunningBound(
            t=starts[i].t + int(lengths[i]),
            sum_x=float(sum_x[i, last[i]]),
            sum_sq=float(sum_sq[i, last[i]]),
            sum_lam_x=float(sum_lam_x[i, last[i]]),
            sum_v_psi=float(sum_v_psi[i, last[i]]),
            sum_lam=float(sum_lam[i, last[i]]),
            best=float(best[i]),
        )
        for i in range(k)
    ]
    return np.minimum(1.0, np.maximum(0.0, best)), ends


def _eb_lower_many(
    xs: Sequence[Any], log_inv_alpha: Any, fixed_n: bool, starts: Sequence[RunningBound] | None = None
) -> tuple[Any, list[RunningBound] | None]:
    """:func:`_eb_lower_rows` of ``xs`` (non-empty), in batches of similar length (longest
    first) so that padding at most doubles the work."""
    np = _np()
    out = np.empty(len(xs))
    ends: list[RunningBound] | None = None if fixed_n else [_START] * len(xs)
    lengths = [x.shape[0] for x in xs]
    order = sorted(range(len(xs)), key=lambda i: -lengths[i])
    start = 0
    while start < len(order):
        width, stop, cells = lengths[order[start]], start + 1, lengths[order[start]]
        while (
            stop < len(order)
            and width * (stop - start + 1) <= 2 * (cells + lengths[order[stop]]) + _PAD_SLACK
        ):
            cells += lengths[order[stop]]
            stop += 1
        rows = order[start:stop]
        got, batch_ends = _eb_lower_rows(
            [xs[i] for i in rows],
            log_inv_alpha[rows],
            fixed_n,
            None if starts is None else [starts[i] for i in rows],
        )
        out[rows] = got
        if ends is not None and batch_ends is not None:
            for i, end in zip(rows, batch_ends, strict=True):
                ends[i] = end
        start = stop
    return out, ends


def continue_bounds(
    new: Sequence[Any], alphas: Sequence[float], starts: Sequence[tuple[RunningBound, RunningBound] | None]
) -> tuple[list[float | None], list[float | None], list[tuple[RunningBound, RunningBound]]]:
    """Anytime ``(lower, upper)`` bounds of series given by their new observations ``new[i]``
    after ``starts[i]`` (the (lower, mirrored upper) running sums of what came before; ``None``:
    nothing before), each at ``alphas[i]``; returns the bounds and the running sums to continue
    from next time. Equal, bit for bit, to :func:`bounds_many` over each whole series.
    """
    np = _np()
    xs = [np.asarray(x, dtype=float) for x in new]
    pairs = [s if s is not None else (_START, _START) for s in starts]
    lows: list[float | None] = [p[0].lower for p in pairs]
    highs: list[float | None] = [None if p[1].lower is None else 1.0 - p[1].lower for p in pairs]
    todo = [i for i, x in enumerate(xs) if x.size]
    ends = list(pairs)
    if not todo:
        return lows, highs, ends
    _as_array(np.concatenate([xs[i] for i in todo]))  # one range check for all
    log_inv_alpha = np.array([math.log(1.0 / alphas[i]) for i in todo])
    got, got_ends = _eb_lower_many(
        [xs[i] for i in todo] + [1.0 - xs[i] for i in todo],
        np.concatenate((log_inv_alpha, log_inv_alpha)),
        False,
        [pairs[i][0] for i in todo] + [pairs[i][1] for i in todo],
    )
    assert got_ends is not None
    for k, i in enumerate(todo):
        lows[i] = float(got[k])
        highs[i] = 1.0 - float(got[len(todo) + k])
        ends[i] = (got_ends[k], got_ends[len(todo) + k])
    return lows, highs, ends


def bounds_many(
    series: Sequence[Any], alphas: Sequence[float], *, fixed_n: bool = False
) -> tuple[list[float | None], list[float | None]]:
    """``([lower_bound(x, a)...], [upper_bound(x, a)...])`` for each series ``x`` at its ``a``.

    The same bounds as :func:`lower_bound` and :func:`upper_bound` (``None``
    for an empty series), computed together: each series and its mirror
    ``1 - x`` is a row of one padded matrix.
    """
    np = _np()
    if len(series) != len(alphas):
        raise ValueError("one alpha per series")
    for alpha in alphas:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie strictly between 0 and 1, not {alpha!r}")
    xs = [np.asarray(x, dtype=float) for x in series]
    if any(x.ndim != 1 for x in xs):
        raise ValueError("scores must be a one-dimensional sequence")
    lows: list[float | None] = [None] * len(xs)
    highs: list[float | None] = [None] * len(xs)
    todo = [i for i, x in enumerate(xs) if x.size]
    if not todo:
        return lows, highs
    _as_array(np.concatenate([xs[i] for i in todo]))  # one range check for all
    if fixed_n:  # 0/1 scores at one look: the exact binomial bound
        binary = [i for i in todo if _is_binary(xs[i])]
        for i in binary:
            lows[i], highs[i] = clopper_pearson(int(xs[i].sum()), int(xs[i].size), alphas[i])
        exact = set(binary)
        todo = [i for i in todo if i not in exact]
        if not todo:
            return lows, highs
    log_inv_alpha = np.array([math.log(1.0 / alphas[i]) for i in todo])
    got, _ = _eb_lower_many(
        [xs[i] for i in todo] + [1.0 - xs[i] for i in todo],
        np.concatenate((log_inv_alpha, log_inv_alpha)),
        fixed_n,
    )
    for k, i in enumerate(todo):
        lows[i] = float(got[k])
        highs[i] = 1.0 - float(got[len(todo) + k])
    return lows, highs


def _is_binary(x: Any) -> bool:
    np = _np()
    return bool(np.all((x == 0.0) | (x == 1.0)))


def clopper_pearson(successes: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided exact binomial bounds ``(low, high)``, each at level ``1 - alpha`` (one look)."""
    from scipy.stats import beta

    low = 0.0 if successes == 0 else float(beta.ppf(alpha, successes, n - successes + 1))
    high = 1.0 if successes == n else float(beta.ppf(1.0 - alpha, successes + 1, n - successes))
    return low, high


def _as_array(values: Any) -> Any:
    np = _np()
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError("scores must be a one-dimensional sequence")
    if x.size and (not np.all(np.isfinite(x)) or x.min() < 0.0 or x.max() > 1.0):
        raise ValueError("scores must lie in 0..1")
    return x


def _bound(values: Any, alpha: float, fixed_n: bool, side: int, threshold: float | None) -> float | None:
    """The lower (``side`` 0) or upper (``side`` 1) bound; an upper bound of ``x`` is one minus
    the lower bound of ``1 - x``."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, not {alpha!r}")
    x = _as_array(values)
    if x.size == 0:
        return None
    if fixed_n and _is_binary(x):
        return clopper_pearson(int(x.sum()), int(x.size), alpha)[side]
    if threshold is not None and not fixed_n:
        from llm_connect.routing._betting import betting_bounds

        lows, highs, _ = betting_bounds([x], [alpha], [threshold], [None])
        return (lows if side == 0 else highs)[0]
    return _eb_lower(x, alpha, fixed_n) if side == 0 else 1.0 - _eb_lower(1.0 - x, alpha, fixed_n)


def lower_bound(
    values: Any, alpha: float, *, fixed_n: bool = False, threshold: float | None = None
) -> float | None:
    """A lower confidence bound for the mean of ``values`` (in [0, 1], in the order observed).

    The chance that the true mean lies below it is at most ``alpha``: at every
    sample size at once (default), or for this one sample size
    (``fixed_n=True``). ``None`` without values. With a ``threshold`` (anytime
    bounds), the betting sequence aimed at it that routing decides with
    (:mod:`~llm_connect.routing._betting`); without, the empirical-Bernstein sequence.
    """
    return _bound(values, alpha, fixed_n, 0, threshold)


def upper_bound(
    values: Any, alpha: float, *, fixed_n: bool = False, threshold: float | None = None
) -> float | None:
    """An upper confidence bound for the mean (the lower bound of ``1 - values``, mapped back)."""
    return _bound(values, alpha, fixed_n, 1, threshold)


def mean_interval(
    values: Any, alpha: float, *, low: float = 0.0, high: float = 1.0, fixed_n: bool = False
) -> tuple[float | None, float | None]:
    """A two-sided ``1 - alpha`` interval for the mean of ``values`` in ``[low, high]``.

    Rescales to [0, 1] and spends ``alpha / 2`` on each side (used for paired
    differences, which lie in [-1, 1]).
    """
    np = _np()
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None, None
    width = high - low
    unit = np.clip((x - low) / width, 0.0, 1.0)
    lo = lower_bound(unit, alpha / 2.0, fixed_n=fixed_n)
    hi = upper_bound(unit, alpha / 2.0, fixed_n=fixed_n)
    assert lo is not None and hi is not None
    return low + width * lo, low + width * hi


# -- projection ---------------------------------------------------------------------------


def _projected_lower(mean: float, var: float, alpha: float, fixed_n: bool) -> Any:
    """The expected lower bound at each of :func:`~llm_connect.routing._sizes.sample_sizes`, for
    data of this mean and variance."""
    np = _np()
    t = sample_sizes()
    log_inv_alpha = math.log(1.0 / alpha)
    var = max(var, 1e-6)
    # Expected running estimates after t observations of mean `mean` and variance `var`.
    mu_prev = (0.5 + (t - 1.0) * mean) / t
    sigma2_prev = (0.25 + (t - 1.0) * var) / t
    ev = 4.0 * (var + (mean - mu_prev) ** 2)
    if fixed_n:  # one look at n = t: every bet is tuned for that n
        lam = np.minimum(TRUNCATION, np.sqrt(2.0 * log_inv_alpha / (t * max(var, 1e-6))))
        psi = (-np.log1p(-lam) - lam) / 4.0
        return mean - (log_inv_alpha + t * 4.0 * var * psi) / (t * lam)
    lam = np.minimum(TRUNCATION, np.sqrt(2.0 * log_inv_alpha / (sigma2_prev * t * np.log1p(t))))
    psi = (-np.log1p(-lam) - lam) / 4.0
    sum_lam = running_sums(lam[None, :])[0]
    sum_vpsi = running_sums((ev * psi)[None, :])[0]
    return mean - (log_inv_alpha + sum_vpsi) / sum_lam


def cases_needed(
    mean: float, var: float, threshold: float, alpha: float, *, fixed_n: bool = False
) -> int | None:
    """Roughly how many cases in all a bound needs to settle ``mean`` against ``threshold``.

    For ``mean >= threshold``: the sample size at which the expected lower
    bound reaches ``threshold``; otherwise where the expected upper bound falls
    below it. Assumes future cases share the observed ``mean`` and ``var``.
    ``None`` when it would take more than ten million cases (or ``mean``
    equals ``threshold``).
    """
    if mean == threshold:  # neither bound ever crosses it
        return None
    np = _np()
    if mean > threshold:
        hits = np.nonzero(_projected_lower(mean, var, alpha, fixed_n) >= threshold)[0]
    else:  # mirror: an upper bound of x is one minus a lower bound of 1 - x
        hits = np.nonzero(_projected_lower(1.0 - mean, var, alpha, fixed_n) > 1.0 - threshold)[0]
    if hits.size == 0:
        return None
    return int(sample_sizes()[hits[0]])


def _projected_lower_rows(mean: Any, var: Any, alpha: float, fixed_n: bool) -> Any:
    """:func:`_projected_lower` for each ``mean[i]``, ``var[i]``: one row per pair."""
    np = _np()
    t = sample_sizes()
    log_inv_alpha = math.log(1.0 / alpha)
    mean = np.asarray(mean, dtype=float)[:, None]
    var = np.maximum(np.asarray(var, dtype=float), 1e-6)[:, None]
    mu_prev = (0.5 + (t - 1.0) * mean) / t
    sigma2_prev = (0.25 + (t - 1.0) * var) / t
    ev = 4.0 * (var + (mean - mu_prev) ** 2)
    if fixed_n:
        lam = np.minimum(TRUNCATION, np.sqrt(2.0 * log_inv_alpha / (t * var)))
        psi = (-np.log1p(-lam) - lam) / 4.0
        return mean - (log_inv_alpha + t * 4.0 * var * psi) / (t * lam)
    lam = np.minimum(TRUNCATION, np.sqrt(2.0 * log_inv_alpha / (sigma2_prev * t * np.log1p(t))))
    psi = (-np.log1p(-lam) - lam) / 4.0
    sum_lam = running_sums(lam)
    sum_vpsi = running_sums(ev * psi)
    return mean - (log_inv_alpha + sum_vpsi) / sum_lam


def cases_needed_many(
    means: Sequence[float],
    variances: Sequence[float],
    threshold: float,
    alpha: float,
    *,
    fixed_n: bool = False,
) -> list[int | None]:
    """``[cases_needed(m, v, threshold, alpha) for m, v in zip(means, variances)]``, in one pass."""
    np = _np()
    out: list[int | None] = [None] * len(means)
    rows = [i for i, m in enumerate(means) if m != threshold]  # a mean at the threshold never settles
    if not rows:
        return out
    mean = np.array([means[i] for i in rows], dtype=float)
    up = mean > threshold
    # mirror below the threshold: an upper bound of x is one minus a lower bound of 1 - x
    projected = _projected_lower_rows(
        np.where(up, mean, 1.0 - mean), [variances[i] for i in rows], alpha, fixed_n
    )
    hits = np.where(up[:, None], projected >= threshold, projected > 1.0 - threshold)
    first = hits.argmax(axis=1)
    grid = sample_sizes()
    for k, i in enumerate(rows):
        if hits[k, first[k]]:
            out[i] = int(grid[first[k]])
    return out
