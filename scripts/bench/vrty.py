"""Benchmark: our VRTY 1.0.1 against ``vrty.score`` and rouge-score's ROUGE-L, in one run.

For each response size (tokens) it builds ``--calls`` distinct prompts, each
with a baseline and a candidate response, then times (interleaved, call by
call, gc off):

* single:  ``llm_connect.scoring.vrty.analyse(prompt, response)`` vs ``vrty.score(prompt, response)``
* scorer:  ``VrtyScorer().score(response, prompt=prompt)`` (adds the Score/details) vs ``vrty.score``
* pair:    ``VrtyScorer().score_pair(baseline, candidate, prompt=prompt)`` vs two ``vrty.score`` calls
* ROUGE-L: ``RougeScorer(["rougeL"]).score(prompt, response)`` on the same (prompt,
  response) pairs as "single" (the prompt as the reference, as VRTY's own benchmark does)

and prints p50/p99 latencies with the ratio (baseline time / our time, so
> 1 means we are faster). Our prompt cache is cleared before each of our
timed calls, so the numbers are cold-cache. By default each call is timed in
CPU time of the running thread (``--clock wall`` for perf_counter): on a busy
machine wall time mostly measures other processes. Also checks that the timed
code returns vrty's numbers. Run with the dev virtualenv on Python 3.11::

    python scripts/bench/vrty.py            # 1,000 calls per size, sizes 100,500,2000
    python scripts/bench/vrty.py --calls 200 --sizes 100,2000
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

# This file is itself named vrty.py: keep its folder off sys.path so that
# ``import vrty`` finds the vrty package, not this script.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def make_pairs(n: int, size: int, seed: int) -> list[tuple[str, str, str]]:
    """``n`` distinct (prompt, baseline, candidate) triples with ~``size``-token responses."""
    from llm_connect.scoring.vrty._idf import idf_table

    table = idf_table()
    rng = random.Random(seed * 100_003 + size)
    vocab = sorted(table.idf)
    common = [w for w in vocab if table.idf[w] < 5.0]
    stop = sorted(table.stopwords)
    jargon = ["api", "endpoint", "kubernetes", "async", "latency", "llm", "token", "deploy"]

    def word(pool: list[str]) -> str:
        r = rng.random()
        if r < 0.40:
            return rng.choice(stop)
        if r < 0.55 and pool:
            return rng.choice(pool)
        if r < 0.95:
            return rng.choice(common)
        return rng.choice(jargon)

    def text(tokens: int, pool: list[str]) -> str:
        out: list[str] = []
        while tokens > 0:
            k = min(tokens, rng.randint(6, 28))
            words = [word(pool) for _ in range(k)]
            words[0] = words[0].capitalize()
            out.append(" ".join(words) + rng.choice([".", ".", ".", "!", "?"]))
            tokens -= k
        return " ".join(out)

    triples = []
    for i in range(n):
        prompt = f"Question {i}: " + text(rng.randint(12, 30), [])
        pool = [w.strip(".!?").lower() for w in prompt.split()]
        triples.append((prompt, text(size, pool), text(size, pool)))
    return triples


_CLOCKS = {"cpu": time.thread_time_ns, "wall": time.perf_counter_ns}


def _timer(clock: str) -> Callable[[Callable[[], Any]], float]:
    now = _CLOCKS[clock]

    def timed(fn: Callable[[], Any]) -> float:
        start = now()
        fn()
        return (now() - start) / 1e6

    return timed


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(calls: int, sizes: list[int], seed: int, clock: str) -> list[dict[str, Any]]:
    """Time every variant; returns one row per (size, comparison)."""
    from rouge_score import rouge_scorer

    vrty: Any = importlib.import_module("vrty")  # the package, not this script

    from llm_connect.scoring.vrty import VrtyScorer, analyse
    from llm_connect.scoring.vrty._score import analyse_prompt

    def vrty_pair(prompt: str, baseline: str, candidate: str) -> tuple[Any, Any]:
        return vrty.score(prompt, baseline), vrty.score(prompt, candidate)

    timed = _timer(clock)
    cold = analyse_prompt.cache_clear  # every prompt is new to us: no cache hits
    scorer = VrtyScorer()
    rouge = rouge_scorer.RougeScorer(["rougeL"])
    vrty.score("warm", "up")
    analyse("warm", "up")
    rows: list[dict[str, Any]] = []
    for size in sizes:
        pairs = make_pairs(calls, size, seed)
        t: dict[str, list[float]] = {k: [] for k in ("ours", "scorer", "pair", "vrty", "vrty2", "rouge")}
        gc.collect()
        gc.disable()
        try:
            for p, b, c in pairs:
                t["vrty"].append(timed(partial(vrty.score, p, b)))
                cold()
                t["ours"].append(timed(partial(analyse, p, b)))
                t["vrty2"].append(timed(partial(vrty_pair, p, b, c)))
                cold()
                t["pair"].append(timed(partial(scorer.score_pair, b, c, prompt=p)))
                cold()
                t["scorer"].append(timed(partial(scorer.score, b, prompt=p)))
                t["rouge"].append(timed(partial(rouge.score, p, b)))
        finally:
            gc.enable()
        for p, b, c in pairs[:50]:  # the timed code computes vrty's numbers
            b_score, c_score = scorer.score_pair(b, c, prompt=p)
            assert b_score.value == vrty.score(p, b).composite
            assert c_score.value == vrty.score(p, c).composite
        tokens = sum(analyse(p, b).response_tokens for p, b, _ in pairs) / len(pairs)
        for label, ours, theirs, name in (
            ("analyse", "ours", "vrty", "vrty.score"),
            ("VrtyScorer.score", "scorer", "vrty", "vrty.score"),
            ("score_pair", "pair", "vrty2", "2 x vrty.score"),
            ("analyse", "ours", "rouge", "ROUGE-L (rouge-score)"),
        ):
            rows.append(
                {
                    "tokens": tokens,
                    "ours": label,
                    "baseline": name,
                    "ours_p50": _pct(t[ours], 0.5),
                    "ours_p99": _pct(t[ours], 0.99),
                    "base_p50": _pct(t[theirs], 0.5),
                    "base_p99": _pct(t[theirs], 0.99),
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per size (default 1000)")
    parser.add_argument("--sizes", default="100,500,2000", help="response sizes in tokens")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--clock",
        choices=sorted(_CLOCKS),
        default="cpu",
        help="cpu: this thread's CPU time (steady on a busy machine); wall: perf_counter",
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"# VRTY benchmark: Python {platform.python_version()}, {_cpu()}, {os.cpu_count()} CPUs, "
        f"{args.calls} calls per size, {args.clock} clock, prompt cache cold"
    )
    print()
    print(
        "| tokens | ours | baseline | ours p50 ms | ours p99 ms | baseline p50 ms | baseline p99 ms "
        "| speed-up p50 | speed-up p99 |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for r in run(args.calls, sizes, args.seed, args.clock):
        print(
            f"| {r['tokens']:.0f} | {r['ours']} | {r['baseline']} "
            f"| {r['ours_p50']:.3f} | {r['ours_p99']:.3f} "
            f"| {r['base_p50']:.3f} | {r['base_p99']:.3f} | {r['base_p50'] / r['ours_p50']:.2f}x "
            f"| {r['base_p99'] / r['ours_p99']:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
