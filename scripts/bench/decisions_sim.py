"""Routing decisions by simulation: the old repeated-look t-interval rule vs the anytime-valid bound.

Usage: python scripts/bench/decisions_sim.py [--runs 1000] [--seed 2026] [--quick]

Scores are per-case qualities in [0, 1] drawn from Beta distributions with a known mean;
``min_quality`` is 0.9 and ``min_samples`` 30 throughout. Rules compared:

* old: route at a look when n >= 30 and ``mean - t(0.975, n-1) s / sqrt(n) >= 0.9``
  (two-sided 95% Student t-interval, i.e. one-sided 0.025 per look);
* new: route when n >= 30 and ``lower_bound(x[:n], 0.05) >= 0.9`` (anytime-valid);
* new, ``fixed_n=True`` asked at every look (a misuse, for contrast).

Sections: (0) a worked example on a small seeded dataset; (1)-(2) false-route rate at true
mean 0.9 and 0.88 with looks every 10 cases up to 500; (3) cases needed to route a good
candidate (looks every 10 up to 2000) next to ``cases_needed``'s projection; (4) candidate
calls saved by stopping a 200-case suite at the first look where the candidate is proven or
ruled out (what ``llm-connect grade --until-decided`` does). Bounds are computed for all
runs at once from prefix sums, mirroring ``llm_connect.routing._bounds``; each section
checks a sample of runs against ``lower_bound`` / ``upper_bound`` themselves. Output is
markdown on stdout; every number is reproducible from ``--seed`` and ``--runs``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
from scipy import stats

from llm_connect.routing._bounds import TRUNCATION, _bets, cases_needed, lower_bound, upper_bound

MIN_QUALITY = 0.9
MIN_SAMPLES = 30
ALPHA = 0.05
OLD_CONFIDENCE = 0.95
LOOK_EVERY = 10


# -- bounds for many runs at once ------------------------------------------------------------


def _centres(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``mu_hat_{t-1}`` and ``sigma2_{t-1}`` for every run (rows) and t (columns), as ``_bets``."""
    t = np.arange(1, x.shape[1] + 1, dtype=float)
    mu_hat = (0.5 + np.cumsum(x, axis=1)) / (t + 1.0)
    sigma2 = (0.25 + np.cumsum((x - mu_hat) ** 2, axis=1)) / (t + 1.0)
    ones = np.ones((x.shape[0], 1))
    mu_prev = np.concatenate((0.5 * ones, mu_hat[:, :-1]), axis=1)
    sigma2_prev = np.concatenate((0.25 * ones, sigma2[:, :-1]), axis=1)
    return mu_prev, sigma2_prev


def anytime_lower(x: np.ndarray, alpha: float) -> np.ndarray:
    """``lower_bound(x[r, :k], alpha)`` for every run r and k = 1..n, as an array (runs, n).

    The bets of the anytime-valid bound depend only on earlier cases, so one pass of prefix
    sums gives every prefix's bound: the running maximum of the per-t bounds, clipped to [0, 1].
    """
    log_inv_alpha = math.log(1.0 / alpha)
    t = np.arange(1, x.shape[1] + 1, dtype=float)
    mu_prev, sigma2_prev = _centres(x)
    lam = np.minimum(np.sqrt(2.0 * log_inv_alpha / (sigma2_prev * (t * np.log1p(t)))), TRUNCATION)
    psi = (-np.log1p(-lam) - lam) / 4.0
    v = 4.0 * (x - mu_prev) ** 2
    lows = (np.cumsum(lam * x, axis=1) - log_inv_alpha - np.cumsum(v * psi, axis=1)) / np.cumsum(lam, axis=1)
    return np.clip(np.maximum.accumulate(lows, axis=1), 0.0, 1.0)


def anytime_upper(x: np.ndarray, alpha: float) -> np.ndarray:
    """``upper_bound(x[r, :k], alpha)`` for every run and prefix: one minus the lower bound of 1 - x."""
    return 1.0 - anytime_lower(1.0 - x, alpha)


