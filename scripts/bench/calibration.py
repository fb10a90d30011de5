"""Bootstrap cost of one calibration reference, vectorised vs a per-resample scipy loop.

Usage: python scripts/bench/calibration.py [--resamples 2000] [--sizes 50,200,1000] [--repeat 3]

``judge_agreement()`` computes Pearson, Spearman, Kendall's tau-b, MAD, Cohen's kappa and the
agreement rate with a 2,000-resample percentile bootstrap. The baseline, measured in the
same run on the same resample indices, is the obvious loop: one ``scipy.stats`` call per
statistic per resample. Prints the median wall time of each and the ratio; also checks
that both give the same intervals.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scipy import stats

from llm_connect.calibration import judge_agreement
from llm_connect.calibration._stats import DEFAULT_SEED, bootstrap_indices


def naive(x: np.ndarray, y: np.ndarray, n_boot: int) -> dict[str, tuple[float, float]]:
    idx = bootstrap_indices(x.size, n_boot=n_boot, seed=DEFAULT_SEED)
    reps: dict[str, list[float]] = {"pearson": [], "spearman": [], "kendall_tau": [], "cohen_kappa": []}
    for row in idx:
        xb, yb = x[row], y[row]
        reps["pearson"].append(stats.pearsonr(xb, yb).statistic)
        reps["spearman"].append(stats.spearmanr(xb, yb).statistic)
        reps["kendall_tau"].append(stats.kendalltau(xb, yb).statistic)
        jp, rp = xb >= 0.5, yb >= 0.5
        po, pj, pr = np.mean(jp == rp), np.mean(jp), np.mean(rp)
        pe = pj * pr + (1 - pj) * (1 - pr)
        reps["cohen_kappa"].append((po - pe) / (1 - pe))
    return {k: tuple(np.percentile(v, [2.5, 97.5])) for k, v in reps.items()}


def timed(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--sizes", default="50,200,1000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    print(f"{'pairs':>6} {'vectorised s':>13} {'scipy loop s':>13} {'ratio':>7}  intervals equal")
    for n in (int(s) for s in args.sizes.split(",")):
        x = np.round(rng.random(n), 1)  # ties, as LLM judges give
        y = np.clip(np.round(x + rng.normal(0, 0.2, n), 2), 0, 1)
        fast = timed(lambda x=x, y=y: judge_agreement(x, y, n_boot=args.resamples), args.repeat)
        slow = timed(lambda x=x, y=y: naive(x, y, args.resamples), 1)
        got = judge_agreement(x, y, n_boot=args.resamples)
        want = naive(x, y, args.resamples)
        same = all(
            np.allclose((getattr(got, k).ci_low, getattr(got, k).ci_high), want[k], atol=1e-9) for k in want
        )
        print(f"{n:>6} {fast:>13.3f} {slow:>13.3f} {slow / fast:>6.1f}x  {same}")


if __name__ == "__main__":
    main()
