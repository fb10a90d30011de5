"""Descriptive statistics of quality scores from their running sums."""

from __future__ import annotations

import math


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