def fixed_n_lower(x: np.ndarray, alpha: float, looks: np.ndarray) -> np.ndarray:
    """``lower_bound(x[r, :k], alpha, fixed_n=True)`` at each look k (runs, looks); non-binary scores.

    The single-look bets are tuned for k, so each look is recomputed over its whole prefix.
    """
    log_inv_alpha = math.log(1.0 / alpha)
    mu_prev, sigma2_prev = _centres(x)
    out = np.empty((x.shape[0], looks.size))
    for j, k in enumerate(looks):
        lam = np.minimum(np.sqrt(2.0 * log_inv_alpha / (sigma2_prev[:, :k] * float(k))), TRUNCATION)
        psi = (-np.log1p(-lam) - lam) / 4.0
        v = 4.0 * (x[:, :k] - mu_prev[:, :k]) ** 2
        low = ((lam * x[:, :k]).sum(axis=1) - log_inv_alpha - (v * psi).sum(axis=1)) / lam.sum(axis=1)
        out[:, j] = np.clip(low, 0.0, 1.0)
    return out


def t_lower(x: np.ndarray, looks: np.ndarray, confidence: float = OLD_CONFIDENCE) -> np.ndarray:
    """The lower end of the two-sided Student t-interval at each look (runs, looks)."""
    d = x - MIN_QUALITY  # centred near the threshold: the running sums keep their precision
    s1 = np.cumsum(d, axis=1)[:, looks - 1]
    s2 = np.cumsum(d * d, axis=1)[:, looks - 1]
    n = looks.astype(float)
    mean = s1 / n
    var = np.maximum(s2 - s1 * s1 / n, 0.0) / (n - 1.0)
    crit = stats.t.ppf(1.0 - (1.0 - confidence) / 2.0, looks - 1)
    low: np.ndarray = MIN_QUALITY + mean - crit * np.sqrt(var / n)
    return low


def check(
    x: np.ndarray, looks: np.ndarray, got: np.ndarray, fn: Callable[[np.ndarray], float | None], runs: int
) -> tuple[float, bool]:
    """Largest difference from ``fn`` on the first ``runs`` runs at every look, and whether the
    route/no-route verdict against MIN_QUALITY agrees everywhere."""
    worst, same = 0.0, True
    for r in range(min(runs, x.shape[0])):
        for j, k in enumerate(looks):
            want = fn(x[r, :k])
            assert want is not None
            worst = max(worst, abs(want - got[r, j]))
            same &= (want >= MIN_QUALITY) == (got[r, j] >= MIN_QUALITY)
    return worst, same


# -- helpers -----------------------------------------------------------------------------------


def clopper_pearson_95(k: int, n: int) -> tuple[float, float]:
    """Two-sided 95% exact interval for a binomial rate."""
    low = 0.0 if k == 0 else float(stats.beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k))
    return low, high


def rate(k: int, n: int) -> str:
    low, high = clopper_pearson_95(k, n)
    return f"{k / n:.4f} ({k}/{n}) [{low:.4f}, {high:.4f}]"


def first_look(ok: np.ndarray, looks: np.ndarray) -> np.ndarray:
    """Cases at the first look where ``ok`` (runs, looks) holds; ``inf`` where it never does."""
    hit = ok.any(axis=1)
    return np.where(hit, looks[np.argmax(ok, axis=1)].astype(float), np.inf)


def quantile(values: np.ndarray, q: float, limit: int) -> str:
    """An observed value at quantile ``q`` (``inverted_cdf``); runs never routed count as infinite."""
    finite_cap = np.where(np.isinf(values), limit + 1.0, values)
    got = float(np.quantile(finite_cap, q, method="inverted_cdf"))
    return f"> {limit}" if got > limit else f"{got:.0f}"


def beta_params(mean: float, total: float) -> tuple[float, float]:
    return mean * total, (1.0 - mean) * total


def beta_var(a: float, b: float) -> float:
    return a * b / ((a + b) ** 2 * (a + b + 1.0))


def table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


# -- sections ----------------------------------------------------------------------------------


