"""Agreement statistics between two judges' scores, with reproducible bootstrap intervals.

Everything here works on plain arrays: ``x`` holds the judge under test's
scores, ``y`` the reference judge's scores for the same pairs, in the same
order. Point estimates come from :mod:`scipy.stats` (Pearson, Spearman,
Kendall's tau-b) or closed formulas (mean absolute difference, Cohen's kappa of the
pass/fail verdicts by :func:`llm_connect.labels.cohen_kappa_rows`, the one Cohen's kappa);
the 95% intervals come from one percentile bootstrap per reference.

The bootstrap
-------------
``B`` resamples of the ``n`` pair indices are drawn with replacement from
``numpy.random.default_rng(seed)`` (seed 20261121 unless told otherwise), once
per call of :func:`judge_agreement`, and every statistic is computed on the same
resamples (a paired bootstrap). The interval is the 2.5th and 97.5th
percentile (numpy's default linear interpolation) of the replicates where the
statistic is defined. If it is undefined in more than
:data:`MAX_UNDEFINED_FRACTION` of the replicates (for example kappa when most
resamples hold only passes), the interval is ``None`` with a reason. The same
data, seed and ``B`` always give the same numbers.

Undefined statistics are ``None`` with a reason, never NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from llm_connect.labels import cohen_kappa_rows

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "DEFAULT_SEED",
    "MAX_UNDEFINED_FRACTION",
    "MIN_PAIRS",
    "ConfusionMatrix",
    "Estimate",
    "JudgeAgreement",
    "bootstrap_indices",
    "confusion_matrix",
    "estimate_from_replicates",
    "judge_agreement",
    "kendall_tau",
    "mean_abs_diff",
    "mean_with_ci",
    "pass_fail_kappa",
    "pearson",
    "spearman",
    "spearman_with_ci",
]

DEFAULT_SEED = 20261121
"""Seed of :func:`numpy.random.default_rng` for every bootstrap."""
DEFAULT_BOOTSTRAP = 2000
"""Bootstrap resamples per statistic."""
MIN_PAIRS = 10
"""Fewer paired grades than this give an "insufficient data" result, not numbers."""
MAX_UNDEFINED_FRACTION = 0.1
"""An interval is reported only if the statistic is defined in at least 90% of replicates."""

_PAIRWISE_LIMIT = 1500  # above this n, Kendall's bootstrap loops over scipy instead of n x n matrices

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Estimate:
    """A statistic with its bootstrap 95% interval.

    ``value`` is ``None`` when the statistic is undefined (``reason`` says
    why); ``ci_low``/``ci_high`` are ``None`` when no interval could be formed.
    """

    value: float | None
    """The point estimate on all pairs."""
    ci_low: float | None = None
    """2.5th percentile of the bootstrap replicates."""
    ci_high: float | None = None
    """97.5th percentile of the bootstrap replicates."""
    reason: str | None = None
    """Why the value or the interval is missing."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-strict form (no NaN, no numpy types)."""
        return {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Estimate:
        """Inverse of :meth:`to_dict`."""
        return cls(data.get("value"), data.get("ci_low"), data.get("ci_high"), data.get("reason"))

    @classmethod
    def undefined(cls, reason: str) -> Estimate:
        """An estimate that could not be computed."""
        return cls(None, None, None, reason)


@dataclass(frozen=True)
class ConfusionMatrix:
    """Pass/fail agreement at a threshold: rows are the judge, columns the reference.

    ``pass`` means ``score >= threshold``. ``judge_pass_ref_fail`` counts the
    pairs the judge passed and the reference failed, and so on.
    """

    threshold: float
    both_pass: int
    judge_pass_ref_fail: int
    judge_fail_ref_pass: int
    both_fail: int
    rates: Mapping[str, Estimate] = field(default_factory=dict)
    """Each cell as a fraction of ``n`` with its bootstrap interval (keys as the cell names)."""

    @property
    def n(self) -> int:
        """Number of pairs counted."""
        return self.both_pass + self.judge_pass_ref_fail + self.judge_fail_ref_pass + self.both_fail

    def to_dict(self) -> dict[str, Any]:
        """JSON form; ``matrix`` is ``[[both_pass, jp_rf], [jf_rp, both_fail]]`` (judge rows)."""
        return {
            "threshold": self.threshold,
            "both_pass": self.both_pass,
            "judge_pass_ref_fail": self.judge_pass_ref_fail,
            "judge_fail_ref_pass": self.judge_fail_ref_pass,
            "both_fail": self.both_fail,
            "matrix": [
                [self.both_pass, self.judge_pass_ref_fail],
                [self.judge_fail_ref_pass, self.both_fail],
            ],
            "rates": {k: v.to_dict() for k, v in self.rates.items()},
        }


@dataclass(frozen=True)
class JudgeAgreement:
    """How well one judge's scores agree with a reference's, pair by pair.

    When ``n < min_pairs`` every statistic is ``None`` and ``status`` is
    ``"insufficient data"``.
    """

    n: int
    status: str
    """``"ok"`` or ``"insufficient data"``."""
    reason: str | None
    pearson: Estimate
    spearman: Estimate
    kendall_tau: Estimate
    mean_abs_diff: Estimate
    cohen_kappa: Estimate
    agreement_rate: Estimate
    """Fraction of pairs with the same pass/fail verdict (the diagonal of the confusion matrix)."""
    confusion: ConfusionMatrix | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-strict form."""
        return {
            "n": self.n,
            "status": self.status,
            "reason": self.reason,
            "pearson": self.pearson.to_dict(),
            "spearman": self.spearman.to_dict(),
            "kendall_tau": self.kendall_tau.to_dict(),
            "mean_abs_diff": self.mean_abs_diff.to_dict(),
            "cohen_kappa": self.cohen_kappa.to_dict(),
            "agreement_rate": self.agreement_rate.to_dict(),
            "confusion": None if self.confusion is None else self.confusion.to_dict(),
        }


# -- inputs ----------------------------------------------------------------------------------------


def _as_pair(x: ArrayLike, y: ArrayLike) -> tuple[FloatArray, FloatArray]:
    xa = np.asarray(x, dtype=np.float64).reshape(-1)
    ya = np.asarray(y, dtype=np.float64).reshape(-1)
    if xa.shape != ya.shape:
        raise ValueError(f"x and y must have the same length, not {xa.size} and {ya.size}")
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(ya))):
        raise ValueError("scores must be finite numbers (no NaN or infinity)")
    return xa, ya


def _float(value: Any) -> float | None:
    f = float(value)
    return f if math.isfinite(f) else None


def _constant_reason(x: FloatArray, y: FloatArray, what: str) -> str | None:
    if x.size < 2:
        return f"{what} needs at least 2 pairs"
    if np.all(x == x[0]) and np.all(y == y[0]):
        return f"{what} undefined: both judges' scores are constant"
    if np.all(x == x[0]):
        return f"{what} undefined: the judge's scores are constant"
    if np.all(y == y[0]):
        return f"{what} undefined: the reference's scores are constant"
    return None


# -- point estimates -------------------------------------------------------------------------------


def pearson(x: ArrayLike, y: ArrayLike) -> tuple[float | None, str | None]:
    """Pearson's r (``scipy.stats.pearsonr``); ``(None, reason)`` when a side is constant."""
    from scipy import stats

    xa, ya = _as_pair(x, y)
    reason = _constant_reason(xa, ya, "Pearson's r")
    if reason:
        return None, reason
    return _float(stats.pearsonr(xa, ya).statistic), None


def spearman(x: ArrayLike, y: ArrayLike) -> tuple[float | None, str | None]:
    """Spearman's rho (``scipy.stats.spearmanr``, average ranks for ties)."""
    from scipy import stats

    xa, ya = _as_pair(x, y)
    reason = _constant_reason(xa, ya, "Spearman's rho")
    if reason:
        return None, reason
    return _float(stats.spearmanr(xa, ya).statistic), None


def kendall_tau(x: ArrayLike, y: ArrayLike) -> tuple[float | None, str | None]:
    """Kendall's tau-b (``scipy.stats.kendalltau``, which corrects for ties)."""
    from scipy import stats

    xa, ya = _as_pair(x, y)
    reason = _constant_reason(xa, ya, "Kendall's tau")
    if reason:
        return None, reason
    return _float(stats.kendalltau(xa, ya).statistic), None


def mean_abs_diff(x: ArrayLike, y: ArrayLike) -> float:
    """Mean of ``|x - y|`` (0 means identical scores)."""
    xa, ya = _as_pair(x, y)
    if xa.size == 0:
        raise ValueError("mean absolute difference of no pairs")
    return float(np.mean(np.abs(xa - ya)))


def confusion_matrix(x: ArrayLike, y: ArrayLike, threshold: float) -> ConfusionMatrix:
    """Pass/fail counts at ``threshold`` (pass means ``score >= threshold``)."""
    xa, ya = _as_pair(x, y)
    jp, rp = xa >= threshold, ya >= threshold
    return ConfusionMatrix(
        threshold=float(threshold),
        both_pass=int(np.sum(jp & rp)),
        judge_pass_ref_fail=int(np.sum(jp & ~rp)),
        judge_fail_ref_pass=int(np.sum(~jp & rp)),
        both_fail=int(np.sum(~jp & ~rp)),
    )


def pass_fail_kappa(x: ArrayLike, y: ArrayLike, threshold: float) -> tuple[float | None, str | None]:
    """Cohen's kappa of the pass/fail verdicts at ``threshold``, with the reason when undefined.

    ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_o`` the observed agreement and
    ``p_e = p_j p_r + (1 - p_j)(1 - p_r)`` the agreement expected from the two
    pass rates: :func:`llm_connect.labels.cohen_kappa_rows` with two classes. Undefined
    (``None``) when ``p_e == 1``: both judges give every pair the same verdict.
    """
    xa, ya = _as_pair(x, y)
    if xa.size == 0:
        return None, "Cohen's kappa needs at least 1 pair"
    value = cohen_kappa_rows((xa >= threshold)[None, :], (ya >= threshold)[None, :], 2)[0]
    if math.isnan(value):
        return None, "Cohen's kappa undefined: both judges give every pair the same verdict"
    return float(value), None


# -- vectorised forms over bootstrap resamples (one row per replicate) -----------------------------


def bootstrap_indices(
    n: int, *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = DEFAULT_SEED
) -> NDArray[np.intp]:
    """``n_boot`` x ``n`` indices drawn with replacement from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(n_boot, n))


def _pearson_rows(xs: FloatArray, ys: FloatArray) -> FloatArray:
    xc = xs - xs.mean(axis=1, keepdims=True)
    yc = ys - ys.mean(axis=1, keepdims=True)
    num = np.einsum("ij,ij->i", xc, yc)
    den = np.sqrt(np.einsum("ij,ij->i", xc, xc) * np.einsum("ij,ij->i", yc, yc))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    # a constant row has exactly zero spread; tiny spreads from rounding are constant too
    const = (np.ptp(xs, axis=1) == 0) | (np.ptp(ys, axis=1) == 0)
    r[const] = np.nan
    return np.clip(r, -1.0, 1.0)


def _spearman_rows(xs: FloatArray, ys: FloatArray) -> FloatArray:
    from scipy.stats import rankdata

    return _pearson_rows(rankdata(xs, axis=1), rankdata(ys, axis=1))


def _kendall_rows(x: FloatArray, y: FloatArray, idx: NDArray[np.intp]) -> FloatArray:
    """Kendall's tau-b of each resample, from per-index multiplicities.

    With ``w`` the multiplicity of each original pair in a resample, the
    concordance sum is ``w' C w / 2`` (``C[i, j] = sign(x_i - x_j) sign(y_i - y_j)``)
    and the tied pairs in x are ``(w' T w - sum(w)) / 2`` (``T[i, j] = [x_i == x_j]``),
    so all replicates come from a few matrix products.
    """
    n_boot, n = idx.shape
    if n > _PAIRWISE_LIMIT:
        from scipy import stats

        out = np.empty(n_boot)
        for b in range(n_boot):
            xb, yb = x[idx[b]], y[idx[b]]
            out[b] = np.nan if np.ptp(xb) == 0 or np.ptp(yb) == 0 else stats.kendalltau(xb, yb).statistic
        return out
    rows = np.repeat(np.arange(n_boot) * n, n)
    w = np.bincount(rows + idx.reshape(-1), minlength=n_boot * n).reshape(n_boot, n).astype(np.float64)
    sx = np.sign(x[:, None] - x[None, :])
    sy = np.sign(y[:, None] - y[None, :])
    # one matrix product for the concordance sum and both tie counts
    blocks = np.concatenate([sx * sy, (sx == 0).astype(np.float64), (sy == 0).astype(np.float64)], axis=1)
    wc = (w @ blocks).reshape(n_boot, 3, n)
    quad = np.einsum("bki,bi->bk", wc, w)
    concord = 0.5 * quad[:, 0]
    ties_x = 0.5 * (quad[:, 1] - n)
    ties_y = 0.5 * (quad[:, 2] - n)
    n0 = n * (n - 1) / 2.0
    den = np.sqrt(np.maximum(n0 - ties_x, 0.0) * np.maximum(n0 - ties_y, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(den > 0, concord / np.where(den > 0, den, 1.0), np.nan)
    return np.clip(tau, -1.0, 1.0)


def estimate_from_replicates(
    value: float | None, replicates: ArrayLike, *, reason: str | None = None
) -> Estimate:
    """Percentile 95% interval from bootstrap replicates (NaN marks an undefined replicate)."""
    if value is None:
        return Estimate(None, None, None, reason)
    reps = np.asarray(replicates, dtype=np.float64)
    defined = reps[np.isfinite(reps)]
    if reps.size == 0:
        return Estimate(value, None, None, reason or "no bootstrap replicates")
    undefined = 1.0 - defined.size / reps.size
    if undefined > MAX_UNDEFINED_FRACTION:
        return Estimate(
            value, None, None, f"no interval: undefined in {undefined:.0%} of bootstrap resamples"
        )
    low, high = np.percentile(defined, [2.5, 97.5])
    return Estimate(value, _float(low), _float(high), reason)


# -- the whole comparison --------------------------------------------------------------------------


def judge_agreement(
    x: ArrayLike,
    y: ArrayLike,
    *,
    threshold: float = 0.5,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    min_pairs: int = MIN_PAIRS,
) -> JudgeAgreement:
    """Every agreement statistic of judge scores ``x`` against reference scores ``y``.

    ``x[i]`` and ``y[i]`` must grade the same pair. Fewer than ``min_pairs``
    pairs give ``status="insufficient data"`` and no numbers.
    """
    xa, ya = _as_pair(x, y)
    n = int(xa.size)
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, not {n_boot}")
    if n < max(min_pairs, 1):
        why = f"insufficient data: {n} paired grades < minimum {min_pairs}"
        none = Estimate.undefined(why)
        return JudgeAgreement(n, "insufficient data", why, none, none, none, none, none, none, None)

    idx = bootstrap_indices(n, n_boot=n_boot, seed=seed)
    xs, ys = xa[idx], ya[idx]
    jp, rp = xa >= threshold, ya >= threshold
    jps, rps = jp[idx], rp[idx]

    p, p_why = pearson(xa, ya)
    s, s_why = spearman(xa, ya)
    k, k_why = kendall_tau(xa, ya)
    kap, kap_why = pass_fail_kappa(xa, ya, threshold)
    return JudgeAgreement(
        n=n,
        status="ok",
        reason=None,
        pearson=estimate_from_replicates(p, _pearson_rows(xs, ys) if p is not None else [], reason=p_why),
        spearman=estimate_from_replicates(s, _spearman_rows(xs, ys) if s is not None else [], reason=s_why),
        kendall_tau=estimate_from_replicates(
            k, _kendall_rows(xa, ya, idx) if k is not None else [], reason=k_why
        ),
        mean_abs_diff=estimate_from_replicates(mean_abs_diff(xa, ya), np.mean(np.abs(xs - ys), axis=1)),
        cohen_kappa=estimate_from_replicates(
            kap, cohen_kappa_rows(jps, rps, 2) if kap is not None else [], reason=kap_why
        ),
        agreement_rate=estimate_from_replicates(float(np.mean(jp == rp)), np.mean(jps == rps, axis=1)),
        confusion=replace(confusion_matrix(xa, ya, threshold), rates=_cell_rates(jp, rp, idx)),
    )


def _cell_rates(jp: NDArray[np.bool_], rp: NDArray[np.bool_], idx: NDArray[np.intp]) -> dict[str, Estimate]:
    cells = {
        "both_pass": jp & rp,
        "judge_pass_ref_fail": jp & ~rp,
        "judge_fail_ref_pass": ~jp & rp,
        "both_fail": ~jp & ~rp,
    }
    return {
        name: estimate_from_replicates(float(mask.mean()), mask[idx].mean(axis=1))
        for name, mask in cells.items()
    }


def spearman_with_ci(
    x: Sequence[float] | FloatArray,
    y: Sequence[float] | FloatArray,
    *,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """Spearman's rho with its bootstrap interval (used by the length probe)."""
    xa, ya = _as_pair(x, y)
    value, why = spearman(xa, ya)
    if value is None:
        return Estimate.undefined(why or "undefined")
    idx = bootstrap_indices(xa.size, n_boot=n_boot, seed=seed)
    return estimate_from_replicates(value, _spearman_rows(xa[idx], ya[idx]))


def mean_with_ci(values: ArrayLike, *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = DEFAULT_SEED) -> Estimate:
    """Mean with its percentile bootstrap interval; undefined for no values."""
    va = np.asarray(values, dtype=np.float64).reshape(-1)
    if va.size == 0:
        return Estimate.undefined("no values")
    idx = bootstrap_indices(va.size, n_boot=n_boot, seed=seed)
    return estimate_from_replicates(float(np.mean(va)), np.mean(va[idx], axis=1))
