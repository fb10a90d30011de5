"""Prediction-powered, anytime-valid bounds on the mean *human* quality (issue 23).

Every case ``t`` (in arrival order) has a judge grade ``J_t`` in [0, 1]. Before any label of it
exists, the sampler fixes an inclusion probability ``p_t`` in (0, 1] (never below a ``floor``
fixed in advance) and draws ``chosen_t ~ Bernoulli(p_t)``; people label the chosen cases,
``H_t`` in [0, 1]. With a prediction ``a_t = clip(lam_t J_t + c_t, 0, 1)`` whose ``lam_t`` and
``c_t`` are tuned from earlier cases only, the per-case value

    y_t = a_t + (chosen_t / p_t) (H_t - a_t)

has conditional mean ``E[H_t]`` whatever the judge's bias (the chosen/p factor has mean one
given everything else). :func:`ppi_sequence` bounds that mean with a betting confidence
sequence, one side at a time: for the lower bound, with a predictable centre ``m_t``, scale
``S_t`` (the larger of the lower extent ``m_t - y_min`` and half the range), bet ``gamma_t``
in [0, 3/4] (WSR's schedule), ``xi_t = (y_t - m_t) / S_t >= -1`` and ``eta_t = gamma_t / S_t``,

    prod (1 + gamma_t xi_t) exp(eta_t (m_t - mu))

is a non-negative supermartingale at the true ``mu`` (each factor's conditional mean is
``(1 + eta_t (mu - m_t)) exp(-eta_t (mu - m_t)) <= 1``), and its log is linear in ``mu``, so by
Ville's inequality

    mu >= max_t (sum eta_i y_i - sum (gamma_i xi_i - log(1 + gamma_i xi_i)) - log(1/alpha)) / sum eta_i

at every ``t`` at once with probability ``1 - alpha``. The upper bound is the same for ``-y``.

Under uniform labelling the labelled cases are a random subsample, and the bound is that of a
fixed mixture of three e-processes (the insurance the labels buy, issue 35): the two gamblers
of the judges' target's betting sequence (``_betting``: one aimed at ``min_quality``, one
predictable plug-in) over the labels alone, and this one, with the shares of
:func:`~llm_connect.routing._ppi_running.arm_weights`. With every case labelled the bound is
the labels arm alone, the judges' target's own bound on people's values. The argument and the
measurements: ``docs/decisions.md``, "Routing on what people would say".

Pending labels (chosen, not yet labelled): the sequence stops before the first pending case;
the cases after it wait (:attr:`HumanBound.waiting`). Labels on cases the sampler did not
choose are refused (:func:`human_bound` raises); they cannot enter an unbiased estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from llm_connect.errors import ConfigurationError
from llm_connect.routing._bounds import cases_needed
from llm_connect.routing._choice import plural
from llm_connect.routing._ppi_running import (
    _RIDGE,
    LAM_MAX,
    PPIState,
    _range,
    arm_weights,
    continue_sequence,
    continue_with_bounds,
    side_terms,
    start_state,
)
from llm_connect.values import INSUFFICIENT, PROVEN, RULED_OUT, UNDECIDED

__all__ = [
    "ACTIVE_FLOOR",
    "NO_HUMAN_LABELS",
    "HumanBound",
    "PPISequence",
    "human_bound",
    "human_bound_continued",
    "inclusion_probabilities",
    "judge_uncertainty",
    "labels_share",
    "ppi_sequence",
    "uniform_inclusion",
]

NO_HUMAN_LABELS = "no human labels yet"
"""The status of a candidate whose bound has no human label to stand on."""


ACTIVE_FLOOR = 0.9
"""Active labelling's default floor, as a share of ``rate``: no case's inclusion probability
is below ``ACTIVE_FLOOR * rate``. The bound's range grows as ``1 / floor``, and in the
simulations that cost more labels than concentrating them on unsure cases saved: 0.5 (the
first default) needed 1.3-1.5x uniform's labels, 0.7 about 1.1x, 0.9 0.8-0.93x
(``docs/decisions.md``)."""


_PRIOR_WEIGHT = 1.0
"""Cases' worth of prior variance in the bets (WSR use one case at 1/4 for values in [0, 1])."""

