"""Routing on what people would say (issue 23): the prediction-powered anytime bound by simulation.

Usage: python scripts/bench/ppi_sim.py [--runs 1000] [--grid-runs 200] [--seed 2026] [--quick]

Sections (markdown on stdout, every number reproducible from the flags):

(a) validity under monitoring: judge 0.1 above people (clipped), human mean 0.85, min_quality
    0.9, a look after every batch of 10 cases up to 2,000 cases, labelling rate 0.2; the share
    of runs routed by the judge alone and by the human-target bound, uniform and active
    labelling, and with a bias that depends on the case (long answers);
(b) labels saved: pairwise preferences, people prefer the candidate on 62% of cases (0/1
    labels, no human ties), min_quality 0.5, judges that agree with people on 95% of cases,
    three ways: errors unrelated to the judge's confidence (4% ties, 1% wrong, the first
    model), and a judge asked in both orders whose errors sit where the orders disagree (9%
    ties and 0.5% wrong in both orders; or every error a tie); labels needed by labels alone
    and by the bound, uniform (with and without the labels-alone arm) and active, at rates
    0.1, 0.2 and 0.3;
(c) regimes: human mean x judge agreement x rate -> median labels and cases needed, and the
    ratio to the best labels-only sequence (issue 35): the least median labels, on the labels
    each uniform run drew and at its looks, of the labels arm alone (the betting sequence
    aimed at min_quality that the judges' target uses), truescore 0.7.4's empirical-Bernstein
    sequence (``truescore.sequential.confidence_sequence``, one-sided; our implementation of
    the same construction, cap 1/2, where truescore is not installed) and the hedged betting
    test at min_quality (Waudby-Smith & Ramdas, Theorem 3, c = 3/4), uniform and active;
(d) the cost of one call of ``human_bound`` with 100,000 cases and 2,000 labels.

Runs that never prove within the horizon count as infinitely many labels in the medians.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from bound_efficiency import betting_log_capital, eb_lower
from decisions_sim import anytime_lower
from decisions_sim import rate as rate_ci

try:
    from truescore.sequential import confidence_sequence
except ImportError:  # a dev extra
    confidence_sequence = None

from llm_connect.routing._ppi import (
    ACTIVE_FLOOR,
    human_bound,
    inclusion_probabilities,
    judge_uncertainty,
    labels_share,
    ppi_sequence,
)

ALPHA = 0.05
LOOK_EVERY = 10
MIN_SAMPLES = 30
CHUNK = 100
SHARE: list[float | None] = [None]  # None: the share human_bound uses (labels_share)


def active_inclusion(u: np.ndarray, rate: float, pilot: np.ndarray) -> np.ndarray:
    """``inclusion_probabilities`` (default floor ``ACTIVE_FLOOR * rate``) with the scale solved
    on a pilot sample of the judge's uncertainties drawn before the run, so each ``p_t``
    depends on case t alone."""
    return np.asarray(inclusion_probabilities(u.ravel(), rate, reference=pilot)).reshape(u.shape)


def first_proof(lower: np.ndarray, threshold: float) -> np.ndarray:
    """Cases at the first look (every 10, at least MIN_SAMPLES) whose lower bound clears the
    threshold; ``inf`` for runs that never do."""
    looks = np.arange(LOOK_EVERY, lower.shape[1] + 1, LOOK_EVERY)
    ok = (lower[:, looks - 1] >= threshold) & (looks >= MIN_SAMPLES)
    return np.where(ok.any(axis=1), looks[ok.argmax(axis=1)], np.inf)


def labels_at(chosen: np.ndarray, cases: np.ndarray) -> np.ndarray:
    """Labels among the first ``cases`` cases of each run (``inf`` stays ``inf``)."""
    counts = np.concatenate((np.zeros((chosen.shape[0], 1)), np.cumsum(chosen, axis=1)), axis=1)
    idx = np.where(np.isfinite(cases), cases, 0).astype(int)
    return np.where(np.isfinite(cases), counts[np.arange(chosen.shape[0]), idx], np.inf)


def bound_runs(
    judge: np.ndarray,
    p: np.ndarray,
    chosen: np.ndarray,
    human: np.ndarray,
    floor: float,
    uniform: bool,
    threshold: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Anytime lower and upper bounds of every run after every case, in chunks of runs."""
    lows, highs = [], []
    for s in range(0, judge.shape[0], CHUNK):
        seq = ppi_sequence(
            judge[s : s + CHUNK],
            p[s : s + CHUNK],
            chosen[s : s + CHUNK],
            human[s : s + CHUNK],
            ALPHA,
            floor=floor,
            labels_share=(SHARE[0] or labels_share(p[:1, 0], threshold)) if uniform else 0.0,
            threshold=threshold,
        )
        lows.append(seq.lower)
        highs.append(seq.upper)
    return np.concatenate(lows), np.concatenate(highs)


