"""The anytime-valid bounds of a routing decision: a betting confidence sequence aimed at the threshold.

For per-case values ``x_1, x_2, ...`` in [0, 1] whose conditional mean is ``mu`` and a mean
``m`` in (0, 1), a gambler who bets ``lambda_i >= 0`` on ``x_i > m``, chosen from
``x_1..x_{i-1}`` only and at most ``c / m`` (``c < 1``), holds the capital

    K_t(m) = prod_{i<=t} (1 + lambda_i (x_i - m))

Each factor is at least ``1 - c > 0`` and has conditional mean ``1 + lambda_i (mu - m)``,
at most 1 whenever ``mu <= m``: ``K_t(m)`` is then a non-negative supermartingale, and so
is any fixed mixture of such capitals. By Ville's inequality the chance that it *ever*
reaches ``1 / alpha`` is at most ``alpha`` (Waudby-Smith & Ramdas, "Estimating means of
bounded random variables by betting", JRSS-B 86(1), 2024, Section 4; Shafer, JRSS-A 2021).
A mean ``m`` is *rejected* once the capital has reached ``1 / alpha``.

The capital here is a mixture of two gamblers' (:data:`TRUNCATION` is c), the plug-in one's
share fixed by the threshold (:func:`plugin_weight`: 1/2 in the middle of the range, 4/5 near
its ends, where that gambler's bets are the better ones from the first case):

* **aimed at the threshold** ``q`` (aGRAPA, op. cit. Section 5.1): ``(mu_hat - q) /
  (sigma2_hat + (mu_hat - q)^2)`` (0 when negative), the bet that maximises the
  second-order expansion of the expected log growth of ``K(q)``. It is what makes a
  candidate whose mean sits clearly above ``q`` proven in few cases, in the middle of
  the range above all;
* **predictable plug-in** (op. cit. Theorem 3): ``sqrt(2 log(1/alpha) / (sigma2_hat t
  log(1 + t)))``, which does well near 0 and 1 and when the threshold is not known;

each truncated at ``c / m``. ``mu_hat`` and ``sigma2_hat`` are the estimates before the case,
``(1/2 + sum x) / (t + 1)`` and ``(1/4 + sum (x_i - mu_hat_i)^2) / (t + 1)`` (op. cit.
Theorem 2). A candidate is proven at ``q`` when ``q`` is rejected at some case so far (the
running maximum of the capital at ``q``), which under ``mu <= q`` happens with chance at
most ``alpha`` however often the decision is asked.

**The bound shown.** For a bet ``b >= 0`` and ``x`` in [0, 1], ``min(b, c/m) (x - m)`` does
not increase with ``m`` (for ``x >= m`` both factors fall; for ``x < m`` it is ``-b (m - x)``
or ``-c (1 - x/m)``, both falling), so ``K_t(m)`` does not increase with ``m`` and the rejected
means form an interval ``(0, L]``. The lower bound is the largest mean of a fixed grid
(:func:`grid`: 1/16 steps, and 0.005 steps within 0.04 of ``q``, ``q`` itself included)
rejected by the capital after the last case, or ``q`` when ``q`` was rejected at any case:
both are statements about the one capital at the true mean, so together they fail with
chance at most ``alpha``. ``L >= q`` exactly when the candidate is proven. The upper bound
is the lower bound of ``1 - x`` aimed at ``1 - q`` (a hair above it, so that "ruled out"
reads as an upper bound strictly below ``q``), mapped back.

Every sum is a running sum in case order (``np.cumsum``), carried in :class:`BetState`, so a
bound continued from its state over new cases equals, bit for bit, the bound of the whole
series. ``docs/decisions.md`` has the argument and the measurements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, overload

from llm_connect.routing._sizes import running_sums, sample_sizes

__all__ = [
    "TRUNCATION",
    "BetState",
    "betting_bounds",
    "betting_trace",
    "cases_needed_many",
    "grid",
    "mirror",
    "plugin_weight",
]

TRUNCATION = 0.75
"""``c``: each bet is at most ``c / m``, so every factor of the capital is at least ``1 - c``."""
UPPER_HAIR = 1e-9
"""The upper side aims at ``1 - q + UPPER_HAIR``: a rejection there is an upper bound below ``q``."""
AIM_TRUNCATION = 0.5
"""The aimed gambler's bets are also at most ``AIM_TRUNCATION / q``: in the first cases of 0/1
values its variance estimate is low (a run of ones) and its bet near the cap would lose most of
the capital on the first zero (at 0.8 against 0.7 it needed 160 cases with the cap at 3/4, 135
at 1/2, truescore's EB 140; ``docs/decisions.md``)."""
_CHUNK_CELLS = 1 << 20
"""At most this many (case x grid point) cells are computed at once."""


def _np() -> Any:
    import numpy

    return numpy


def plugin_weight(threshold: float | None) -> float:
    """The plug-in gambler's share of the capital: 1/2 for a threshold in 0.3..0.7, rising to
    4/5 for one at or beyond 0.2 or 0.8 (there the plug-in bets are near the best bet from the
    first case, while the aimed gambler loses its first cases to the estimates' priors), fixed
    by the threshold before any case. 1/2 without a threshold (both gamblers bet the same)."""
    if threshold is None:
        return 0.5
    edge = min(1.0, max(0.0, (abs(threshold - 0.5) - 0.2) / 0.1))
    return 0.5 + 0.3 * edge


@cache
def grid(threshold: float | None) -> Any:
    """The means whose capital is tracked: 1/16 steps, and 0.005 steps within 0.04 of
    ``threshold`` with ``threshold`` first (index 0); always 32 points, inside (0, 1)."""
    np = _np()
    q = 0.5 if threshold is None else float(threshold)
    near = q + 0.005 * np.array([k for k in range(-8, 9) if k != 0], dtype=float)
    points = np.concatenate(([q], near, np.arange(1, 16, dtype=float) / 16.0))
    return np.clip(points, 1e-6, 1.0 - 1e-6)


@dataclass(frozen=True, slots=True)
class BetState:
    """One side of one series after ``t`` cases: the running sums the estimates and the two
    gamblers' log capitals (one per grid point) have reached, and the running maximum of the
    mixture's log capital at the threshold. What :func:`betting_bounds` continues from."""

    t: int = 0
    sum_x: float = 0.0
    sum_sq: float = 0.0
    """Σ (x_i - mu_hat_i)², the variance estimate's numerator."""
    log_aimed: tuple[float, ...] = ()
    """The aimed gambler's log capital at each point of :func:`grid` (empty before any case)."""
    log_plugin: tuple[float, ...] = ()
    """The plug-in gambler's log capital at each point of :func:`grid`."""
    best_at_q: float = -math.inf
    """The largest log capital of the mixture at the threshold so far."""


def _sides(
    xs: Sequence[Any],
    starts: Sequence[BetState],
    qs: Sequence[float | None],
    alphas: Sequence[float],
    trace: list[tuple[Any, Any]] | None = None,
    plugin_shares: Sequence[float] | None = None,
) -> list[BetState]:
    """The states of several sides after their new cases ``xs[i]`` (non-empty), computed together:
    each side is a row of one zero-padded matrix (a padded cell adds exactly nothing to any
    running sum, so each row's figures are those of the row alone), in chunks of at most
    :data:`_CHUNK_CELLS` (row x case x grid point) cells. ``trace``: a list that receives, per
    chunk, ``(at_q, shown)`` (row x case): the mixture's log capital at the threshold after
    each case, and the largest grid point its capital rejects then (0 where none).
    ``plugin_shares``: the plug-in gambler's share per row (default :func:`plugin_weight`)."""
    np = _np()
    rows = len(xs)
    lengths = np.fromiter((x.size for x in xs), dtype=np.intp, count=rows)
    width = int(lengths.max())
    real_all = np.arange(width) < lengths[:, None]
    x_all = np.zeros((rows, width))
    x_all[real_all] = np.concatenate(xs)
    m = np.stack([grid(q) for q in qs])
    cap = (TRUNCATION / m)[None, :, :]
    log_target = np.log(1.0 / np.asarray(alphas, dtype=float))[:, None]
    aim_at = np.array([np.nan if q is None else q for q in qs])[:, None]
    log_w_plugin = np.log(plugin_shares if plugin_shares is not None else [plugin_weight(q) for q in qs])
    log_w_aimed = np.log1p(-np.exp(log_w_plugin))
    t0 = np.fromiter((s.t for s in starts), dtype=float, count=rows)
    sum_x = np.fromiter((s.sum_x for s in starts), dtype=float, count=rows)
    sum_sq = np.fromiter((s.sum_sq for s in starts), dtype=float, count=rows)
    aimed = np.array([s.log_aimed if s.log_aimed else (0.0,) * m.shape[1] for s in starts])
    plugin = np.array([s.log_plugin if s.log_plugin else (0.0,) * m.shape[1] for s in starts])
    best = np.fromiter((s.best_at_q for s in starts), dtype=float, count=rows)

    def running(first: Any, values: Any) -> Any:  # cumulative sums along each row, continued
        return np.cumsum(np.concatenate((first[:, None], values), axis=1), axis=1)[:, 1:]

    step = max(1, _CHUNK_CELLS // (rows * m.shape[1]))
    for start in range(0, width, step):
        x, real = x_all[:, start : start + step], real_all[:, start : start + step]
        t = t0[:, None] + np.cumsum(real, axis=1)
        sums_x = running(sum_x, x)
        mu_hat = (0.5 + sums_x) / (t + 1.0)
        sums_sq = running(sum_sq, np.where(real, (x - mu_hat) ** 2, 0.0))
        sigma2 = (0.25 + sums_sq) / (t + 1.0)
        mu_prev = np.concatenate((((0.5 + sum_x) / (t0 + 1.0))[:, None], mu_hat[:, :-1]), axis=1)
        sigma2_prev = np.concatenate((((0.25 + sum_sq) / (t0 + 1.0))[:, None], sigma2[:, :-1]), axis=1)
        plug_bet = np.sqrt(2.0 * log_target / (sigma2_prev * t * np.log1p(t)))
        gap = mu_prev - aim_at
        aimed_bet = np.minimum(AIM_TRUNCATION / m[:, :1], np.maximum(0.0, gap / (sigma2_prev + gap * gap)))
        aim_bet = np.where(np.isnan(aim_at), plug_bet, aimed_bet)
        # (case, row, grid point), a padded cell betting nothing (its factor is exactly 1). Summing
        # over the first axis adds the cases one after another, in order (as np.cumsum does),
        # so the capital continued from a state is the whole series' capital bit for bit.
        diff = x.T[:, :, None] - m[None, :, :]
        log_a = np.log1p(np.minimum(np.where(real, aim_bet, 0.0).T[:, :, None], cap) * diff)
        log_p = np.log1p(np.minimum(np.where(real, plug_bet, 0.0).T[:, :, None], cap) * diff)
        log_a[0] += aimed
        log_p[0] += plugin
        at_q = np.logaddexp(
            np.cumsum(log_a[:, :, 0], axis=0) + log_w_aimed, np.cumsum(log_p[:, :, 0], axis=0) + log_w_plugin
        )
        if trace is not None:
            mixture = np.logaddexp(
                np.cumsum(log_a, axis=0) + log_w_aimed[None, :, None],
                np.cumsum(log_p, axis=0) + log_w_plugin[None, :, None],
            )
            shown = np.where(mixture >= log_target[None, :, :], m[None, :, :], 0.0).max(axis=2)
            trace.append((at_q.T, shown.T))
        best = np.maximum(best, np.where(real.T, at_q, -np.inf).max(axis=0))
        aimed, plugin = np.add.reduce(log_a, axis=0), np.add.reduce(log_p, axis=0)
        t0, sum_x, sum_sq = t[:, -1], sums_x[:, -1], sums_sq[:, -1]
    return [
        BetState(
            int(t0[i]),
            float(sum_x[i]),
            float(sum_sq[i]),
            tuple(map(float, aimed[i])),
            tuple(map(float, plugin[i])),
            float(best[i]),
        )
        for i in range(rows)
    ]


def _batched(
    xs: Sequence[Any], starts: Sequence[BetState], qs: Sequence[float | None], alphas: Sequence[float]
) -> list[BetState]:
    """:func:`_sides` of every row, in batches of similar length (longest first) so that the
    padding at most doubles the work."""
    order = sorted(range(len(xs)), key=lambda i: -xs[i].size)
    out: list[BetState] = [BetState()] * len(xs)
    begin = 0
    while begin < len(order):
        width, stop, cells = xs[order[begin]].size, begin + 1, xs[order[begin]].size
        while stop < len(order) and width * (stop - begin + 1) <= 2 * (cells + xs[order[stop]].size) + 256:
            cells += xs[order[stop]].size
            stop += 1
        batch = order[begin:stop]
        ends = _sides([xs[i] for i in batch], [starts[i] for i in batch], [qs[i] for i in batch],
                      [alphas[i] for i in batch])  # fmt: skip
        for i, end in zip(batch, ends, strict=True):
            out[i] = end
        begin = stop
    return out


def betting_bounds(
    new: Sequence[Any],
    alphas: Sequence[float],
    thresholds: Sequence[float | None],
    starts: Sequence[tuple[BetState, BetState] | None],
) -> tuple[list[float | None], list[float | None], list[tuple[BetState, BetState] | None]]:
    """Anytime ``(lower, upper)`` bounds of series given by their new cases ``new[i]`` after
    ``starts[i]`` (``None``: nothing before), each at ``alphas[i]`` and aimed at
    ``thresholds[i]`` (``None``: the plug-in gambler alone, no threshold); returns the bounds
    and the states to continue from. ``None`` bounds for a series with no case yet."""
    np = _np()
    pairs = [s if s is not None else (BetState(), BetState()) for s in starts]
    xs = []
    for x, alpha in zip(new, alphas, strict=True):
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie strictly between 0 and 1, not {alpha!r}")
        values = np.asarray(x, dtype=float)
        if values.size and (not np.all(np.isfinite(values)) or values.min() < 0.0 or values.max() > 1.0):
            raise ValueError("scores must lie in 0..1")
        xs.append(values)
    todo = [i for i, x in enumerate(xs) if x.size]
    if todo:
        ends = _batched(
            [xs[i] for i in todo] + [1.0 - xs[i] for i in todo],
            [pairs[i][0] for i in todo] + [pairs[i][1] for i in todo],
            [thresholds[i] for i in todo] + [mirror(thresholds[i]) for i in todo],
            [alphas[i] for i in todo] * 2,
        )
        for k, i in enumerate(todo):
            pairs[i] = (ends[k], ends[len(todo) + k])
    lows: list[float | None] = []
    highs: list[float | None] = []
    for (lower, upper), q, alpha in zip(pairs, thresholds, alphas, strict=True):
        lows.append(None if lower.t == 0 else _shown(lower, q, alpha))
        highs.append(None if upper.t == 0 else 1.0 - _shown(upper, mirror(q), alpha))
    return lows, highs, [None if p[0].t == 0 else p for p in pairs]


@overload
def mirror(q: float) -> float: ...
@overload
def mirror(q: None) -> None: ...
def mirror(q: float | None) -> float | None:
    """The threshold the upper side aims at: ``1 - q`` and a hair above it."""
    return None if q is None else 1.0 - q + UPPER_HAIR


def betting_trace(
    x: Any, start: BetState, threshold: float, alpha: float, plugin_share: float | None = None
) -> tuple[BetState, Any, Any]:
    """One side continued over the values ``x`` (1-D, in [0, 1], non-empty) from ``start``, and
    after each value: the log capital of the mixture at ``threshold`` and the largest grid
    point (:func:`grid`) its capital rejects at ``alpha`` then (0 where none). The state is
    the one :func:`betting_bounds` would reach, bit for bit (the gamblers' capitals do not
    depend on their shares; ``plugin_share``, default :func:`plugin_weight`, sets the mixture
    the trace reads and the state's ``best_at_q``)."""
    np = _np()
    values = np.asarray(x, dtype=float)
    pieces: list[tuple[Any, Any]] = []
    shares = None if plugin_share is None else [plugin_share]
    (end,) = _sides([values], [start], [threshold], [alpha], pieces, shares)
    return end, np.concatenate([p[0][0] for p in pieces]), np.concatenate([p[1][0] for p in pieces])


def _shown(state: BetState, q: float | None, alpha: float) -> float:
    """The lower bound a state stands for (what :func:`_side` returned when it was made)."""
    np = _np()
    m = grid(q)
    log_target = math.log(1.0 / alpha)
    w = plugin_weight(q)
    mixture = np.logaddexp(
        np.array(state.log_aimed) + math.log1p(-w), np.array(state.log_plugin) + math.log(w)
    )
    rejected = m[mixture >= log_target]
    low = float(rejected.max()) if rejected.size else 0.0
    return max(low, float(m[0])) if state.best_at_q >= log_target else low


# -- projection ---------------------------------------------------------------------------


def _expected_log_growth(bet: Any, mean: Any, var: Any, q: Any) -> Any:
    """``E log(1 + bet (x - q))`` for ``x`` on two points with the given mean and variance:
    ``mean (1 - s)`` and ``mean + (1 - mean) s`` with chances ``1 - mean`` and ``mean``, where
    ``s^2 = var / (mean (1 - mean))`` (0/1 cases exactly when ``var = mean (1 - mean)``)."""
    np = _np()
    spread = np.sqrt(np.clip(var / np.maximum(mean * (1.0 - mean), 1e-12), 0.0, 1.0))
    low = mean * (1.0 - spread)
    high = mean + (1.0 - mean) * spread
    return (1.0 - mean) * np.log1p(bet * (low - q)) + mean * np.log1p(bet * (high - q))


def cases_needed_many(
    means: Sequence[float], variances: Sequence[float], thresholds: Sequence[float], alpha: float
) -> list[int | None]:
    """Roughly how many cases in all the bounds need to settle each ``means[i]`` against
    ``thresholds[i]``, if future cases share the observed mean and variance: where the
    expected log capital of the mixture at the threshold (of ``1 - x`` at ``1 - q`` below the
    threshold) reaches ``log(1 / alpha)``, the estimates following their expected path from
    their priors. ``None`` beyond ten million cases, or for a mean at the threshold."""
    np = _np()
    out: list[int | None] = [None] * len(means)
    rows = [i for i, (mu, q) in enumerate(zip(means, thresholds, strict=True)) if mu != q]
    if not rows:
        return out
    mean = np.array([means[i] for i in rows], dtype=float)
    q = np.array([thresholds[i] for i in rows], dtype=float)
    up = mean > q
    mean = np.where(up, mean, 1.0 - mean)[:, None]  # below the threshold: the mirrored side
    q = np.clip(np.where(up, q, 1.0 - q), 1e-6, 1.0 - 1e-6)[:, None]  # as the grid keeps m inside (0, 1)
    var = np.maximum(np.array([variances[i] for i in rows], dtype=float), 1e-6)[:, None]
    t = sample_sizes()[None, :]
    mu_prev = (0.5 + (t - 1.0) * mean) / t
    sigma2_prev = (0.25 + (t - 1.0) * var) / t
    cap = TRUNCATION / q
    gap = mu_prev - q
    aimed = np.minimum(np.maximum(0.0, gap / (sigma2_prev + gap * gap)), np.minimum(cap, AIM_TRUNCATION / q))
    plugin = np.minimum(np.sqrt(2.0 * math.log(1.0 / alpha) / (sigma2_prev * t * np.log1p(t))), cap)
    log_a = running_sums(_expected_log_growth(aimed, mean, var, q))
    log_p = running_sums(_expected_log_growth(plugin, mean, var, q))
    w = np.array([plugin_weight(thresholds[i]) for i in rows])[:, None]
    hits = np.logaddexp(log_a + np.log1p(-w), log_p + np.log(w)) >= math.log(1.0 / alpha)
    first = hits.argmax(axis=1)
    times = sample_sizes()
    for k, i in enumerate(rows):
        if hits[k, first[k]]:
            out[i] = int(times[first[k]])
    return out