def worked_example(seed: int) -> None:
    rng = np.random.default_rng([seed, 0])
    x = np.round(rng.beta(19.0, 1.0, 100), 2)
    print("## 0. Worked example\n")
    print(f"100 scores, `np.round(np.random.default_rng([{seed}, 0]).beta(19, 1, 100), 2)`, in order:\n")
    print("```text")
    for row in range(0, x.size, 20):
        print(" ".join(f"{v:.2f}" for v in x[row : row + 20]))
    print("```\n")
    log_inv_alpha = math.log(1.0 / ALPHA)
    lam, mu_prev = _bets(x, log_inv_alpha, False)
    sigma2_prev = _centres(x[None, :])[1][0]
    psi = (-np.log1p(-lam) - lam) / 4.0
    v = 4.0 * (x - mu_prev) ** 2
    lows = (np.cumsum(lam * x) - log_inv_alpha - np.cumsum(v * psi)) / np.cumsum(lam)
    print(f"First steps at alpha = {ALPHA} (log(1/alpha) = {log_inv_alpha:.4f}):\n")
    rows = []
    for i in [0, 1, 2, 3, 4, 9, 29, 59, 89]:
        rows.append(
            [
                f"{i + 1}",
                f"{x[i]:.2f}",
                f"{mu_prev[i]:.4f}",
                f"{sigma2_prev[i]:.4f}",
                f"{lam[i]:.4f}",
                f"{psi[i]:.5f}",
                f"{v[i]:.4f}",
                f"{lows[i]:.4f}",
            ]
        )
    table(
        [
            "t",
            "x_t",
            "mu_hat_{t-1}",
            "sigma2_{t-1}",
            "lambda_t",
            "psi_E(lambda_t)",
            "v_t",
            "bound at t (before max)",
        ],
        rows,
    )
    print("Bounds at each look (`lower_bound(x[:n], 0.05)` etc., called directly):\n")
    rows = []
    for n in range(10, 101, 10):
        xs = x[:n]
        s = float(xs.std(ddof=1))
        t_low = float(xs.mean()) - float(stats.t.ppf(0.975, n - 1)) * s / math.sqrt(n)
        low, high = lower_bound(xs, ALPHA), upper_bound(xs, ALPHA)
        fixed = lower_bound(xs, ALPHA, fixed_n=True)
        assert low is not None and high is not None and fixed is not None
        status = (
            "ruled out"
            if high < MIN_QUALITY
            else "proven"
            if low >= MIN_QUALITY and n >= MIN_SAMPLES
            else "insufficient"
            if n < MIN_SAMPLES
            else "undecided"
        )
        proj = cases_needed(float(xs.mean()), float(xs.var()), MIN_QUALITY, ALPHA)
        rows.append(
            [
                f"{n}",
                f"{xs.mean():.4f}",
                f"{s:.4f}",
                f"{t_low:.4f}",
                f"{low:.4f}",
                f"{high:.4f}",
                f"{fixed:.4f}",
                status,
                f"{proj}",
            ]
        )
    table(
        [
            "n",
            "mean",
            "s",
            "old t lower (0.975)",
            "lower_bound",
            "upper_bound",
            "lower, fixed_n=True",
            "status (new rule)",
            "cases_needed",
        ],
        rows,
    )


def false_routes(seed: int, runs: int, mean: float, total: float, label: int, n_check: int) -> None:
    a, b = beta_params(mean, total)
    rng = np.random.default_rng([seed, label])
    x = rng.beta(a, b, size=(runs, 500))
    looks = np.arange(LOOK_EVERY, 501, LOOK_EVERY)
    eligible = looks >= MIN_SAMPLES
    old = t_lower(x, looks)
    new = anytime_lower(x, ALPHA)[:, looks - 1]
    fixed = fixed_n_lower(x, ALPHA, looks)
    rows = []
    for name, low in (
        ("old: t-interval 95% two-sided, every look", old),
        ("new: anytime-valid, alpha 0.05, every look", new),
        ("new with fixed_n=True, misused at every look", fixed),
    ):
        routed = ((low >= MIN_QUALITY) & eligible).any(axis=1)
        rows.append([name, rate(int(routed.sum()), runs)])
    one_look = int((fixed[:, -1] >= MIN_QUALITY).sum())
    rows.append(["new with fixed_n=True, one look at n = 500 only", rate(one_look, runs)])
    one_look_old = int((old[:, -1] >= MIN_QUALITY).sum())
    rows.append(["old: t-interval, one look at n = 500 only", rate(one_look_old, runs)])
    table(["rule", "false-route rate (routed/runs) [95% Clopper-Pearson]"], rows)
    print(
        f"Mean lower bound at n = 500 over runs: old t {old[:, -1].mean():.4f}, anytime "
        f"{new[:, -1].mean():.4f}, fixed_n {fixed[:, -1].mean():.4f} (true mean {mean}, score variance "
        f"{beta_var(a, b):.4f}). Largest |anytime - fixed_n| at any look: {np.abs(new - fixed).max():.4f}.\n"
    )
    w1, s1 = check(x, looks, new, lambda v: lower_bound(v, ALPHA), n_check)
    w2, s2 = check(x, looks, fixed, lambda v: lower_bound(v, ALPHA, fixed_n=True), n_check)
    print(
        f"Check on the first {min(n_check, runs)} runs x {looks.size} looks against `lower_bound`: "
        f"max |diff| {w1:.1e} (anytime), {w2:.1e} (fixed_n); same verdicts: {s1 and s2}.\n"
    )


