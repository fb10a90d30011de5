"""Simulation: per-slice routing with e-BH (issue 38), through the real Router and ledger.

Every run grades one task of 20 slices (tag ``s:NAME``), one candidate, one judge, values drawn
from Beta distributions with the slice's true mean (concentration 10, as ``decisions_sim.py``),
the slices' cases interleaved in a seeded random order, all written with ``record_batch`` into
one SQLite ledger and decided by ``Router.decide_slices(slice_by="tag:s")`` at min_quality 0.9,
confidence 0.95.

* **null**: every slice 0.02 below min_quality (0.88). Decided after every 50 cases per slice up to
  150, and stopped at the first look that routes a slice (a stopping time: the e-values at it
  are still e-values). Every routed slice is a wrong route, so the FDR is the share of runs that
  route any slice.
* **power**: 10 slices 0.05 above (0.95), 10 at 0.88, decided once after 150 cases per slice.
  The share of the good slices routed, against per-slice Bonferroni: each slice's own evidence
  (``routing._evidence.assess_many``, the Router's verdict: running maximum of the capital) at
  ``alpha / 20``; and the FDR of e-BH.
* **timing**: ``decide_slices`` on a task of 20 slices x 200 cases, a new Router per call (it
  reads every case row), median of ``--calls``, against ``Router.decide`` on the same task.

    python scripts/bench/slices_sim.py [--runs 1000] [--power-runs 1000] [--calls 20] [--seed 38]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from llm_connect.grading import GradingResult
from llm_connect.ledger import CaseSeries, QualityLedger, RecordItem
from llm_connect.routing import Router
from llm_connect.routing._evidence import assess_many
from llm_connect.types import LLMResponse

K, Q, ALPHA, CONC = 20, 0.9, 0.05, 10.0
NAMES = [f"s{k:02d}" for k in range(K)]
_RESP = {
    side: LLMResponse(text="x", model=model, provider="openai", latency_ms=1.0, cost_usd=cost)
    for side, model, cost in (("b", "base", 0.01), ("c", "mini", 0.001))
}


def _items(task: str, run_id: str, means: list[float], n: int, start: int, rng: Any) -> tuple[list[Any], Any]:
    """``n`` new cases per slice (case numbers from ``start``), interleaved at random; and the
    values per slice in arrival order."""
    values = np.stack([rng.beta(CONC * m, CONC * (1 - m), size=n) for m in means])
    order = rng.permutation(K * n)
    items = []
    for pos in order:
        k, i = divmod(int(pos), n)
        result = GradingResult(
            quality_score=float(values[k, i]),
            notes="",
            grader_id="sim",
            baseline_response=_RESP["b"],
            candidate_response=_RESP["c"],
            prompt=f"{task} {NAMES[k]} {start + i}",
        )
        items.append(RecordItem(result, task, run_id, f"{NAMES[k]}-{start + i}", (f"s:{NAMES[k]}",)))
    # arrival order within each slice: the order its cases appear in ``order``
    per_slice: list[list[float]] = [[] for _ in range(K)]
    for pos in order:
        k, i = divmod(int(pos), n)
        per_slice[k].append(float(values[k, i]))
    return items, per_slice


def _series(task: str, values: list[float]) -> CaseSeries:
    """One slice's values as the case series the Router's verdict reads (one grade per case)."""
    n = len(values)
    return CaseSeries(task, "base", "sim", "mini", (1,) * n, tuple(values), (0,) * n, (0.0,) * n)


def _decide(router: Router, task: str) -> Any:
    return router.decide_slices(task, baseline="base", candidates=["mini"], slice_by="tag:s", grader_id="sim")


def null_runs(ledger: QualityLedger, runs: int, seed: int) -> dict[str, Any]:
    router = Router(ledger)
    routed_counts, any_route, looks_used = [], 0, []
    for run in range(runs):
        rng = np.random.default_rng([seed, 1, run])
        task = f"null-{run}"
        routed = 0
        for look in range(3):
            items, _ = _items(task, f"{task}-{look}", [Q - 0.02] * K, 50, 50 * look, rng)
            ledger.record_batch(items)
            sliced = _decide(router, task)
            routed = sum(s.routed for s in sliced.slices)
            if routed:
                break
        looks_used.append(look + 1)
        routed_counts.append(routed)
        any_route += routed > 0
    return {
        "runs": runs,
        "mean_routed_slices": statistics.fmean(routed_counts),
        "max_routed_slices": max(routed_counts),
        "fdr": any_route / runs,
    }


def power_runs(ledger: QualityLedger, runs: int, seed: int) -> dict[str, Any]:
    router = Router(ledger)
    means = [0.95] * 10 + [Q - 0.02] * 10
    good_ebh = good_bonf = 0
    fdps = []
    for run in range(runs):
        rng = np.random.default_rng([seed, 2, run])
        task = f"power-{run}"
        items, per_slice = _items(task, task, means, 150, 0, rng)
        ledger.record_batch(items)
        sliced = _decide(router, task)
        routed = {s.name for s in sliced.slices if s.routed}
        wrong = routed & set(NAMES[10:])
        fdps.append(len(wrong) / max(1, len(routed)))
        good_ebh += len(routed - wrong)
        series = [
            (
                CaseSeries(
                    task, "base", "sim", "mini", (1,) * len(v), tuple(v), (0,) * len(v), (0.0,) * len(v)
                ),
                "sim",
            )
            for v in per_slice[:10]
        ]
        verdicts = assess_many(series, min_quality=Q, min_samples=30, alpha=ALPHA / K, confidence=1 - ALPHA)
        good_bonf += sum(v.status == "proven" for v in verdicts)
    return {
        "runs": runs,
        "share_routed_ebh": good_ebh / (10 * runs),
        "share_routed_bonferroni": good_bonf / (10 * runs),
        "fdr_ebh": statistics.fmean(fdps),
    }


def timing(ledger: QualityLedger, calls: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng([seed, 3])
    items, _ = _items("timing", "timing", [0.95] * K, 200, 0, rng)
    ledger.record_batch(items)
    sliced_ms, whole_ms = [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        _decide(Router(ledger), "timing")
        sliced_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        Router(ledger).decide("timing", baseline="base", candidates=["mini"], grader_id="sim")
        whole_ms.append((time.perf_counter() - t0) * 1000)
    s, w = statistics.median(sliced_ms), statistics.median(whole_ms)
    return {"decide_slices_ms": s, "decide_ms": w, "ratio": s / w}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--power-runs", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--seed", type=int, default=38)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ledger = QualityLedger(f"sqlite:///{Path(tmp) / 'sim.db'}")
        started = time.perf_counter()
        t = timing(ledger, args.calls, args.seed)
        print(
            f"timing (20 slices x 200 cases, new Router per call, median of {args.calls}): "
            f"decide_slices {t['decide_slices_ms']:.1f} ms, decide {t['decide_ms']:.1f} ms "
            f"({t['ratio']:.2f}x)",
            flush=True,
        )
        if args.runs:
            null = null_runs(ledger, args.runs, args.seed)
            print(
                f"null ({null['runs']} runs, 20 slices at 0.88, looks at 50/100/150 cases per slice, "
                f"stopped at the first route): routed slices per run mean {null['mean_routed_slices']:.4f}, "
                f"max {null['max_routed_slices']}, FDR {null['fdr']:.4f} (nominal {ALPHA})",
                flush=True,
            )
        if args.power_runs:
            power = power_runs(ledger, args.power_runs, args.seed)
            print(
                f"power ({power['runs']} runs, 10 of 20 slices at 0.95, 10 at 0.88, 150 cases each): "
                f"good slices routed e-BH {power['share_routed_ebh']:.3f}, per-slice Bonferroni "
                f"{power['share_routed_bonferroni']:.3f}; e-BH FDR {power['fdr_ebh']:.4f}",
                flush=True,
            )
        print(f"total {time.perf_counter() - started:.0f} s")
        ledger.close()


if __name__ == "__main__":
    main()
