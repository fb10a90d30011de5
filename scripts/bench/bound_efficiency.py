"""How many cases a routing decision needs before it proves a candidate, and how often it proves
one it should not: llm-connect's router against published confidence-sequence constructions.

Usage::

    python scripts/bench/bound_efficiency.py [--runs N] [--router-runs R] [--validity-runs M]
        [--seed S] [--skip-router] [--quick]

**Efficiency.** Six regimes (a generator of per-case values in [0, 1] and a threshold ``q``).
Each run draws ONE seeded series of 5000 values (``numpy.random.default_rng([seed, regime,
run])``) and every column reads that same series, looking every 10 cases; the figure is the
median number of cases until the candidate is proven (a run never proven within 5000 cases
counts as +inf, and their number is shown). Columns, all one-sided at ``alpha = 0.05``:

* ``router``: ``Router(ledger).evaluate`` on a real SQLite ledger in a temp dir, the cases
  recorded 10 at a time with ``QualityLedger.record_batch`` (one Router per run; it caches),
  stopping at the first look whose candidate status is ``"proven"``. Slow, so it runs on the
  first ``--router-runs`` series only (default ``min(runs, 16)``); ``--skip-router`` leaves it out.
* ``eb c=0.5`` / ``eb c=0.75``: the predictable plug-in empirical-Bernstein confidence sequence
  (Waudby-Smith & Ramdas, JRSS-B 2024, Theorem 2), implemented here; c=0.75 is llm-connect's
  bound before the threshold-aware change.
* ``truescore EB``: ``truescore.sequential.confidence_sequence(x, alpha, one_sided=True)``
  (its default cap 0.5, so it should match ``eb c=0.5``), when truescore is installed.
* ``betting c=0.75``: the one-sided hedged-capital betting test at ``m = q`` (ibid., Theorem 3):
  proven once ``max_{s<=t} log K_s(q) >= log(1/alpha)``.

The ratio line compares the router with the best published column on the router's runs only.

**Validity.** True mean exactly at the threshold; ``k`` candidates each tested at
``alpha = 0.05 / k``. A run is a false proof when any of its ``k`` candidates' bounds ever
reaches ``q`` within 5000 cases (family-wise; nominal 5%). Columns: the router's bound
(``llm_connect.routing._bounds.lower_bound(x, alpha, threshold=q)``, or without ``threshold``,
marked "(old bound)", where the keyword does not exist yet), ``eb c=0.75``, ``betting c=0.75``.

The defaults (200 runs, router on 16, 1000 validity runs) took about 50 s here (2 shared
cores, 0.5 GB peak memory), most of it the router's ledgers; ``--quick`` (50 runs, router on 8,
200 validity runs) about 20 s.
"""

from __future__ import annotations

import argparse
import inspect
import math
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.routing import Router
from llm_connect.routing._bounds import lower_bound
from llm_connect.types import LLMResponse, RunConfig, Usage
from llm_connect.values import RoutingPolicy

try:
    import truescore
    from truescore.sequential import confidence_sequence
except ImportError:  # a dev extra
    truescore = None

Array = NDArray[np.float64]
Draw = Callable[[np.random.Generator, Any], Array]

N_CASES = 5000
LOOK = 10
ALPHA = 0.05
TRUESCORE_PIN = "truescore==0.7.4"


def _bernoulli(p: float) -> Draw:
    return lambda rng, size: (rng.random(size) < p).astype(float)


def _grades(probs: tuple[float, float, float]) -> Draw:
    return lambda rng, size: rng.choice(np.array([1.0, 0.5, 0.0]), size=size, p=probs)


def _beta(a: float, b: float) -> Draw:
    return lambda rng, size: rng.beta(a, b, size)


REGIMES: list[tuple[str, Draw, float]] = [
    ("win rate 0.62 vs 0.5 (0/1)", _bernoulli(0.62), 0.5),
    ("win rate 0.55 vs 0.5 (0/1)", _bernoulli(0.55), 0.5),
    ("pairwise 1/0.5/0 at .55/.15/.30", _grades((0.55, 0.15, 0.30)), 0.5),
    ("Beta(3,1) (mean 0.75)", _beta(3, 1), 0.65),
    ("Beta(4,1) (mean 0.8)", _beta(4, 1), 0.7),
    ("pass rate 0.97 vs 0.9 (0/1)", _bernoulli(0.97), 0.9),
]

