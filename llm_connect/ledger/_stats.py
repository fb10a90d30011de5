"""Confidence intervals for a mean quality score."""

from __future__ import annotations

import gzip
import json
import math
from functools import cache, lru_cache
from importlib.resources import files


@cache
def _table() -> tuple[int, dict[float, list[float]]]:
    raw = files("llm_connect.ledger").joinpath("data", "t_quantiles.json.gz").read_bytes()
    data = json.loads(gzip.decompress(raw))
    return int(data["max_df"]), {float(c): q for c, q in data["quantiles"].items()}


@lru_cache(maxsize=4096)
def t_quantile(confidence: float, df: int) -> float:
    """The two-sided ``confidence`` critical value of Student's t with ``df`` degrees of freedom."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, not {confidence!r}")
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, not {df!r}")
    max_df, table = _table()
    column = table.get(confidence)
    if column is not None and df <= max_df:
        return column[int(df) - 1]
    from scipy.special import stdtrit

    return float(stdtrit(int(df), 1.0 - (1.0 - confidence) / 2.0))


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