def labels_only(human: np.ndarray, threshold: float) -> dict[str, np.ndarray]:
    """Labels needed per run (every case labelled, a look every 10 labels) by each labels-only
    sequence: the labels arm alone, the empirical-Bernstein sequence (truescore's where
    installed) and the hedged betting test at ``threshold``."""
    ones = np.ones(human.shape)
    arm = [
        ppi_sequence(
            human[s : s + CHUNK], ones[s : s + CHUNK], ones[s : s + CHUNK].astype(bool), human[s : s + CHUNK],
            ALPHA, floor=1.0, labels_share=1.0, threshold=threshold,
        ).lower
        for s in range(0, human.shape[0], CHUNK)
    ]  # fmt: skip
    if confidence_sequence is not None:
        eb = np.stack([confidence_sequence(row, alpha=ALPHA, one_sided=True).lower_bounds for row in human])
    else:
        eb = eb_lower(human, ALPHA, 0.5)
    capital = betting_log_capital(human, ALPHA, threshold, 0.75)
    return {
        "labels arm": first_proof(np.concatenate(arm), threshold),
        EB_NAME: first_proof(eb, threshold),
        "hedged betting": first_proof(np.where(capital >= math.log(1 / ALPHA), threshold, 0.0), threshold),
    }


EB_NAME = "truescore EB" if confidence_sequence is not None else "EB (ours, cap 1/2)"


def best_of(got: dict[str, np.ndarray]) -> float:
    """The least median among the labels-only sequences."""
    return min(float(np.median(v)) for v in got.values())


def med(x: np.ndarray) -> str:
    m = float(np.median(x))
    return "never" if math.isinf(m) else f"{m:.0f}"


def table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


# -- (a) validity ----------------------------------------------------------------------------


def validity(seed: int, runs: int, n: int) -> None:
    print(f"### (a) Routed at any look (every 10 cases up to {n}), human mean 0.85, min_quality 0.9\n")
    rows = []
    for label, case_bias in (
        ("constant bias +0.1", False),
        ("bias on long answers (+0.2 long, 0 short)", True),
    ):
        rng = np.random.default_rng([seed, 1, int(case_bias)])
        if case_bias:  # half the answers long: people like them less, the judge more
            long = rng.random((runs, n)) < 0.5
            human = np.where(long, rng.beta(8.0, 2.0, (runs, n)), rng.beta(9.0, 1.0, (runs, n)))
            judge = np.clip(human + np.where(long, 0.2, 0.0), 0.0, 1.0)
        else:
            human = rng.beta(8.5, 1.5, (runs, n))
            judge = np.clip(human + 0.1, 0.0, 1.0)
        routed_judge = np.isfinite(first_proof(anytime_lower(judge, ALPHA), 0.9))
        rows.append([label, "judge alone", f"{judge.mean():.3f}", rate_ci(int(routed_judge.sum()), runs)])
        for strategy in ("uniform", "active"):
            if strategy == "uniform":
                p = np.full((runs, n), 0.2)
            else:
                p = active_inclusion(judge_uncertainty(judge), 0.2, judge_uncertainty(judge[-1]))
            chosen = rng.random((runs, n)) < p
            low, _ = bound_runs(
                judge,
                p,
                chosen,
                human,
                0.2 if strategy == "uniform" else 0.2 * ACTIVE_FLOOR,
                strategy == "uniform",
                0.9,
            )
            routed = np.isfinite(first_proof(low, 0.9))
            rows.append(
                [
                    label,
                    f"target=human, {strategy} rate 0.2 (mean p {p.mean():.3f})",
                    f"{human.mean():.3f}",
                    rate_ci(int(routed.sum()), runs),
                ]
            )
    table(["judge", "rule", "mean it sees", "routed (runs) [95% CP]"], rows)


# -- pairwise model --------------------------------------------------------------------------


