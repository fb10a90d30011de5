"""Has a judge drifted? An anytime-valid test over repeated checks on a frozen anchor set (issue 37).

An anchor set freezes a judge's grades ``g_i`` on chosen cases. A check asks the judge again
and gets ``g'_i``; each case's change is ``c_i = |g'_i - g_i|`` in [0, 1]. The judge is
*stable* while every case's expected change, given everything before it, is at most the
tolerance ``tau`` (:data:`DEFAULT_TOLERANCE`: a temperature-0 judge that moves a tenth of its
grades by up to 0.05 changes by 0.005 on average; a pairwise judge that turns one verdict in
ten into a tie changes by 0.05).

The test bets against stability, case after case and check after check: the capital

    K = prod (1 + lambda_i (c_i - tau)),   0 <= lambda_i <= BET_CAP / tau

has, under stability, conditional mean factors ``1 + lambda_i (E c_i - tau) <= 1``: a
non-negative supermartingale, so by Ville's inequality the chance that it *ever* reaches
``1 / alpha`` is at most ``alpha``, however many checks are run and however often (Shafer,
JRSS-A 2021; Waudby-Smith & Ramdas, JRSS-B 2024). The judge is called *drifted* once it
has. Each bet is aimed at ``tau`` (aGRAPA, op. cit. Section 5.1) from the check's own
earlier cases, with a prior of one case at ``tau``: the first case of every check bets
nothing, a check whose changes stay below ``tau`` bets nothing, and a check where the judge
has moved bets from its first few cases, whatever came before. ``docs/decisions.md`` has the
argument and the simulations (``scripts/bench/judge_drift.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BET_CAP",
    "DEFAULT_TOLERANCE",
    "DRIFTED",
    "NOT_SETTLED",
    "STABLE",
    "DriftState",
    "DriftVerdict",
    "change_upper",
    "changes",
    "continue_drift",
    "mean_bounds",
    "verdict",
]

DEFAULT_TOLERANCE = 0.05
"""The expected change per case a stable judge may show (see the module's docstring)."""

BET_CAP = 0.5
"""Each bet is at most ``BET_CAP / tau``: a case that did not move costs at most half the capital."""

STABLE, DRIFTED, NOT_SETTLED = "stable", "drifted", "not settled"


@dataclass(frozen=True, slots=True)
class DriftState:
    """The test after some checks: the log capital now, its running maximum, and how many
    checks and cases it has seen. Frozen plain numbers (stored with every check)."""

    log_capital: float = 0.0
    best: float = 0.0
    checks: int = 0
    cases: int = 0

    def drifted(self, alpha: float) -> bool:
        """Whether the capital has ever reached ``1 / alpha``."""
        return self.best >= math.log(1.0 / alpha)


def changes(frozen: Any, regraded: Any) -> Any:
    """Per case, ``|regraded - frozen|`` (grades in [0, 1]; a ``ValueError`` names the first
    case outside, or a length mismatch)."""
    f = np.asarray(frozen, dtype=float)
    g = np.asarray(regraded, dtype=float)
    if f.shape != g.shape or f.ndim != 1:
        raise ValueError(f"{f.size} frozen grades but {g.size} new ones")
    bad = ~np.isfinite(f) | ~np.isfinite(g) | (f < 0) | (f > 1) | (g < 0) | (g > 1)
    if bad.any():
        raise ValueError(f"anchor case {int(np.argmax(bad))}: a grade outside 0..1")
    return np.abs(g - f)


def continue_drift(state: DriftState, check: Any, tolerance: float = DEFAULT_TOLERANCE) -> DriftState:
    """``state`` after one more check whose per-case changes are ``check`` (in the order the
    cases were asked; the bets use only the check's earlier cases)."""
    if not 0.0 < tolerance < 1.0:
        raise ValueError(f"tolerance must lie strictly between 0 and 1, not {tolerance!r}")
    c = np.asarray(check, dtype=float)
    if c.size == 0:
        return state
    if not np.all(np.isfinite(c)) or c.min() < 0.0 or c.max() > 1.0:
        raise ValueError("changes must lie in 0..1")
    t = np.arange(1, c.size + 1, dtype=float)
    mean = (tolerance + np.cumsum(c)) / (t + 1.0)
    mean_before = np.concatenate(([tolerance], mean[:-1]))
    prior_var = tolerance * (1.0 - tolerance)
    sq = (prior_var + np.cumsum((c - mean) ** 2)) / (t + 1.0)
    var_before = np.concatenate(([prior_var], sq[:-1]))
    gap = mean_before - tolerance
    bet = np.clip(gap / (var_before + gap * gap), 0.0, BET_CAP / tolerance)
    path = state.log_capital + np.cumsum(np.log1p(bet * (c - tolerance)))
    return DriftState(
        log_capital=float(path[-1]),
        best=max(state.best, float(path.max())),
        checks=state.checks + 1,
        cases=state.cases + int(c.size),
    )


def _hedged_lower(x: Any, alpha: float, grid: Any, cap: float = 0.75) -> float:
    """The largest mean of ``grid`` rejected by the predictable plug-in betting capital on
    ``x`` in [0, 1] (Waudby-Smith & Ramdas, Theorem 3, bets at most ``cap / m``); 0 when none."""
    t = np.arange(1, x.size + 1, dtype=float)
    mean = (0.5 + np.cumsum(x)) / (t + 1.0)
    var = (0.25 + np.cumsum((x - mean) ** 2)) / (t + 1.0)
    var_before = np.concatenate(([0.25], var[:-1]))
    bet = np.sqrt(2.0 * math.log(1.0 / alpha) / (var_before * t * np.log1p(t)))
    m = np.asarray(grid, dtype=float)[None, :]
    lam = np.minimum(bet[:, None], cap / m)
    capital = np.cumsum(np.log1p(lam * (x[:, None] - m)), axis=0).max(axis=0)
    rejected = m[0][capital >= math.log(1.0 / alpha)]
    return float(rejected.max()) if rejected.size else 0.0


_GRID = np.linspace(0.0025, 0.9975, 399)


def mean_bounds(values: Any, alpha: float, *, low: float = 0.0, high: float = 1.0) -> tuple[float, float]:
    """A ``1 - alpha`` interval of the mean of ``values`` in [``low``, ``high``] (each side at
    ``alpha / 2``, hedged betting on a grid of 1/400 of the range); ``(low, high)`` with none."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return low, high
    x = np.clip((v - low) / (high - low), 0.0, 1.0)
    lower = _hedged_lower(x, alpha / 2.0, _GRID)
    upper = 1.0 - _hedged_lower(1.0 - x, alpha / 2.0, _GRID)
    return low + (high - low) * lower, low + (high - low) * max(lower, upper)


def change_upper(c: Any, alpha: float) -> float:
    """A one-sided ``1 - alpha`` upper bound of the expected change per case of one check
    (hedged betting on ``1 - c``, bets up to 9/10 of their limit: with a hundred cases that did
    not move the bound is about 0.03). 1 with no case."""
    x = 1.0 - np.asarray(c, dtype=float)
    return 1.0 if x.size == 0 else 1.0 - _hedged_lower(x, alpha, _GRID, cap=0.9)


@dataclass(frozen=True, slots=True)
class DriftVerdict:
    """One check's reading: ``status`` (:data:`STABLE`, :data:`DRIFTED` or :data:`NOT_SETTLED`),
    the share of cases whose grade changed, the mean change and its upper bound, the mean
    shift (new minus frozen) with its interval, and the test's state after the check."""

    status: str
    changed_share: float
    mean_change: float
    change_upper: float
    shift: float
    shift_low: float
    shift_high: float
    state: DriftState
    why: str


def verdict(
    frozen: Any,
    regraded: Any,
    state: DriftState,
    *,
    alpha: float = 0.05,
    tolerance: float = DEFAULT_TOLERANCE,
) -> DriftVerdict:
    """The verdict of one complete check, continuing the test from ``state`` (every check
    since the anchor set was frozen). ``drifted`` once the test's capital has ever reached
    ``1 / alpha``; ``stable`` when it has not and this check's upper bound on the expected
    change per case is below ``tolerance``; ``not settled`` otherwise (too few cases to tell)."""
    c = changes(frozen, regraded)
    after = continue_drift(state, c, tolerance)
    d = np.asarray(regraded, dtype=float) - np.asarray(frozen, dtype=float)
    upper = change_upper(c, alpha)
    shift_low, shift_high = mean_bounds(d, alpha, low=-1.0, high=1.0)
    mean_change = float(c.mean()) if c.size else 0.0
    share = float((c > 1e-9).mean()) if c.size else 0.0
    if after.drifted(alpha):
        status = DRIFTED
        why = (
            f"drifted: the test of 'expected change per case at most {tolerance:g}' reached "
            f"{math.exp(after.best):.3g} >= 1/alpha = {1.0 / alpha:.3g} after {after.checks} check(s)"
        )
    elif upper < tolerance:
        status = STABLE
        why = f"stable: expected change per case at most {upper:.3f} < tolerance {tolerance:g}"
    else:
        status = NOT_SETTLED
        why = (
            f"not settled: expected change per case up to {upper:.3f} (tolerance {tolerance:g}); "
            "a larger anchor set or another check would tell"
        )
    return DriftVerdict(
        status=status,
        changed_share=share,
        mean_change=mean_change,
        change_upper=upper,
        shift=float(d.mean()) if d.size else 0.0,
        shift_low=shift_low,
        shift_high=shift_high,
        state=after,
        why=why,
    )
