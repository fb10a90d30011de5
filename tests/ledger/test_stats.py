"""The ledger's t quantile: scipy's values, from scipy's table for common levels."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llm_connect.ledger._stats import t_interval, t_quantile


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999, 0.9999])
@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 7, 10, 29, 30, 100, 999, 10_000, 10_001, 1_000_000])
def test_t_quantile_matches_scipy(confidence: float, df: int) -> None:
    from scipy.stats import t

    expected = float(t.ppf(1.0 - (1.0 - confidence) / 2.0, df))
    assert t_quantile(confidence, df) == pytest.approx(expected, rel=1e-10)


def test_t_quantile_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="confidence"):
        t_quantile(1.0, 5)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_quantile(0.95, 0)


def test_common_levels_come_from_the_table_without_importing_scipy() -> None:
    code = (
        "import sys\n"
        "from llm_connect.ledger._stats import t_interval\n"
        "assert t_interval(10, 0.5, 0.1, 0.95)[0] is not None\n"
        "print('scipy' in sys.modules, 'numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_t_interval_known_value() -> None:
    # n = 10, mean 0.5, s = 0.1: half-width t(0.975, 9) · 0.1 / √10 = 2.2621571628 · 0.0316227766
    low, high = t_interval(10, 0.5, 0.1, 0.95)
    assert low == pytest.approx(0.5 - 0.0715356, abs=1e-7) and high == pytest.approx(
        0.5 + 0.0715356, abs=1e-7
    )


def test_every_tabulated_quantile_equals_scipy() -> None:
    import numpy as np
    from scipy.stats import t

    from llm_connect.ledger._stats import _table

    max_df, table = _table()
    dfs = np.arange(1, max_df + 1)
    for confidence, column in table.items():
        expected = t.ppf(1.0 - (1.0 - confidence) / 2.0, dfs)
        np.testing.assert_allclose(column, expected, rtol=1e-12)