BOUNDARY: list[tuple[str, Draw, float]] = [
    ("Bernoulli(0.5)", _bernoulli(0.5), 0.5),
    ("Bernoulli(0.9)", _bernoulli(0.9), 0.9),
    ("pairwise 1/0.5/0 at .35/.30/.35", _grades((0.35, 0.30, 0.35)), 0.5),
    ("Beta(9,1) (mean 0.9)", _beta(9, 1), 0.9),
]


# -- bounds over rows of a matrix ------------------------------------------------------------


def _plug_in(x: Array) -> tuple[Array, Array, Array]:
    """``t``, ``mu_hat_{t-1}`` and ``sigma2_{t-1}`` (priors 1/2 and 1/4) along each row of ``x``."""
    t = np.arange(1, x.shape[1] + 1, dtype=float)
    mu_hat = (0.5 + np.cumsum(x, axis=1)) / (t + 1.0)
    sigma2 = (0.25 + np.cumsum((x - mu_hat) ** 2, axis=1)) / (t + 1.0)
    ones = np.ones((x.shape[0], 1))
    mu_prev = np.concatenate((0.5 * ones, mu_hat[:, :-1]), axis=1)
    sigma2_prev = np.concatenate((0.25 * ones, sigma2[:, :-1]), axis=1)
    return t, mu_prev, sigma2_prev


def eb_lower(x: Array, alpha: float, c: float) -> Array:
    """Running maximum of the one-sided predictable plug-in empirical-Bernstein lower bound
    (Waudby-Smith & Ramdas 2024, Theorem 2), truncation ``c``, at every case of every row."""
    log_inv = math.log(1.0 / alpha)
    t, mu_prev, sigma2_prev = _plug_in(x)
    lam = np.minimum(c, np.sqrt(2.0 * log_inv / (sigma2_prev * t * np.log1p(t))))
    psi = (-np.log1p(-lam) - lam) / 4.0
    v = 4.0 * (x - mu_prev) ** 2
    lows = (np.cumsum(lam * x, axis=1) - log_inv - np.cumsum(v * psi, axis=1)) / np.cumsum(lam, axis=1)
    return np.maximum.accumulate(lows, axis=1)


def betting_log_capital(x: Array, alpha: float, m: float, c: float) -> Array:
    """Running maximum of ``log K_t(m)``, the one-sided hedged capital (ibid., Theorem 3) with
    bets ``min(sqrt(2 log(1/alpha) / (sigma2_{i-1} i log(1+i))), c/m)``, along each row."""
    log_inv = math.log(1.0 / alpha)
    t, _, sigma2_prev = _plug_in(x)
    lam = np.minimum(np.sqrt(2.0 * log_inv / (sigma2_prev * t * np.log1p(t))), c / m)
    return np.maximum.accumulate(np.cumsum(np.log1p(lam * (x - m)), axis=1), axis=1)


def first_look(proven: NDArray[np.bool_]) -> Array:
    """Cases at the first look (every :data:`LOOK` cases) where ``proven`` holds, per row; inf if none."""
    looks = proven[:, LOOK - 1 :: LOOK]
    hit = looks.any(axis=1)
    return np.where(hit, (looks.argmax(axis=1) + 1.0) * LOOK, np.inf)


# -- the router on a real ledger -------------------------------------------------------------


def _response(model: str) -> LLMResponse:
    return LLMResponse(
        text="4", model=model, provider="openai", latency_ms=300.0, usage=Usage(12, 3),
        cost_usd=0.001, finish_reason="stop",
    )  # fmt: skip


BASE, CAND = _response("base"), _response("cand")


def _result(score: float, case: int) -> GradingResult:
    """A valid grade of ``case`` (as ``tests/fixtures/databases.py::_make_result`` builds them)."""
    return GradingResult(
        quality_score=float(score),
        notes="bound_efficiency",
        grader_id="exact",
        baseline_response=BASE,
        candidate_response=CAND,
        details={"judge_spec": {"name": "exact", "args": {}}},
        prompt=f"case {case}",
        run_config=RunConfig(temperature=0.0, max_tokens=64),
    )