_MAX_PROJECTED = 10_000_000


# -- inclusion probabilities -----------------------------------------------------------------


def _check_rate(rate: float, name: str = "rate") -> float:
    if not isinstance(rate, int | float) or not 0.0 < float(rate) <= 1.0 or math.isnan(rate):
        raise ConfigurationError(f"{name} must lie in (0, 1], not {rate!r}")
    return float(rate)


def uniform_inclusion(n: int, rate: float) -> Any:
    """Inclusion probabilities for ``n`` cases sampled uniformly: ``rate`` each."""
    return np.full(int(n), _check_rate(rate))


def judge_uncertainty(grades: Any) -> Any:
    """How unsure a preference-like grade is: ``2 sqrt(J (1 - J))`` in [0, 1].

    1 at a tie (0.5), 0 at a sure verdict (0 or 1); for a pairwise grade in {0, 0.5, 1} it equals
    ``1 - |2J - 1|``. For a calibrated probability ``J`` it is proportional to the standard
    deviation of the human label given the grade, the inclusion weight that minimises the
    estimate's variance (Zrnic & Candès, ICML 2024).
    """
    j = np.asarray(grades, dtype=float)
    if j.size and (not np.all(np.isfinite(j)) or j.min() < 0.0 or j.max() > 1.0):
        raise ConfigurationError("judge grades must lie in 0..1")
    return 2.0 * np.sqrt(j * (1.0 - j))


def inclusion_probabilities(
    uncertainty: Any, rate: float, floor: float | None = None, *, reference: Any = None
) -> Any:
    """Inclusion probabilities that grow with a judge-uncertainty score, mean ``rate``, never
    below ``floor`` (default ``ACTIVE_FLOOR * rate``).

    ``p_i = min(1, f + s u_i)``: ``f = floor`` and ``s`` solved so that the mean over
    ``reference`` is ``rate``; where even ``s = inf`` cannot reach it (most scores 0), every
    scored case gets 1 and ``f`` rises to make up the rate. ``reference``: the uncertainties of
    cases decided *before* these (so each ``p_i`` depends on case ``i`` and earlier cases only,
    which the bound's argument needs); without it, ``uncertainty`` itself (valid for a batch
    decided before any of its cases enters a bound, see ``docs/decisions.md``). All-equal
    scores give ``rate`` each.
    """
    rate = _check_rate(rate)
    floor = ACTIVE_FLOOR * rate if floor is None else _check_rate(floor, "floor")
    if floor > rate:
        raise ConfigurationError(f"floor {floor!r} must not exceed rate {rate!r}")
    u = _scores(uncertainty, "uncertainty")
    ref = u if reference is None else _scores(reference, "reference")
    if ref.size == 0 or float(ref.max()) <= float(ref.min()):
        return np.full(u.size, rate)
    scored = float((ref > 0).mean())
    if floor * (1.0 - scored) + scored <= rate:  # even s = inf falls short: raise the floor
        f = (rate - scored) / (1.0 - scored)
        return np.where(u > 0, 1.0, f)
    lo, hi = 0.0, 1.0
    while float(np.minimum(1.0, floor + hi * ref).mean()) < rate:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if float(np.minimum(1.0, floor + mid * ref).mean()) < rate else (lo, mid)
    return np.minimum(1.0, floor + hi * u)


def _scores(values: Any, name: str) -> Any:
    u = np.asarray(values, dtype=float)
    if u.ndim != 1:
        raise ConfigurationError(f"{name} must be a one-dimensional sequence")
    if u.size and (not np.all(np.isfinite(u)) or u.min() < 0.0):
        raise ConfigurationError(f"{name} scores must be finite and >= 0")
    return u


# -- the sequence ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PPISequence:
    """Per case (columns; rows are independent series), the running anytime bounds and the
    tuned coefficients: ``lower[..., t]`` / ``upper[..., t]`` hold after cases ``0..t``."""

    lower: Any
    upper: Any
    y: Any
    lam: Any
    offset: Any


def _shift(x: Any, fill: float) -> Any:
    """``x`` one case later along the last axis (the value before each case), ``fill`` first."""
    out = np.full_like(x, fill)
    out[..., 1:] = x[..., :-1]
    return out