def false_routes_binary(seed: int, runs: int, n_check: int) -> None:
    """0/1 scores with mean 0.9: here ``fixed_n=True`` is the exact Clopper-Pearson bound."""
    rng = np.random.default_rng([seed, 9])
    x = (rng.random((runs, 500)) < MIN_QUALITY).astype(float)
    looks = np.arange(LOOK_EVERY, 501, LOOK_EVERY)
    eligible = looks >= MIN_SAMPLES
    successes = np.cumsum(x, axis=1)[:, looks - 1]
    with np.errstate(invalid="ignore"):
        cp = np.where(successes > 0, stats.beta.ppf(ALPHA, successes, looks - successes + 1), 0.0)
    rows = []
    for name, low in (
        ("old: t-interval 95% two-sided, every look", t_lower(x, looks)),
        ("new: anytime-valid, alpha 0.05, every look", anytime_lower(x, ALPHA)[:, looks - 1]),
        ("new with fixed_n=True (Clopper-Pearson), misused at every look", cp),
    ):
        routed = ((low >= MIN_QUALITY) & eligible).any(axis=1)
        rows.append([name, rate(int(routed.sum()), runs)])
    rows.append(
        [
            "new with fixed_n=True (Clopper-Pearson), one look at n = 500 only",
            rate(int((cp[:, -1] >= MIN_QUALITY).sum()), runs),
        ]
    )
    table(["rule", "false-route rate (routed/runs) [95% Clopper-Pearson]"], rows)
    w, same = check(x, looks, cp, lambda v: lower_bound(v, ALPHA, fixed_n=True), n_check)
    print(
        f"Check on the first {min(n_check, runs)} runs x {looks.size} looks against "
        f"`lower_bound(..., fixed_n=True)`: max |diff| {w:.1e}; same verdicts: {same}.\n"
    )


def cases_to_route(seed: int, runs: int, n_check: int) -> None:
    limit = 2000
    looks = np.arange(LOOK_EVERY, limit + 1, LOOK_EVERY)
    every = np.arange(1, limit + 1)
    rows = []
    checks = []
    for label, mean in ((3, 0.95), (4, 0.97)):
        a, b = beta_params(mean, 20.0)
        rng = np.random.default_rng([seed, label])
        x = rng.beta(a, b, size=(runs, limit))
        new_all = anytime_lower(x, ALPHA)
        new = new_all[:, looks - 1]
        old = t_lower(x, looks)
        eligible = looks >= MIN_SAMPLES
        proj = cases_needed(mean, beta_var(a, b), MIN_QUALITY, ALPHA)
        dist = f"Beta({a:g}, {b:g})"
        for name, low in (("old t-interval", old), ("new anytime-valid", new)):
            first = first_look((low >= MIN_QUALITY) & eligible, looks)
            never = int(np.isinf(first).sum())
            rows.append(
                [
                    f"{mean} {dist}",
                    name,
                    quantile(first, 0.5, limit),
                    quantile(first, 0.9, limit),
                    rate(never, runs),
                    f"{proj}" if name.startswith("new") else "",
                ]
            )
        first_any = first_look((new_all >= MIN_QUALITY) & (every >= MIN_SAMPLES), every)
        rows.append(
            [
                f"{mean} {dist}",
                "new, look after every case",
                quantile(first_any, 0.5, limit),
                quantile(first_any, 0.9, limit),
                rate(int(np.isinf(first_any).sum()), runs),
                f"{proj}",
            ]
        )
        checks.append(check(x, looks[::10], new[:, ::10], lambda v: lower_bound(v, ALPHA), n_check))
    table(
        [
            "true mean",
            "rule",
            "median cases to route",
            "90th pct",
            "never routed by 2000 [95% CP]",
            "cases_needed(mean, var, 0.9, 0.05)",
        ],
        rows,
    )
    print(
        f"Check on the first {n_check} runs x 20 looks against `lower_bound`: max |diff| "
        f"{max(w for w, _ in checks):.1e}; same verdicts: {all(s for _, s in checks)}.\n"
    )