def router_cases(x: Array, q: float) -> float:
    """Cases recorded when ``Router.evaluate`` first finds the candidate proven (inf: never)."""
    policy = RoutingPolicy(min_quality=q, min_samples=LOOK, route_on=("exact",))
    with tempfile.TemporaryDirectory() as tmp, QualityLedger(f"sqlite:///{Path(tmp) / 'l.db'}") as ledger:
        router = Router(ledger)
        for lo in range(0, x.size, LOOK):
            ledger.record_batch(
                [
                    RecordItem(_result(v, lo + i), "bench", case_id=str(lo + i))
                    for i, v in enumerate(x[lo : lo + LOOK])
                ]
            )
            decision = router.evaluate("bench", baseline="base", candidates=["cand"], policy=policy)
            if decision.candidates[0].status == "proven":
                return float(lo + LOOK)
    return math.inf


# -- tables ----------------------------------------------------------------------------------


def bound_cases(x: Array, q: float) -> Array:
    """Cases until the router's bound (the betting sequence aimed at ``q``, continued look by look
    as a Router continues it) proves ``q``, for each row of ``x``."""
    from llm_connect.routing._betting import betting_bounds

    rows = x.shape[0]
    out = np.full(rows, np.inf)
    states: list[Any] = [None] * rows
    for end in range(LOOK, x.shape[1] + 1, LOOK):
        lows, _, states = betting_bounds(list(x[:, end - LOOK : end]), [ALPHA] * rows, [q] * rows, states)
        hit = np.isinf(out) & (np.array([low or 0.0 for low in lows]) >= q)
        out[hit] = end
        if not np.isinf(out).any():
            break
    return out


def _median(values: Array) -> str:
    """The median (inf counts as never) and how many runs never proved."""
    med = float(np.median(values))
    never = int(np.isinf(values).sum())
    text = "never" if math.isinf(med) else f"{med:g}"
    return f"{text} ({never} never)" if never else text