def _tuning(j: Any, p: Any, ch: Any, h: Any) -> tuple[Any, Any]:
    """``(lam, c)`` after each case (inclusive): the weighted least-squares fit of H on J over the
    labelled cases so far, weights ``(1/p)(1/p - 1)`` (``Var y = Var H + E[(1/p - 1)(H - a)^2]``),
    with a ridge prior of :data:`_RIDGE` labels at ``lam = 0``, ``c = 1/2``."""
    w = np.where(ch, (1.0 - p) / (p * p), 0.0)
    n_lab = np.cumsum(ch, axis=-1, dtype=float)
    sw = np.cumsum(w, axis=-1)
    scale = np.where(sw > 0.0, n_lab / np.where(sw > 0.0, sw, 1.0), 0.0)  # weights in labels
    total = sw * scale + _RIDGE
    mj = (np.cumsum(w * j, axis=-1) * scale + 0.5 * _RIDGE) / total
    mh = (np.cumsum(w * h, axis=-1) * scale + 0.5 * _RIDGE) / total
    cov = np.cumsum(w * j * h, axis=-1) * scale / total - mj * mh
    var = (np.cumsum(w * j * j, axis=-1) * scale + 0.25 * _RIDGE) / total - mj * mj
    lam = np.clip(cov / (var + 1e-3), 0.0, LAM_MAX)
    return lam, mh - lam * mj


def ppi_sequence(
    judge: Any,
    inclusion: Any,
    chosen: Any,
    human: Any,
    alpha: float,
    *,
    floor: float,
    labels_share: float = 0.0,
    threshold: float = 0.5,
) -> PPISequence:
    """The anytime lower and upper bounds of the mean human value after each case.

    Arrays are ``(n,)`` or ``(runs, n)``: ``judge`` in [0, 1], ``inclusion`` (``p_t``) in
    [``floor``, 1], ``chosen`` boolean, ``human`` in [0, 1] on every chosen case (ignored
    elsewhere). No validation: :func:`human_bound` validates and cuts pending cases.
    ``labels_share`` > 0 (uniform labelling only): the bounds of the mixture with that weight
    on the labels arm (the betting sequence over the labels alone, aimed at ``threshold``, bets
    tuned at that share of ``alpha``) and the rest on the prediction-powered one (bets tuned at
    the rest); 1: the labels arm alone (every case labelled). :func:`labels_share` gives the
    share :func:`human_bound` uses.
    """
    if labels_share > 0.0:
        arm_alpha = alpha * (1.0 - labels_share) if labels_share < 1.0 else alpha
        seq = _ppi_arm(judge, inclusion, chosen, human, arm_alpha, floor)
        j, p, ch, h = (np.atleast_2d(np.asarray(x)) for x in (judge, inclusion, chosen, human))
        lower, upper = np.empty(j.shape), np.empty(j.shape)
        for r in range(j.shape[0]):
            _, lower[r], upper[r] = continue_with_bounds(
                start_state(alpha, floor, labels_share, threshold), j[r], p[r], ch[r].astype(bool), h[r]
            )
        shape = np.shape(judge)
        return replace(seq, lower=lower.reshape(shape), upper=upper.reshape(shape))
    return _ppi_arm(judge, inclusion, chosen, human, alpha, floor)


