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

from llm_connect.routing._betting import BetState, betting_trace, mirror, plugin_weight
from llm_connect.routing._bounds import TRUNCATION

__all__ = [
    "STATE_VERSION",
    "PPIState",
    "continue_sequence",
    "continue_with_bounds",
    "side_terms",
    "start_state",
]

STATE_VERSION = "4"
"""Version of :class:`PPIState`'s fields and their meaning. "4": the labels arm is the betting
sequence aimed at the threshold (``_betting``, at ``alpha`` times the labels' share) and every
case labelled means the labels arm alone; the state carries the threshold. "3": below rate 1 each case's
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


@dataclass(frozen=True, slots=True)
class PPIState:
    """Running sums of the prediction-powered sequence after ``t`` cases, at one ``alpha``,
    ``floor``, labels share and threshold (the settings the sums belong to)."""

    alpha: float
    floor: float
    share: float
    threshold: float = 0.5
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
    labels: tuple[BetState, BetState] = field(default_factory=lambda: (BetState(), BetState()))
    """The labels arm's betting states: on people's values aimed at the threshold, and on one
    minus them aimed at the mirrored threshold (empty with a share of 0)."""

    def bounds(self) -> tuple[float, float]:
        """``(lower, upper)`` after the ``t`` cases (the last entries of ``ppi_sequence``)."""
        return min(1.0, max(0.0, self.best_low)), min(1.0, max(0.0, self.best_high))

    def coefficients(self) -> tuple[float, float]:
        """``(lam, c)`` tuned on every labelled case so far."""
        lam, c = _coefficients(*(np.array([v]) for v in self.tuning))
        return float(lam[0]), float(c[0])


def start_state(alpha: float, floor: float, share: float, threshold: float = 0.5) -> PPIState:
    """The state before any case."""
    return PPIState(alpha=float(alpha), floor=float(floor), share=float(share), threshold=float(threshold))


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


ARM_WEIGHTS_MIDDLE = (0.6, 0.1, 0.3)
"""Under uniform labelling, the shares of the three e-processes for a threshold in 0.3..0.7:
the labels' aimed gambler, the labels' plug-in gambler, the prediction-powered arm. With a
judge of no signal the aimed gambler carries the bound (its share costs ``log(1/0.6)`` of
capital against the labels arm alone's ``log 2``); with a good judge the prediction-powered
arm does (``log(1/0.3)`` against ``log 2`` before: a few more labels)."""

ARM_WEIGHTS_EDGE = (0.1, 0.75, 0.15)
"""The shares for a threshold at or beyond 0.2 or 0.8 (linear in between): near the ceiling a
judge cannot beat people's own small variance, and the plug-in gambler's bets are the best
from the first label (``docs/decisions.md``)."""


def arm_weights(threshold: float) -> tuple[float, float, float]:
    """``(aimed, plug-in, prediction-powered)`` shares for ``threshold`` (summing to 1), fixed
    before any case: :data:`ARM_WEIGHTS_MIDDLE` in 0.3..0.7, :data:`ARM_WEIGHTS_EDGE` at or
    beyond 0.2 and 0.8, linear in between."""
    e = min(1.0, max(0.0, (abs(threshold - 0.5) - 0.2) / 0.1))
    a, p, r = ((1.0 - e) * x + e * y for x, y in zip(ARM_WEIGHTS_MIDDLE, ARM_WEIGHTS_EDGE, strict=True))
    return a, p, r


def labels_plugin_share(threshold: float, share: float) -> float:
    """The plug-in gambler's share within the labels arm: the judges' target's
    (:func:`~llm_connect.routing._betting.plugin_weight`) when the labels arm stands alone
    (``share`` 1), else the ratio of :func:`arm_weights`."""
    if share >= 1.0:
        return plugin_weight(threshold)
    a, p, _ = arm_weights(threshold)
    return p / (a + p)


def _log_weights(share: float) -> tuple[float, float]:
    """``(log w, log(1 - w))`` of the labels arm and the prediction-powered arm."""
    if share >= 1.0:
        return 0.0, -math.inf
    return (-math.inf if share <= 0.0 else math.log(share)), math.log1p(-share)


def _side(
    start: BetState,
    values: Any,
    chosen: Any,
    aim: float,
    exponent: Any,
    slope: Any,
    share: float,
    alpha: float,
) -> tuple[BetState, Any]:
    """One side of the mixture after each case: the labels arm continued over ``values`` (the
    new labels, on this side's scale) and the best mean this side rejects then, on its scale
    (``-inf`` where none). The prediction-powered arm's log e-value at a mean ``m`` of this
    side is ``exponent - slope m`` after each case.

    A mean is rejected after a case when the mixture ``w K_labels + (1 - w) K_ppi`` has
    reached ``1 / alpha``: at ``aim`` (the threshold; rejected means proven or ruled out),
    or through one arm alone at its weight (the prediction-powered root, the labels arm's
    largest rejected grid point at ``alpha w``); both arms' capitals fall as the mean rises,
    so each of these is rejected by the mixture, and every smaller mean with it.
    """
    log_w_labels, log_w_ppi = _log_weights(share)
    log_target = math.log(1.0 / alpha)
    rejected = np.full(exponent.shape, -math.inf)
    if log_w_ppi > -math.inf:
        rejected = (exponent + log_w_ppi - log_target) / slope
    at_aim = exponent - slope * aim + log_w_ppi if log_w_ppi > -math.inf else rejected
    state = start
    if log_w_labels > -math.inf:
        k = np.cumsum(chosen)
        before = _at_aim(start, labels_plugin_share(aim, share))
        inner = labels_plugin_share(aim, share)
        if values.size:
            state, labels_at_aim, shown = betting_trace(values, start, aim, alpha * share, inner)
        else:
            labels_at_aim, shown = np.zeros(0), np.zeros(0)
        labels_at_aim = np.concatenate(([before], labels_at_aim))[k] + log_w_labels
        shown = np.concatenate(([-math.inf], np.where(shown > 0.0, shown, -math.inf)))[k]
        at_aim = np.logaddexp(at_aim, labels_at_aim) if log_w_ppi > -math.inf else labels_at_aim
        rejected = np.maximum(rejected, shown)
    return state, np.where(at_aim >= log_target, np.maximum(rejected, aim), rejected)


def _at_aim(state: BetState, w: float) -> float:
    """The labels arm's log capital at its threshold (grid point 0) in ``state`` (0 before any),
    the plug-in gambler's share ``w``."""
    if not state.log_aimed:
        return 0.0
    return float(np.logaddexp(state.log_aimed[0] + math.log1p(-w), state.log_plugin[0] + math.log(w)))


def continue_sequence(start: PPIState, judge: Any, inclusion: Any, chosen: Any, human: Any) -> PPIState:
    """``start`` extended by the cases given (1-D arrays; ``human`` set on every chosen case).

    The same computation as :func:`~llm_connect.routing._ppi.ppi_sequence` over the cases
    before and these together, at ``start``'s settings; no validation (``human_bound``'s).
    """
    return continue_with_bounds(start, judge, inclusion, chosen, human)[0]


def continue_with_bounds(
    start: PPIState, judge: Any, inclusion: Any, chosen: Any, human: Any
) -> tuple[PPIState, Any, Any]:
    """:func:`continue_sequence`, and the running lower and upper bounds after each new case."""
    j = np.asarray(judge, dtype=float)
    n = j.size
    if n == 0:
        return start, np.zeros(0), np.zeros(0)
    p = np.asarray(inclusion, dtype=float)
    ch = np.asarray(chosen, dtype=bool)
    h = np.where(ch, np.nan_to_num(np.asarray(human, dtype=float)), 0.0)
    floor, share = start.floor, start.share
    alpha = start.alpha * (1.0 - share) if 0.0 < share < 1.0 else start.alpha
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
        # The mixture of the labels arm and this arm, on each side's own scale: people's
        # values for the lower side, one minus them (at the mirrored threshold) for the upper.
        v = h[ch]
        q = start.threshold
        lo_state, low = _side(labels[0], v, ch, q, sum_eta_y - penalty, sum_eta, share, start.alpha)
        up_state, high = _side(
            labels[1], 1.0 - v, ch, mirror(q), sum_up - penalty_up + sum_eta_up, sum_eta_up,
            share, start.alpha,
        )  # fmt: skip
        high = 1.0 - high
        labels = (lo_state, up_state)
    else:
        low = (sum_eta_y - penalty - log_inv_alpha) / sum_eta
        high = -((sum_up - penalty_up - log_inv_alpha) / sum_eta_up)
    lower = np.maximum.accumulate(np.concatenate(([start.best_low], low)))[1:]
    upper = np.minimum.accumulate(np.concatenate(([start.best_high], high)))[1:]
    state = replace(
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
        best_low=float(lower[-1]),
        best_high=float(upper[-1]),
        labels=labels,
    )
    return state, np.clip(lower, 0.0, 1.0), np.clip(upper, 0.0, 1.0)
