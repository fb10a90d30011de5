"""The prediction-powered sequence of ``_ppi`` continued from running sums (one series).

:func:`~llm_connect.routing._ppi.ppi_sequence` computes the bounds after every case of whole
series (arrays of runs, for simulations). Every quantity in it is an element-wise function
of the current case and of cumulative sums over the cases before (the tuning's weighted
moments, Σy, the variance estimate's Σ, the bets' Σ, the running extremes of the bounds,
and the same for the labels-alone bound over the labelled cases). :class:`PPIState` holds
those sums after ``t`` cases and :func:`continue_sequence` extends them by new cases with
the same expressions; ``np.cumsum`` adds in order, so a continued sequence equals the full
one bit for bit (``tests/routing/test_ppi_running.py``). A Router keeps the state at the
first pending label (the sequence stops there) and continues from it when cases or labels
arrive after it; a change before it means starting again from nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from llm_connect.routing._bounds import TRUNCATION

__all__ = [
    "STATE_VERSION",
    "LabelSums",
    "PPIState",
    "continue_sequence",
    "mixture_root",
    "side_terms",
    "start_state",
]

STATE_VERSION = "3"
"""Version of :class:`PPIState`'s fields and their meaning. "3": below rate 1 each case's
factor is the exact bet ``1 + gamma xi`` (not Fan's bound), bets up to 3/4. "2": each side of the
prediction-powered e-process has its own scale and sums (``*_up``: the upper side, on ``-y``);
under uniform labelling the bounds are those of the mixture of the two e-processes
(``best_low`` / ``best_high`` are the mixture's running extremes), not the tighter of two
bounds at split ``alpha`` ("1")."""

PPI_TRUNCATION = 0.75
"""The largest bet ``gamma`` of the prediction-powered e-process, in units of its scale (WSR
truncate at 1/2 or 3/4). With the exact factor ``log(1 + gamma xi)`` a bet only costs about
``gamma^2 xi^2 / 2`` on the values that occur, so 3/4 proved with fewer labels than 1/2 in
``scripts/bench/ppi_sim.py`` (with Fan's bound, whose penalty ``psi_E(gamma)`` at 3/4 is 2.3x
its quadratic approximation on every value, 1/2 did)."""

_NEWTON = 4
"""Newton steps for the mixture's root: quadratic convergence from below (every step is
valid); 3 reach 1e-13 in the simulations' regimes."""

LAM_MAX = 2.0
"""The largest judge coefficient ``lam_t`` the tuning may pick."""

_RIDGE = 0.25
"""Prior weight (in labels) pulling the tuned ``lam`` towards 0 and ``c`` towards 1/2."""


def _range(lam: Any, c: Any, floor: float) -> tuple[Any, Any]:
    """The least and greatest ``y`` can be with these coefficients, over every J, H in [0, 1] and
    every ``p >= floor``: ``a_hi (1 - 1/floor)`` (chosen, H = 0, the highest prediction) and
    ``a_lo + (1 - a_lo) / floor`` (chosen, H = 1, the lowest)."""
    a_hi = np.clip(lam + c, 0.0, 1.0)
    a_lo = np.clip(c, 0.0, 1.0)
    return a_hi * (1.0 - 1.0 / floor), a_lo + (1.0 - a_lo) / floor


def side_terms(v: Any, centre: Any, bet: Any, own: Any, width: Any, floor: float) -> tuple[Any, Any, Any]:
    """Per case, one side's terms of the prediction-powered e-process: ``(eta v, penalty, eta)``.

    The side's log e-value at a candidate mean ``mu`` is the cumulative sum of
    ``eta v - penalty - eta mu``. ``v``: the values (``y`` for the lower bound, ``-y`` for the
    upper), ``centre`` their predictable centre, ``bet`` WSR's bet before truncation, ``own``:
    how far ``v`` can fall below the centre (known before the case). The scale
    ``S = max(own, width / 2)`` keeps ``xi = (v - centre) / S >= -1``; ``gamma = min(3/4, S bet)``,
    ``eta = gamma / S``.

    Below rate 1 each case's factor is the exact bet ``(1 + gamma xi) exp(eta (centre - mu))``
    (conditional mean at most 1 at the true mean, as ``1 + x <= e^x``; positive as
    ``gamma < 1``): its log is ``eta v - (gamma xi - log(1 + gamma xi)) - eta mu``, still
    linear in ``mu``. At rate 1 (every case labelled: the labels' own bound) it is the
    empirical-Bernstein factor of ``_bounds`` on the scale ``width``: Fan's
    ``gamma xi - psi_E(gamma) xi^2`` with values above ``centre + S max(1, gamma / (2 psi))``,
    where it stops growing, cut down to that (``docs/decisions.md``).
    """
    if floor >= 1.0:
        gamma = np.minimum(TRUNCATION, width * bet)
        eta = gamma / width
        psi = -np.log1p(-gamma) - gamma
        cut = np.minimum(v, centre + np.maximum(1.0, gamma / (2.0 * psi)) * width)
        return eta * cut, psi * ((cut - centre) / width) ** 2, eta
    scale = np.maximum(own, 0.5 * width)
    gamma = np.minimum(PPI_TRUNCATION, scale * bet)
    eta = gamma / scale
    step = gamma * (v - centre) / scale  # >= -gamma > -1
    return eta * v, step - np.log1p(step), eta


def mixture_root(a1: Any, b1: Any, a2: Any, b2: Any, share: float, log_inv_alpha: float) -> Any:
    """The ``m`` at which ``w exp(a1 - b1 m) + (1 - w) exp(a2 - b2 m) = 1/alpha`` (``w = share``),
    element-wise: the lower end of the confidence set of the mixture of two e-processes, each
    ``exp(a - b m)`` at the candidate mean ``m`` (``b1 >= 0``, ``b2 > 0``).

    Newton's method on the log of the left side (convex and decreasing in ``m``) from the
    larger of the two single-arm roots, where the left side is at least ``1/alpha``: every
    iterate stays at or below the root, so stopping early is conservative, never invalid.
    """
    lw1, lw2 = math.log(share), math.log1p(-share)
    has1 = b1 > 0.0
    r1 = np.where(has1, (a1 + lw1 - log_inv_alpha) / np.where(has1, b1, 1.0), -np.inf)
    m = np.maximum(r1, (a2 + lw2 - log_inv_alpha) / b2)
    for _ in range(_NEWTON):
        e1 = lw1 + a1 - b1 * m
        e2 = lw2 + a2 - b2 * m
        first = e1 >= e2
        q = np.exp(-np.abs(e1 - e2))  # the smaller term over the larger
        g = np.where(first, e1, e2) + np.log1p(q) - log_inv_alpha
        slope = np.where(first, b1 + b2 * q, b2 + b1 * q) / (1.0 + q)
        m = m + g / slope
    return m


def _single_roots(a1: Any, b1: Any, a2: Any, b2: Any, share: float, log_inv_alpha: float) -> tuple[Any, Any]:
    """Bounds on :func:`mixture_root`: the larger single-arm root at the arms' weights (the
    root is at least that) and at weight 1 (at most that: a convex combination is at most its
    largest term)."""
    lw1, lw2 = math.log(share), math.log1p(-share)
    has1 = b1 > 0.0
    safe1 = np.where(has1, b1, 1.0)
    low = np.maximum(
        np.where(has1, (a1 + lw1 - log_inv_alpha) / safe1, -np.inf), (a2 + lw2 - log_inv_alpha) / b2
    )
    high = np.maximum(np.where(has1, (a1 - log_inv_alpha) / safe1, -np.inf), (a2 - log_inv_alpha) / b2)
    return low, high


def mixture_lower(a1: Any, b1: Any, a2: Any, b2: Any, share: float, log_inv_alpha: float) -> Any:
    """The running maximum along the last axis of :func:`mixture_root`.

    The root is solved only where it can raise the running maximum: where its upper bound
    (:func:`_single_roots`) is below the running maximum of its lower bound, the lower bound
    stands in; the running maximum is the same as with every root solved.
    """
    low, high = _single_roots(a1, b1, a2, b2, share, log_inv_alpha)
    solve = high > np.maximum.accumulate(low, axis=-1)
    out = low.copy()
    if solve.any():
        out[solve] = mixture_root(a1[solve], b1[solve], a2[solve], b2[solve], share, log_inv_alpha)
    return np.maximum.accumulate(out, axis=-1)


def mixture_best(
    a1: Any, b1: Any, a2: Any, b2: Any, share: float, log_inv_alpha: float, best: float
) -> float:
    """``max(best, the largest mixture_root over these cases)`` (1-D), equal to the last entry of
    :func:`mixture_lower` over the cases before and these: only the cases whose root's upper
    bound exceeds ``best`` and every root's lower bound are solved."""
    low, high = _single_roots(a1, b1, a2, b2, share, log_inv_alpha)
    reach = max(best, float(low.max()))
    solve = high > reach
    if solve.any():
        reach = max(
            reach, float(mixture_root(a1[solve], b1[solve], a2[solve], b2[solve], share, log_inv_alpha).max())
        )
    return reach


@dataclass(frozen=True, slots=True)
class LabelSums:
    """The labels-alone bound (``_ppi._labels_only``, one side) after ``t`` labels."""

    t: int = 0
    sum_v: float = 0.0
    sum_sq: float = 0.0
    sum_lam_v: float = 0.0
    sum_psi: float = 0.0
    sum_lam: float = 0.0
    best: float = -math.inf

    @property
    def lower(self) -> float:
        """The bound so far, clipped to 0..1 (0 before any label)."""
        return 0.0 if self.t == 0 else min(1.0, max(0.0, self.best))


@dataclass(frozen=True, slots=True)
class PPIState:
    """Running sums of the prediction-powered sequence after ``t`` cases, at one ``alpha``,
    ``floor`` and labels share (the settings the sums belong to)."""

    alpha: float
    floor: float
    share: float
    t: int = 0
    # the tuning's weighted moments over labelled cases: count, Σw, Σwj, Σwh, Σwjh, Σwjj
    tuning: tuple[float, float, float, float, float, float] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    sum_y: float = 0.0
    sum_sq: float = 0.0
    # the lower side's e-process (Σ eta y', penalty, Σ eta) and the upper side's, on -y
    sum_eta_y: float = 0.0
    penalty: float = 0.0
    sum_eta: float = 0.0
    sum_eta_y_up: float = 0.0
    penalty_up: float = 0.0
    sum_eta_up: float = 0.0
    best_low: float = -math.inf
    best_high: float = math.inf
    labels: tuple[LabelSums, LabelSums] = field(default_factory=lambda: (LabelSums(), LabelSums()))

    def bounds(self) -> tuple[float, float]:
        """``(lower, upper)`` after the ``t`` cases (the last entries of ``ppi_sequence``)."""
        return min(1.0, max(0.0, self.best_low)), min(1.0, max(0.0, self.best_high))

    def coefficients(self) -> tuple[float, float]:
        """``(lam, c)`` tuned on every labelled case so far."""
        lam, c = _coefficients(*(np.array([v]) for v in self.tuning))
        return float(lam[0]), float(c[0])


def start_state(alpha: float, floor: float, share: float) -> PPIState:
    """The state before any case."""
    return PPIState(alpha=float(alpha), floor=float(floor), share=float(share))


def _running(first: float, values: Any) -> Any:
    """Cumulative sums of ``values`` continued from ``first`` (sequential adds, as over the whole)."""
    return np.cumsum(np.concatenate(([first], values)))[1:]


def _coefficients(n_lab: Any, sw: Any, swj: Any, swh: Any, swjh: Any, swjj: Any) -> tuple[Any, Any]:
    """``_ppi._tuning``'s ``(lam, c)`` from its cumulative sums (element-wise, same expressions)."""
    scale = np.where(sw > 0.0, n_lab / np.where(sw > 0.0, sw, 1.0), 0.0)
    total = sw * scale + _RIDGE
    mj = (swj * scale + 0.5 * _RIDGE) / total
    mh = (swh * scale + 0.5 * _RIDGE) / total
    cov = swjh * scale / total - mj * mh
    var = (swjj * scale + 0.25 * _RIDGE) / total - mj * mj
    lam = np.clip(cov / (var + 1e-3), 0.0, LAM_MAX)
    return lam, mh - lam * mj


def _labels(start: LabelSums, v: Any, log_inv_alpha: float) -> tuple[LabelSums, Any, Any]:
    """``_ppi._labels_only``'s lower bound of ``v`` (the new labelled values) continued, and its
    e-process's exponent ``a - b m`` after each new label: ``(state, a, b)``."""
    if not v.size:
        return start, np.zeros(0), np.zeros(0)
    t0 = float(start.t)
    t = t0 + np.arange(1, v.size + 1, dtype=float)
    sum_v = _running(start.sum_v, v)
    mean_after = (0.5 + sum_v) / (t + 1.0)
    sum_sq = _running(start.sum_sq, (v - mean_after) ** 2)
    sq_after = (0.25 + sum_sq) / (t + 1.0)
    m = np.concatenate((np.array([(0.5 + start.sum_v) / (t0 + 1.0)]), mean_after[:-1]))
    s2 = np.concatenate((np.array([(0.25 + start.sum_sq) / (t0 + 1.0)]), sq_after[:-1]))
    lam = np.minimum(TRUNCATION, np.sqrt(2.0 * log_inv_alpha / (s2 * t * np.log1p(t))))
    psi = -np.log1p(-lam) - lam
    sum_lam_v = _running(start.sum_lam_v, lam * v)
    sum_psi = _running(start.sum_psi, psi * (v - m) ** 2)
    sum_lam = _running(start.sum_lam, lam)
    exponent = sum_lam_v - sum_psi
    low = (exponent - log_inv_alpha) / sum_lam
    state = LabelSums(
        t=start.t + int(v.size),
        sum_v=float(sum_v[-1]),
        sum_sq=float(sum_sq[-1]),
        sum_lam_v=float(sum_lam_v[-1]),
        sum_psi=float(sum_psi[-1]),
        sum_lam=float(sum_lam[-1]),
        best=max(start.best, float(low.max())),
    )
    return state, exponent, sum_lam


def _per_case(start: LabelSums, a: Any, b: Any, ch: Any) -> tuple[Any, Any]:
    """The labels arm's ``(a, b)`` after each case of a piece (``ch``: chosen), from the values
    after each of its labels; before the piece's first label, the start's (0 before any)."""
    k = np.cumsum(ch)
    a0 = start.sum_lam_v - start.sum_psi
    return np.concatenate(([a0], a))[k], np.concatenate(([start.sum_lam], b))[k]


def continue_sequence(start: PPIState, judge: Any, inclusion: Any, chosen: Any, human: Any) -> PPIState:
    """``start`` extended by the cases given (1-D arrays; ``human`` set on every chosen case).

    The same computation as :func:`~llm_connect.routing._ppi.ppi_sequence` over the cases
    before and these together, at ``start``'s settings; no validation (``human_bound``'s).
    """
    j = np.asarray(judge, dtype=float)
    n = j.size
    if n == 0:
        return start
    p = np.asarray(inclusion, dtype=float)
    ch = np.asarray(chosen, dtype=bool)
    h = np.where(ch, np.nan_to_num(np.asarray(human, dtype=float)), 0.0)
    floor, share = start.floor, start.share
    alpha = start.alpha * (1.0 - share) if share > 0.0 else start.alpha
    log_inv_alpha = math.log(1.0 / alpha)

    # The tuning after each case, and before each (the state's sums before the first).
    w = np.where(ch, (1.0 - p) / (p * p), 0.0)
    sums = [
        _running(s0, x)
        for s0, x in zip(start.tuning, (ch.astype(float), w, w * j, w * h, w * j * h, w * j * j), strict=True)
    ]
    lam_after, c_after = _coefficients(*sums)
    lam_0, c_0 = start.coefficients() if start.t else (0.0, 0.5)
    lam = np.concatenate(([lam_0], lam_after[:-1]))
    c = np.concatenate(([c_0], c_after[:-1]))
    a = np.clip(lam * j + c, 0.0, 1.0)
    y = a + np.where(ch, (h - a) / p, 0.0)
    y_min, y_max = _range(lam, c, floor)
    width = y_max - y_min

    t0 = float(start.t)
    t = t0 + np.arange(1, n + 1, dtype=float)
    sum_y = _running(start.sum_y, y)
    mean_after = np.clip((0.5 + sum_y) / (t + 1.0), 0.0, 1.0)
    m = np.concatenate(([min(1.0, max(0.0, (0.5 + start.sum_y) / (t0 + 1.0)))], mean_after[:-1]))
    prior = 0.25 / floor
    sum_sq = _running(start.sum_sq, (y - mean_after) ** 2)
    sq_after = (prior + sum_sq) / (t + 1.0)
    s2 = np.concatenate(([(prior + start.sum_sq) / (t0 + 1.0)], sq_after[:-1]))
    bet = np.sqrt(2.0 * log_inv_alpha / (s2 * t * np.log1p(t)))
    lo = side_terms(y, m, bet, m - y_min, width, floor)
    up = side_terms(-y, -m, bet, y_max - m, width, floor)
    sum_eta_y, penalty, sum_eta = (
        _running(x0, x) for x0, x in zip((start.sum_eta_y, start.penalty, start.sum_eta), lo, strict=True)
    )
    sum_up, penalty_up, sum_eta_up = (
        _running(x0, x)
        for x0, x in zip((start.sum_eta_y_up, start.penalty_up, start.sum_eta_up), up, strict=True)
    )
    labels = start.labels
    if share > 0.0:
        v = h[ch]
        lia = math.log(1.0 / (start.alpha * share))
        lo_state, lo_a, lo_b = _labels(labels[0], v, lia)
        up_state, up_a, up_b = _labels(labels[1], 1.0 - v, lia)
        a1, b1 = _per_case(labels[0], lo_a, lo_b, ch)
        c1, d1 = _per_case(labels[1], up_a, up_b, ch)
        lia_all = math.log(1.0 / start.alpha)
        best_low = mixture_best(a1, b1, sum_eta_y - penalty, sum_eta, share, lia_all, start.best_low)
        best_high = -mixture_best(
            c1 - d1, d1, sum_up - penalty_up, sum_eta_up, share, lia_all, -start.best_high
        )
        labels = (lo_state, up_state)
    else:
        low = (sum_eta_y - penalty - log_inv_alpha) / sum_eta
        high = -((sum_up - penalty_up - log_inv_alpha) / sum_eta_up)
        best_low = max(start.best_low, float(low.max()))
        best_high = min(start.best_high, float(high.min()))
    return replace(
        start,
        t=start.t + n,
        tuning=tuple(float(s[-1]) for s in sums),  # type: ignore[arg-type]
        sum_y=float(sum_y[-1]),
        sum_sq=float(sum_sq[-1]),
        sum_eta_y=float(sum_eta_y[-1]),
        penalty=float(penalty[-1]),
        sum_eta=float(sum_eta[-1]),
        sum_eta_y_up=float(sum_up[-1]),
        penalty_up=float(penalty_up[-1]),
        sum_eta_up=float(sum_eta_up[-1]),
        best_low=best_low,
        best_high=best_high,
        labels=labels,
    )