def _ppi_arm(judge: Any, inclusion: Any, chosen: Any, human: Any, alpha: float, floor: float) -> PPISequence:
    """The prediction-powered sequence alone, bets tuned at ``alpha``."""
    j = np.asarray(judge, dtype=float)
    p = np.asarray(inclusion, dtype=float)
    ch = np.asarray(chosen, dtype=bool)
    h = np.where(ch, np.nan_to_num(np.asarray(human, dtype=float)), 0.0)
    n = j.shape[-1]
    log_inv_alpha = math.log(1.0 / alpha)
    lam_after, c_after = _tuning(j, p, ch, h)
    lam, c = _shift(lam_after, 0.0), _shift(c_after, 0.5)  # the prior before any label
    a = np.clip(lam * j + c, 0.0, 1.0)
    y = a + np.where(ch, (h - a) / p, 0.0)
    y_min, y_max = _range(lam, c, floor)
    width = y_max - y_min

    # Centre and variance of y before each case (WSR's estimates; the variance prior is one
    # case at (1/4) / floor, what inverse-probability weighting can reach, not 1/4).
    t = np.arange(1, n + 1, dtype=float)
    first = np.ones((*j.shape[:-1], 1))
    mean_after = np.clip((0.5 + np.cumsum(y, axis=-1)) / (t + 1.0), 0.0, 1.0)
    m = np.concatenate((0.5 * first, mean_after[..., :-1]), axis=-1)
    prior = 0.25 / floor
    sq_after = (prior + np.cumsum((y - mean_after) ** 2, axis=-1)) / (t + 1.0)
    s2 = np.concatenate((prior * first, sq_after[..., :-1]), axis=-1)
    bet = np.sqrt(2.0 * log_inv_alpha / (s2 * t * np.log1p(t)))  # on y, before truncation
    lo = [np.cumsum(x, axis=-1) for x in side_terms(y, m, bet, m - y_min, width, floor)]
    up = [np.cumsum(x, axis=-1) for x in side_terms(-y, -m, bet, y_max - m, width, floor)]
    low = (lo[0] - lo[1] - log_inv_alpha) / lo[2]
    high = -((up[0] - up[1] - log_inv_alpha) / up[2])
    lower = np.clip(np.maximum.accumulate(low, axis=-1), 0.0, 1.0)
    upper = np.clip(np.minimum.accumulate(high, axis=-1), 0.0, 1.0)
    return PPISequence(lower=lower, upper=upper, y=y, lam=lam, offset=c)


# -- one candidate's evidence ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HumanBound:
    """What the judge's grades and the people's labels say about one candidate's mean human quality.

    ``lower`` / ``upper``: the anytime-valid one-sided bounds at ``alpha`` (``None`` with no label
    in the sequence). ``estimate``: the prediction-powered point estimate (coefficients tuned on
    every label used); ``judge_mean``: the judge's mean over every case; ``judge_bias``: the mean
    of ``J - H`` over the labelled cases. ``cases_used`` cases enter the sequence (those before
    the first pending label); ``waiting`` cases after it do not yet; ``pending`` chosen cases
    await their label. ``more_labels`` / ``more_cases``: about how many more would settle an
    undecided candidate at the observed spread (``None``: settled, or too close to call).
    """

    status: str
    lower: float | None
    upper: float | None
    estimate: float | None
    judge_mean: float | None
    judge_bias: float | None
    cases: int
    cases_used: int
    labels_used: int
    pending: int
    waiting: int
    more_labels: int | None
    more_cases: int | None
    alpha: float
    lam: float | None
    offset: float | None
    why: str


def _validate(
    judge: Any, inclusion: Any, chosen: Any, human: Any, floor: float | None
) -> tuple[Any, Any, Any, Any, float]:
    j = np.asarray(judge, dtype=float)
    p = np.asarray(inclusion, dtype=float)
    ch_raw = np.asarray(chosen)
    h = np.asarray(human, dtype=float)
    if not (j.ndim == p.ndim == ch_raw.ndim == h.ndim == 1) or not (
        j.size == p.size == ch_raw.size == h.size
    ):
        raise ConfigurationError("judge, inclusion, chosen and human must be 1-D sequences of one length")
    if ch_raw.size and not np.all((ch_raw == 0) | (ch_raw == 1)):
        raise ConfigurationError("chosen must be booleans")
    ch = ch_raw.astype(bool)

    def first(bad: Any, what: str) -> None:
        if bad.any():
            i = int(np.argmax(bad))
            raise ConfigurationError(f"case {i}: {what}")

    first(~np.isfinite(j) | (j < 0.0) | (j > 1.0), "judge grade outside 0..1")
    first(~np.isfinite(p) | (p <= 0.0) | (p > 1.0), "inclusion probability outside (0, 1]")
    labelled = ~np.isnan(h)
    first(labelled & ((h < 0.0) | (h > 1.0)), "human value outside 0..1")
    first(
        labelled & ~ch,
        "has a human label but was not chosen by the sampler; such labels cannot enter the bound "
        "(they count for agreement only, or import them as sampled uniformly)",
    )
    low = float(p.min()) if p.size else 1.0
    floor = low if floor is None else _check_rate(floor, "floor")
    if floor > low + 1e-12:
        first(p < floor, f"inclusion probability below the sampler's floor {floor!r}")
    return j, p, ch, h, floor


