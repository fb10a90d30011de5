"""Confidence intervals for a mean quality score.

Method: the two-sided Student t-interval ``mean ± t(1 - (1 - confidence)/2, n - 1) · s / √n``
with ``s`` the sample standard deviation (``n - 1`` denominator). The
interval is clipped to 0..1, the range of every quality score. With ``n < 2``
the standard deviation and the interval are undefined and reported as
``None`` (never NaN).

The t quantile is computed here in pure Python (no scipy at import or call
time: a ``grade`` run would otherwise spend about a second importing
``scipy.stats`` for one number). It inverts the exact upper tail
``P(T > t) = ½ · I_{ν/(ν+t²)}(ν/2, ½)`` (regularised incomplete beta by
Lentz's continued fraction) with safeguarded Newton steps; ν = 1 and 2 have
closed forms and ν > 10⁴ uses the Cornish-Fisher expansion (Abramowitz &
Stegun 26.7.5), whose error there is far below double rounding. It agrees
with ``scipy.stats.t.ppf`` to about 1e-10 relative
(``tests/ledger/test_stats.py``).

The database returns ``n``, ``Σx`` and ``Σx²``; :func:`mean_std` turns those
into a mean and standard deviation (a variance below rounding noise is 0).
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

__all__ = ["mean_std", "t_interval", "t_quantile"]

_LARGE_DF = 10_000
_TINY = 1e-300


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            delta = c * d
            h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return h


def _t_sf(t: float, df: int) -> float:
    """``P(T > t)`` for Student's t with ``df`` degrees of freedom, ``t >= 0``."""
    if t == 0.0:
        return 0.5
    a, b = df / 2.0, 0.5
    x = df / (df + t * t)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    if x < (a + 1.0) / (a + b + 2.0):
        return 0.5 * math.exp(log_front + a * math.log(x) + b * math.log1p(-x)) * _beta_cf(a, b, x) / a
    y = t * t / (df + t * t)  # 1 - x without cancellation
    tail = math.exp(log_front + b * math.log(y) + a * math.log1p(-y)) * _beta_cf(b, a, y) / b
    return 0.5 * (1.0 - tail)


def _t_pdf(t: float, df: int) -> float:
    log_c = math.lgamma((df + 1) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1) / 2.0 * math.log1p(t * t / df))


def _cornish_fisher(p: float, df: int) -> float:
    """The upper ``p`` quantile of t by its expansion around the normal one (A&S 26.7.5)."""
    z = NormalDist().inv_cdf(1.0 - p) if p > 1e-300 else 38.5
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0
    v = float(df)
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


def _upper_quantile(p: float, df: int) -> float:
    """``t`` with ``P(T > t) = p`` for ``0 < p < ½``."""
    if df == 1:
        return math.tan(math.pi * (0.5 - p))
    if df == 2:
        return (1.0 - 2.0 * p) / math.sqrt(2.0 * p * (1.0 - p))
    guess = _cornish_fisher(p, df)
    if df > _LARGE_DF:
        return guess
    # Bracket [lo, hi] with sf(lo) > p > sf(hi), then Newton on log sf, bisecting when a step leaves it.
    lo, hi = 0.0, max(guess, 1.0)
    while _t_sf(hi, df) > p:
        lo, hi = hi, hi * 2.0
    t = min(max(guess, lo), hi)
    log_p = math.log(p)
    for _ in range(200):
        sf = _t_sf(t, df)
        if sf > p:
            lo = t
        else:
            hi = t
        step = (math.log(sf) - log_p) * sf / _t_pdf(t, df)
        nxt = t + step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2.0
        if abs(nxt - t) <= 1e-15 * max(1.0, abs(t)) or hi - lo <= 1e-15 * hi:
            return nxt
        t = nxt
    return t  # pragma: no cover - Newton converges in a handful of steps


@lru_cache(maxsize=4096)
def t_quantile(confidence: float, df: int) -> float:
    """The two-sided ``confidence`` critical value of Student's t with ``df`` degrees of freedom.

    Equal to ``scipy.stats.t.ppf(1 - (1 - confidence) / 2, df)`` (to about
    1e-10 relative) without importing scipy.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, not {confidence!r}")
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, not {df!r}")
    return _upper_quantile((1.0 - confidence) / 2.0, int(df))


def mean_std(n: int, total: float, total_sq: float) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation from a count, a sum and a sum of squares."""
    if n <= 0:
        return None, None
    mean = total / n
    if n < 2:
        return mean, None
    var = (total_sq - total * total / n) / (n - 1)
    # Rounding in Σx² − (Σx)²/n leaves tiny residues (even negative ones) for constant data.
    if var <= 1e-12 * max(1.0, mean * mean):
        var = 0.0
    return mean, math.sqrt(var)


def t_interval(
    n: int, mean: float | None, std: float | None, confidence: float
) -> tuple[float | None, float | None]:
    """``(low, high)`` of the t-interval for the mean, clipped to 0..1; ``(None, None)`` if undefined."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, not {confidence!r}")
    if n < 2 or mean is None or std is None:
        return None, None
    half = t_quantile(confidence, n - 1) * std / math.sqrt(n)
    return max(0.0, mean - half), min(1.0, mean + half)