def efficiency(runs: int, router_runs: int, seed: int) -> None:
    """Print the table of median cases to prove, and the router's ratio per regime."""
    cols = ["router", "router's bound", "eb c=0.5", "eb c=0.75", "truescore EB", "betting c=0.75"]
    print(f"## Median cases to prove (alpha {ALPHA}, a look every {LOOK} cases, up to {N_CASES})\n")
    print(
        f"{runs} runs per regime. `router's bound`: the bound a Router decides with, continued look by look,"
        f" on every run; `router`: the Router itself on a real SQLite ledger, on the first {router_runs}"
        " runs only (its median is of those runs; the check below compares it run by run).\n"
    )
    print("| regime | q | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    ratios: list[str] = []
    checks: list[str] = []
    for r, (name, draw, q) in enumerate(REGIMES):
        x = np.stack([draw(np.random.default_rng([seed, r, i]), N_CASES) for i in range(runs)])
        got: dict[str, Array] = {
            "eb c=0.5": first_look(eb_lower(x, ALPHA, 0.5) >= q),
            "eb c=0.75": first_look(eb_lower(x, ALPHA, 0.75) >= q),
            "betting c=0.75": first_look(betting_log_capital(x, ALPHA, q, 0.75) >= math.log(1 / ALPHA)),
        }
        if truescore is not None:
            lbs = np.stack([confidence_sequence(row, alpha=ALPHA, one_sided=True).lower_bounds for row in x])
            got["truescore EB"] = first_look(lbs >= q)
        got["router's bound"] = bound_cases(x, q)
        if router_runs:
            got["router"] = np.array([router_cases(x[i], q) for i in range(router_runs)])
            same = int((got["router"] == got["router's bound"][:router_runs]).sum())
            checks.append(f"- {name}: the Router proved at the bound's look in {same} of {router_runs} runs")
        cells = [_median(got[c]) if c in got else "n/a" for c in cols]
        if truescore is None:
            cells[3] = f"n/a (pip install {TRUESCORE_PIN})"
        print(f"| {name} | {q} | " + " | ".join(cells) + " |")
        ref = "truescore EB" if truescore is not None else "eb c=0.5"
        best = min(float(np.median(got[c])) for c in ("eb c=0.75", ref, "betting c=0.75"))
        mine = float(np.median(got["router's bound"]))
        ratio = "n/a" if math.isinf(best) else ("never" if math.isinf(mine) else f"{mine / best:.2f}x")
        ratios.append(f"- {name}: router's bound / min(eb c=0.75, {ref}, betting c=0.75) = {ratio}")
    print(f"\nRatio of medians over all {runs} runs:\n")
    print("\n".join(ratios))
    if checks:
        print("\nThe Router on a real ledger against its bound, run by run:\n")
        print("\n".join(checks))


def _last(running: Callable[..., Array], x: Array, *args: float) -> Array:
    """The last column of ``running(x, *args)``, computed 250 rows at a time (bounded memory)."""
    return np.concatenate([running(x[i : i + 250], *args)[:, -1] for i in range(0, x.shape[0], 250)])


def router_bound() -> tuple[Callable[[Array, float, float], float], bool]:
    """The library's bound as the router asks it (with ``threshold=``), and whether it is the old one
    (the keyword does not exist yet)."""
    try:
        lower_bound(np.array([0.5]), ALPHA, threshold=0.5)  # type: ignore[call-arg]
    except TypeError:
        if "threshold" in inspect.signature(lower_bound).parameters:
            raise
        return lambda x, alpha, q: float(lower_bound(x, alpha) or 0.0), True
    return lambda x, alpha, q: float(lower_bound(x, alpha, threshold=q) or 0.0), False  # type: ignore[call-arg]


def validity(runs: int, seed: int) -> None:
    """Print the share of runs, true mean at the threshold, in which a candidate is ever proven."""
    bound, old = router_bound()
    lib = "router bound" + (" (old bound)" if old else "")
    cols = [lib, "eb c=0.75", "betting c=0.75"]
    print(f"\n## Validity: true mean at the threshold, {runs} runs of {N_CASES} cases (nominal 5%)\n")
    print("A run is a false proof when any of its k candidates (each at alpha 0.05/k) is ever proven.\n")
    print("| data | q | k | alpha each | " + " | ".join(cols) + " |")
    print("|---|---|---|---|" + "---|" * len(cols))
    for s, (name, draw, q) in enumerate(BOUNDARY):
        # one rng per run; candidate j of a run is row j (k=1 reads candidate 0 of k=3's series)
        x = np.stack([draw(np.random.default_rng([seed, 100 + s, i]), (3, N_CASES)) for i in range(runs)])
        for k in (1, 3):
            alpha = ALPHA / k
            cand = x[:, :k, :].reshape(runs * k, N_CASES)
            proved = {
                lib: np.array([bound(row, alpha, q) >= q for row in cand]),
                "eb c=0.75": _last(eb_lower, cand, alpha, 0.75) >= q,
                "betting c=0.75": _last(betting_log_capital, cand, alpha, q, 0.75) >= math.log(1 / alpha),
            }
            cells = []
            for c in cols:
                hits = int(proved[c].reshape(runs, k).any(axis=1).sum())
                cells.append(f"{100 * hits / runs:.1f}% ({hits}/{runs})")
            print(f"| {name} | {q} | {k} | {alpha:.4g} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> None:
    """Parse the options, print the machine line and both tables, then the seconds taken."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=None, help="efficiency runs per regime (200; quick 50)")
    parser.add_argument("--router-runs", type=int, default=None, help="router runs (min(runs, 16); quick 8)")
    parser.add_argument("--validity-runs", type=int, default=None, help="validity runs (1000; quick 200)")
    parser.add_argument("--seed", type=int, default=20240601, help="seed of every series")
    parser.add_argument("--skip-router", action="store_true", help="leave the (slow) router column out")
    parser.add_argument("--quick", action="store_true", help="fewer runs: 50 / 8 / 200")
    args = parser.parse_args(argv)
    runs = args.runs if args.runs is not None else (50 if args.quick else 200)
    wanted = args.router_runs if args.router_runs is not None else (8 if args.quick else 16)
    router_runs = 0 if args.skip_router else min(runs, wanted)
    validity_runs = args.validity_runs if args.validity_runs is not None else (200 if args.quick else 1000)
    if runs < 1 or validity_runs < 1 or router_runs < 0:
        parser.error("run counts must be positive")

    start = time.perf_counter()
    cpu = platform.processor() or platform.machine()
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    print(
        f"Machine: {cpu} / Python {platform.python_version()} / numpy {np.__version__}; "
        f"seed {args.seed}; command: `{command}`\n"
    )
    used = f"truescore {truescore.__version__}" if truescore is not None else "truescore not installed"
    print(f"{used}\n")
    efficiency(runs, router_runs, args.seed)
    validity(validity_runs, args.seed)
    print(f"\nTotal: {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