def _settings(state: PPIState) -> tuple[float, float, float, float]:
    return state.alpha, state.floor, state.share, state.threshold


def labels_share(inclusion: Any, threshold: float) -> float:
    """The labels arm's weight for these inclusion probabilities: its two gamblers' shares of
    :func:`~llm_connect.routing._ppi_running.arm_weights` under uniform labelling below rate 1
    (the labelled cases are then a random subsample), 1 when every case is labelled (the labels
    arm alone), 0 otherwise (active labelling: the prediction-powered arm alone)."""
    p = np.asarray(inclusion, dtype=float)
    if not p.size or not bool(np.all(p == p[0])):
        return 0.0
    if p[0] >= 1.0:
        return 1.0
    aimed, plugin, _ = arm_weights(threshold)
    return aimed + plugin


def human_bound(
    judge: Any,
    inclusion: Any,
    chosen: Any,
    human: Any,
    *,
    alpha: float,
    min_quality: float,
    floor: float | None = None,
    min_samples: int = 30,
) -> HumanBound:
    """Bounds and evidence about the mean human quality from judge grades and sampled labels.

    Per case in arrival order: ``judge`` (``J_t``), ``inclusion`` (``p_t``, fixed before the
    label), ``chosen`` and ``human`` (``H_t``; NaN when not chosen or not yet labelled).
    ``floor``: the least inclusion probability the sampler could give (default: the least
    given). Under uniform labelling (every ``p_t`` equal) the labels arm takes the share
    :func:`labels_share` of the mixture. Status: ``ruled out``
    (upper < ``min_quality``), ``proven`` (lower >= it with at
    least ``min_samples`` cases), ``undecided``/``insufficient``, or :data:`NO_HUMAN_LABELS`.
    Raises ``ConfigurationError`` (a ``ValueError``) naming the case for bad input, including a
    label on a case the sampler did not choose.
    """
    return human_bound_continued(
        judge, inclusion, chosen, human, alpha=alpha, min_quality=min_quality, floor=floor,
        min_samples=min_samples,
    )[0]  # fmt: skip


