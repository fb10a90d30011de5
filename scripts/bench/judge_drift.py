"""Judge drift checks (issue 37): how often a stable judge is called drifted, how fast a moved one is.

Usage::

    python scripts/bench/judge_drift.py [--histories 1000] [--checks 20] [--anchor 100] [--seed 2026]

Each history freezes an anchor set (grades drawn once) and runs ``--checks`` checks through
``llm_connect.calibration._drift.verdict``, continuing the test from check to check as
``llm-connect judges check`` does. Judges (alpha 0.05, tolerance 0.05):

* stable, temperature 0 with small noise: each check moves 10% of the cases by up to 0.05;
* stable at the tolerance: a pairwise judge (grades 0, 0.5, 1) that turns a random 10% of its
  verdicts into ties at every check (expected change 0.05 per case, the boundary);
* shifted: every grade 0.15 higher from the first check (clipped at 1, grades from Beta(2, 2));
* flipping: a pairwise judge whose verdicts flip on a random 20% of cases (ties stay ties).

Prints, per judge, the share of histories called drifted at any check, at the first check and
within three checks, with exact (Clopper-Pearson) 95% intervals.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy.stats import beta

from llm_connect.calibration._drift import DRIFTED, DriftState, verdict

Judge = Callable[[np.random.Generator, np.ndarray], np.ndarray]


def _small_noise(rng: np.random.Generator, frozen: np.ndarray) -> np.ndarray:
    moved = rng.random(frozen.size) < 0.1
    return np.clip(frozen + np.where(moved, rng.uniform(-0.05, 0.05, frozen.size), 0.0), 0.0, 1.0)


def _ties(rng: np.random.Generator, frozen: np.ndarray) -> np.ndarray:
    return np.where(rng.random(frozen.size) < 0.1, 0.5, frozen)


def _shift(rng: np.random.Generator, frozen: np.ndarray) -> np.ndarray:
    return np.clip(frozen + 0.15, 0.0, 1.0)


def _flips(rng: np.random.Generator, frozen: np.ndarray) -> np.ndarray:
    return np.where(rng.random(frozen.size) < 0.2, 1.0 - frozen, frozen)


JUDGES: list[tuple[str, bool, Judge]] = [
    ("stable, 10% of cases move by up to 0.05", False, _small_noise),
    ("stable at the tolerance: pairwise, 10% of verdicts turn to ties", True, _ties),
    ("shifted +0.15 on every case", False, _shift),
    ("pairwise, verdicts flip on 20% of cases", True, _flips),
]


def _cp(k: int, n: int) -> str:
    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return f"{k / n:.3f} ({k}/{n}) [{low:.3f}, {high:.3f}]"


def main(argv: list[str] | None = None) -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--histories", type=int, default=1000)
    parser.add_argument("--checks", type=int, default=20)
    parser.add_argument("--anchor", type=int, default=100)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    print(f"{args.histories} histories of {args.checks} checks, anchor set of {args.anchor} cases\n")
    print("| judge | drifted at any check | at the first check | within 3 checks |")
    print("|---|---|---|---|")
    for k, (name, pairwise, judge) in enumerate(JUDGES):
        anywhere = first = three = 0
        for h in range(args.histories):
            rng = np.random.default_rng([args.seed, k, h])
            if pairwise:
                frozen = rng.choice([0.0, 0.5, 1.0], args.anchor, p=[0.35, 0.15, 0.5])
            else:
                frozen = rng.beta(2.0, 2.0, args.anchor)
            state, when = DriftState(), None
            for c in range(args.checks):
                got = verdict(frozen, judge(rng, frozen), state)
                state = got.state
                if got.status == DRIFTED:
                    when = c + 1
                    break
            anywhere += when is not None
            first += when == 1
            three += when is not None and when <= 3
        n = args.histories
        print(f"| {name} | {_cp(anywhere, n)} | {_cp(first, n)} | {_cp(three, n)} |")
    print(f"\nTotal {time.perf_counter() - t0:.0f} s.")


if __name__ == "__main__":
    main()