def pairwise(
    rng: np.random.Generator, runs: int, n: int, mean: float, agree: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """People's 0/1 preference (mean ``mean``) and a judge in both orders: it agrees with people
    on ``agree`` of cases, flips across orders (0.5) on 80% of the rest and is wrong on 20%;
    ``None``: a judge with no signal (a fair coin, independent of people)."""
    human = (rng.random((runs, n)) < mean).astype(float)
    u = rng.random((runs, n))
    if agree is None:
        return human, (u < 0.5).astype(float)
    rest = 1.0 - agree
    return human, np.where(u < agree, human, np.where(u < agree + 0.8 * rest, 0.5, 1.0 - human))


def both_orders(
    rng: np.random.Generator, runs: int, n: int, mean: float, agree: float, wrong: float
) -> tuple[np.ndarray, np.ndarray]:
    """People's 0/1 preference (mean ``mean``) and a judge asked in both orders whose errors sit
    where the two orders disagree: on a share ``2 (1 - agree - wrong)`` of cases (the hard
    ones) it picks the same position in both orders, so one verdict is right and one wrong and
    the grade is a tie (0.5); on ``wrong`` it is wrong in both orders (grade ``1 - H``); else
    right in both. Each single verdict agrees with people on ``agree`` of cases."""
    human = (rng.random((runs, n)) < mean).astype(float)
    ties = 2.0 * (1.0 - agree - wrong)
    u = rng.random((runs, n))
    return human, np.where(u < ties, 0.5, np.where(u < ties + wrong, 1.0 - human, human))


def pairwise_pilot(judge: np.ndarray) -> np.ndarray:
    """A pilot sample of the judge's grades, drawn apart from the runs (a fresh shuffle of one
    run's grades stands in for it: the runs are independent and share one distribution)."""
    return np.random.default_rng(0).permutation(judge[-1])


def needed(
    human: np.ndarray,
    judge: np.ndarray,
    threshold: float,
    rate: float,
    strategy: str,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Labels and cases needed per run with the human-target bound (``strategy``: "uniform",
    "active", or "uniform, no labels arm": the prediction-powered e-process alone at full alpha,
    as active labelling has it)."""
    if strategy == "active":
        pilot = judge_uncertainty(pairwise_pilot(judge))
        p, floor = active_inclusion(judge_uncertainty(judge), rate, pilot), ACTIVE_FLOOR * rate
    else:  # "uniform", or "uniform, no labels arm": the prediction-powered e-process alone
        p, floor = np.full(human.shape, rate), rate
    chosen = rng.random(human.shape) < p
    low, _ = bound_runs(judge, p, chosen, human, floor, strategy == "uniform", threshold)
    cases = first_proof(low, threshold)
    LAST_CHOSEN[0] = chosen
    return labels_at(chosen, cases), cases


LAST_CHOSEN: list[np.ndarray] = [np.zeros((0, 0), bool)]
"""The cases :func:`needed` chose last (for the paired labels-only columns)."""


def paired_labels_only(human: np.ndarray, chosen: np.ndarray, threshold: float) -> dict[str, np.ndarray]:
    """Labels needed per run by each labels-only sequence run on the very labels the human
    bound's run drew (in the same order), read at the same looks (every 10 cases)."""
    names = ("labels arm", EB_NAME, "hedged betting")
    lows = {k: np.zeros(human.shape) for k in names}
    for r in range(human.shape[0]):
        x = human[r][chosen[r]]
        if not x.size:
            continue
        per_label = {
            "labels arm": ppi_sequence(
                x, np.ones(x.size), np.ones(x.size, bool), x, ALPHA, floor=1.0, labels_share=1.0,
                threshold=threshold,
            ).lower,
            EB_NAME: (
                confidence_sequence(x, alpha=ALPHA, one_sided=True).lower_bounds
                if confidence_sequence is not None
                else eb_lower(x[None], ALPHA, 0.5)[0]
            ),
            "hedged betting": np.where(
                betting_log_capital(x[None], ALPHA, threshold, 0.75)[0] >= math.log(1 / ALPHA), threshold, 0.0
            ),
        }  # fmt: skip
        k = np.cumsum(chosen[r]) - 1  # the last label's index after each case
        for name, v in per_label.items():
            lows[name][r] = np.where(k >= 0, np.asarray(v)[np.maximum(k, 0)], 0.0)
    return {k: labels_at(chosen, first_proof(v, threshold)) for k, v in lows.items()}


# -- (b) labels saved ------------------------------------------------------------------------


JUDGE_MODELS = [
    ("errors unrelated to its confidence: 4% ties, 1% wrong (agreement counts ties as misses)", None),
    ("errors where its two orders disagree: 9% ties, 0.5% wrong in both orders", 0.005),
    ("every error a tie: 10% ties, none wrong in both orders", 0.0),
]


def labels_saved(seed: int, runs: int, n: int) -> None:
    print(
        f"### (b) Pairwise, people prefer the candidate on 62%, min_quality 0.5, "
        f"judge agrees on 95% ({runs} runs)\n"
    )
    rng = np.random.default_rng([seed, 2])
    human = (rng.random((runs, n)) < 0.62).astype(float)
    only = labels_only(human, 0.5)
    base = best_of(only)
    rows = [
        [f"labels alone, {k} (every case labelled)", "", "1.0", med(v), med(v), f"{np.median(v) / base:.2f}"]
        for k, v in only.items()
    ]
    for m, (judge_name, wrong) in enumerate(JUDGE_MODELS):
        jrng = np.random.default_rng([seed, 2, m])
        if wrong is None:
            human, judge = pairwise(jrng, runs, n, 0.62, 0.95)
        else:
            human, judge = both_orders(jrng, runs, n, 0.62, 0.95, wrong)
        for r in (0.1, 0.2, 0.3):
            got = {}
            for strategy in ("uniform", "uniform, no labels arm", "active"):
                labels, cases = needed(
                    human, judge, 0.5, r, strategy, np.random.default_rng([seed, 3, m, int(r * 100)])
                )
                got[strategy] = float(np.median(labels))
                rows.append(
                    [
                        f"human bound, {strategy}",
                        judge_name,
                        f"{r}",
                        med(labels),
                        med(cases),
                        f"{got[strategy] / base:.2f}",
                    ]
                )
            rows.append(
                [
                    f"**active / uniform** at rate {r}",
                    judge_name,
                    "",
                    f"{got['active'] / got['uniform']:.2f}",
                    "",
                    "",
                ]
            )
    table(["rule", "judge", "rate", "median labels", "median cases", "labels / best labels alone"], rows)


# -- (c) regimes -----------------------------------------------------------------------------


REGIMES = [(0.62, 0.5), (0.8, 0.7), (0.97, 0.9)]
LABELS_GUESS = [150, 140, 90]
"""About the labels a labels-only sequence needs per regime (the horizon is six times that)."""
JUDGES: list[float | None] = [0.95, 0.8, None]
RATES = [0.1, 0.3, 0.5]


def regimes(seed: int, runs: int) -> None:
    print(
        f"### (c) Regimes: median labels (and cases) needed, uniform labelling; last column active "
        f"({runs} runs per cell)\n\nThe labels-only columns run on the labels each uniform run drew, "
        "read at the same looks; the ratios are to the least of their medians.\n"
    )
    rows = []
    worst = worst_active = 0.0
    for k, (mean, threshold) in enumerate(REGIMES):
        for a, agree in enumerate(JUDGES):
            for r in RATES:
                n = int(min(20_000, 6 * LABELS_GUESS[k] / r + 500))
                hrng = np.random.default_rng([seed, 5, k, a, int(r * 100)])
                h, j = pairwise(hrng, runs, n, mean, agree)
                labels, cases = needed(h, j, threshold, r, "uniform", hrng)
                only = paired_labels_only(h, LAST_CHOSEN[0], threshold)
                base = best_of(only)
                act, _ = needed(
                    h, j, threshold, r, "active", np.random.default_rng([seed, 7, k, a, int(r * 100)])
                )
                ratio = float(np.median(labels)) / base
                worst = max(worst, ratio)
                worst_active = max(worst_active, float(np.median(act)) / base)
                rows.append(
                    [
                        f"{mean} vs {threshold}",
                        "no signal" if agree is None else f"{agree:.0%}",
                        f"{r}",
                        " / ".join(med(v) for v in only.values()),
                        f"{base:.0f}",
                        med(labels),
                        med(cases),
                        f"{ratio:.2f}",
                        f"{float(np.median(act)) / base:.2f}",
                    ]
                )
    table(
        [
            "human mean vs min_quality",
            "judge agrees",
            "rate",
            f"labels alone: labels arm / {EB_NAME} / hedged betting",
            "best",
            "labels (human bound)",
            "cases (human bound)",
            "ratio",
            "ratio, active",
        ],
        rows,
    )
    print(f"Largest ratio in the table: {worst:.2f} uniform, {worst_active:.2f} active\n")


# -- (d) cost --------------------------------------------------------------------------------


def cost(seed: int) -> None:
    rng = np.random.default_rng([seed, 6])
    human, judge = pairwise(rng, 1, 100_000, 0.62, 0.95)
    p = np.full(100_000, 0.02)
    chosen = rng.random(100_000) < p
    h = np.where(chosen, human[0], np.nan)
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        got = human_bound(judge[0], p, chosen, h, alpha=ALPHA, min_quality=0.5)
        times.append(time.perf_counter() - t0)
    print(
        f"### (d) One `human_bound` call, 100,000 cases and {got.labels_used} labels: "
        f"median {1000 * float(np.median(times)):.1f} ms over 7 calls ({got.status})\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs for (a) and (b)")
    parser.add_argument("--grid-runs", type=int, default=200, help="runs per cell of (c)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--labels-share", type=float, default=None, help="the labels arm's share (default: human_bound's)"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 100 runs, 40 per cell")
    args = parser.parse_args()
    SHARE[0] = args.labels_share
    runs, grid = (100, 40) if args.quick else (args.runs, args.grid_runs)
    t0 = time.perf_counter()
    validity(args.seed, runs, 2000)
    labels_saved(args.seed, runs, 3000)
    regimes(args.seed, grid)
    cost(args.seed)
    print(f"Total {time.perf_counter() - t0:.0f} s.")


if __name__ == "__main__":
    main()