def calls_saved(seed: int, runs: int, n_check: int) -> None:
    suite = 200
    looks = np.arange(LOOK_EVERY, suite + 1, LOOK_EVERY)
    rows = []
    same_all = []
    checks = []
    for label, mean in ((5, 0.95), (6, 0.97), (7, 0.85), (8, 0.90)):
        a, b = beta_params(mean, 20.0)
        rng = np.random.default_rng([seed, label])
        x = rng.beta(a, b, size=(runs, suite))
        low = anytime_lower(x, ALPHA)[:, looks - 1]
        high = anytime_upper(x, ALPHA)[:, looks - 1]
        ruled = high < MIN_QUALITY
        proven = ~ruled & (low >= MIN_QUALITY) & (looks >= MIN_SAMPLES)
        settled = ruled | proven
        stop = np.where(settled.any(axis=1), np.argmax(settled, axis=1), looks.size - 1)
        graded = looks[stop]
        idx = np.arange(runs)
        status = np.where(ruled[idx, stop], "ruled out", np.where(proven[idx, stop], "proven", "undecided"))
        full = np.where(ruled[:, -1], "ruled out", np.where(proven[:, -1], "proven", "undecided"))
        same_all.append(bool((status == full).all()))
        counts = {s: int((status == s).sum()) for s in ("proven", "ruled out", "undecided")}
        rows.append(
            [
                f"{mean} Beta({a:g}, {b:g})",
                f"{graded.mean():.1f}",
                f"{100.0 * (1.0 - graded.mean() / suite):.1f}%",
                *(f"{counts[s] / runs:.4f}" for s in ("proven", "ruled out", "undecided")),
            ]
        )
        checks.append(check(x, looks, low, lambda v: lower_bound(v, ALPHA), n_check))
        checks.append(check(x, looks, high, lambda v: upper_bound(v, ALPHA), n_check))
    table(
        [
            "true mean",
            "mean cases graded of 200",
            "candidate calls saved",
            "proven",
            "ruled out",
            "undecided",
        ],
        rows,
    )
    print(
        f"Status at the stop equals the status after grading all 200 cases in every run: {all(same_all)}. "
        f"Check on the first {n_check} runs x 20 looks against `lower_bound`/`upper_bound`: max |diff| "
        f"{max(w for w, _ in checks):.1e}; same verdicts: {all(s for _, s in checks)}.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="simulated runs per scenario")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="smoke mode: 100 runs, fewer checks")
    args = parser.parse_args()
    runs = 100 if args.quick else args.runs
    n_check = 3 if args.quick else 20
    start = time.perf_counter()
    print(f"# Routing decisions by simulation (runs {runs}, seed {args.seed})\n")
    print(
        f"min_quality {MIN_QUALITY}, min_samples {MIN_SAMPLES}, new rule alpha {ALPHA} one-sided; "
        f"old rule two-sided {OLD_CONFIDENCE:.0%} t-interval.\n"
    )
    worked_example(args.seed)
    print("## 1. False-route rate, true mean 0.9 (Beta(9, 1)), looks every 10 cases up to 500\n")
    false_routes(args.seed, runs, 0.9, 10.0, 1, n_check)
    print("## 1b. False-route rate, 0/1 scores with mean 0.9 (Bernoulli), looks every 10 cases up to 500\n")
    false_routes_binary(args.seed, runs, n_check)
    print("## 2. False-route rate, true mean 0.88 (Beta(8.8, 1.2)), looks every 10 cases up to 500\n")
    false_routes(args.seed, runs, 0.88, 10.0, 2, n_check)
    print("## 3. Cases needed to route a good candidate, looks every 10 cases up to 2000\n")
    cases_to_route(args.seed, runs, n_check)
    print("## 4. Stopping a 200-case suite once the candidate is proven or ruled out (looks every 10)\n")
    calls_saved(args.seed, runs, n_check)
    print(f"Total time {time.perf_counter() - start:.1f} s.")


if __name__ == "__main__":
    main()