def human_bound_continued(
    judge: Any,
    inclusion: Any,
    chosen: Any,
    human: Any,
    *,
    alpha: float,
    min_quality: float,
    floor: float | None = None,
    min_samples: int = 30,
    start: PPIState | None = None,
) -> tuple[HumanBound, PPIState | None]:
    """:func:`human_bound`, and the sequence's running sums at the first pending case (``None``
    without a label in the sequence), from which a later call continues.

    ``start``: running sums of an earlier call over the same first ``start.t`` cases (the
    caller vouches that they have not changed since); used when its settings are this call's
    and it does not reach past the first pending case, else the sequence starts again. The
    figures are those of a fresh computation either way (``tests/routing/test_ppi_running.py``).
    """
    if not 0.0 < alpha < 1.0:
        raise ConfigurationError(f"alpha must lie strictly between 0 and 1, not {alpha!r}")
    if not 0.0 <= min_quality <= 1.0:
        raise ConfigurationError(f"min_quality must lie in 0..1, not {min_quality!r}")
    j, p, ch, h, floor = _validate(judge, inclusion, chosen, human, floor)
    n = j.size
    pending_mask = ch & np.isnan(h)
    cut = int(np.argmax(pending_mask)) if pending_mask.any() else n
    labelled = ch & ~np.isnan(h)
    used = slice(0, cut)
    labels_used = int(ch[used].sum())
    judge_mean = float(j.mean()) if n else None
    bias = float((j[labelled] - h[labelled]).mean()) if labelled.any() else None
    pending = int(pending_mask.sum())
    base = HumanBound(
        status=NO_HUMAN_LABELS,
        lower=None,
        upper=None,
        estimate=None,
        judge_mean=judge_mean,
        judge_bias=bias,
        cases=n,
        cases_used=cut,
        labels_used=labels_used,
        pending=pending,
        waiting=n - cut,
        more_labels=None,
        more_cases=None,
        alpha=alpha,
        lam=None,
        offset=None,
        why=f"{NO_HUMAN_LABELS}: {n} cases graded by the judge"
        + (f", {pending} chosen for labelling and awaiting their label" if pending else ""),
    )
    if labels_used == 0:
        return base, None
    state = start_state(alpha, floor, labels_share(p, min_quality), min_quality)
    # The sequence over the cases used, continued from ``start`` when it belongs to it.
    if start is not None and start.t <= cut and _settings(start) == _settings(state):
        state = start
    state = continue_sequence(state, j[state.t : cut], p[state.t : cut], ch[state.t : cut], h[state.t : cut])
    lower, upper = state.bounds()
    jj, pp, cc, hh = j[used], p[used], ch[used], np.nan_to_num(h[used])
    lam, c = state.coefficients()
    a = np.clip(lam * jj + c, 0.0, 1.0)
    y = a + np.where(cc, (hh - a) / pp, 0.0)
    estimate = float(np.clip(y.mean(), 0.0, 1.0))
    more_cases = more_labels = None
    if upper < min_quality:
        status, verdict = RULED_OUT, f"upper bound {upper:.3f} < min_quality {min_quality:g}"
    elif lower >= min_quality and cut >= min_samples:
        status, verdict = PROVEN, f"lower bound {lower:.3f} >= min_quality {min_quality:g}"
    else:
        status = INSUFFICIENT if cut < min_samples else UNDECIDED
        verdict = f"bounds [{lower:.3f}, {upper:.3f}] around min_quality {min_quality:g}"
        total = _projected_total(estimate, y, pp, cc, hh, a, lam, c, floor, min_quality, alpha)
        if total is not None:
            more_cases = max(total, min_samples, cut + 1) - cut
            more_labels = max(1, math.ceil(more_cases * float(pp.mean())))
            verb = "prove" if estimate >= min_quality else "rule it out"
            verdict += (
                f"; about {plural(more_labels, 'more label')} (and {plural(more_cases, 'more case')}) "
                f"would {verb} "
                "at the observed spread"
            )
        else:
            verdict += "; too close to call: the estimate is too near min_quality"
    why = (
        f"human quality {status}: {labels_used} labels on {cut} cases, prediction-powered estimate "
        f"{estimate:.3f} (judge alone {judge_mean:.3f}, judge bias {bias:+.3f}), {verdict}"
    )
    if pending:
        waiting = n - cut
        why += (
            f"; {pending} label{'s' if pending != 1 else ''} pending, "
            f"{waiting} case{' waits' if waiting == 1 else 's wait'} for {'it' if pending == 1 else 'them'}"
        )
    bound = replace(
        base,
        status=status,
        lower=lower,
        upper=upper,
        estimate=estimate,
        more_labels=more_labels,
        more_cases=more_cases,
        lam=lam,
        offset=c,
        why=why,
    )
    return bound, state


def _projected_total(
    estimate: float,
    y: Any,
    p: Any,
    ch: Any,
    h: Any,
    a: Any,
    lam: float,
    c: float,
    floor: float,
    threshold: float,
    alpha: float,
) -> int | None:
    """About how many cases in all the bound needs, if future cases look like these.

    With the final coefficients the sequence is the [0, 1] bound of ``x = (y - y_min) / W``, so
    :func:`~llm_connect.routing._bounds.cases_needed` projects it at the mean and variance of
    ``x``: ``Var y = Var H + E[(1/p - 1)(H - a)^2]``, both estimated by inverse-probability
    weighting over the labelled cases.
    """
    n = y.size
    var_h = float(np.sum(np.where(ch, (h - estimate) ** 2 / p, 0.0))) / n
    resid = float(np.sum(np.where(ch, (1.0 / p) * (1.0 / p - 1.0) * (h - a) ** 2, 0.0))) / n
    y_min, y_max = _range(np.float64(lam), np.float64(c), floor)
    width = float(y_max - y_min)
    mean_x = (estimate - float(y_min)) / width
    threshold_x = (threshold - float(y_min)) / width
    return cases_needed(mean_x, (var_h + resid) / width**2, threshold_x, alpha)
