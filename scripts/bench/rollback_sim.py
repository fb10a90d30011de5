"""Simulation: the watch after the switch (issue 38) rolls back a candidate that got worse, and
seldom one that did not.

Through the real ``Router`` and ledger (``--router-runs`` runs, each on a fresh in-memory SQLite
ledger): a candidate whose per-case grades are pass/fail with mean 0.95 (``min_quality`` 0.9)
is graded in batches of ``--batch`` cases, the Router asked after each; once routed it goes on
at 0.95 for ``--before`` more cases, then drops to 0.80 (``drop``) or stays (``stable``, for
``--stable-cases`` cases). A rollback is the Router's own (``decision.rollback``).

The same streams through the detector alone (``routing._rollback.advance``, the function the
Router calls) for ``--runs`` runs each: the figures the issue asks for at 1,000 runs.

    python scripts/bench/rollback_sim.py [--runs 1000] [--router-runs 100] [--seed 2026]
    python scripts/bench/rollback_sim.py --router-runs 1000 --only drop     # two processes, one core each
    python scripts/bench/rollback_sim.py --router-runs 1000 --only stable
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger
from llm_connect.routing import Router
from llm_connect.routing._rollback import ROLLBACK_ARL, DetectorState, advance
from llm_connect.types import LLMResponse

M, GOOD, BAD = 0.9, 0.95, 0.80


def _grade(i: int, score: float) -> GradingResult:
    return GradingResult(
        score, "sim", "exact", LLMResponse("b", "base", "openai"), LLMResponse("c", "cand", "openai"),
        prompt=f"case {i}",
    )  # fmt: skip


def router_run(rng: random.Random, drop: bool, before: int, after: int, batch: int) -> dict[str, object]:
    """One history through the Router: cases to be routed, whether and when it rolled back."""
    with QualityLedger("sqlite://") as ledger:
        router = Router(ledger)
        n = 0

        def grade(k: int, p: float) -> None:
            nonlocal n
            ledger.record_many([_grade(n + i, float(rng.random() < p)) for i in range(k)], task="t")
            n += k

        def decide() -> object:
            return router.decide("t", baseline="base", candidates=["cand"], grader_id="exact", min_quality=M)

        while decide().model != "cand":  # type: ignore[attr-defined]
            grade(batch, GOOD)
            if n > 5_000:
                return {"routed_at": None}
        routed_at = n
        for p, k in ((GOOD, before), (BAD if drop else GOOD, after)):
            for _ in range(0, k, batch):
                grade(batch, p)
                d = decide()
                if d.rollback is not None:  # type: ignore[attr-defined]
                    since = d.rollback.cases  # type: ignore[attr-defined]
                    return {"routed_at": routed_at, "rolled": True, "delay": since - before, "case": since}
        return {"routed_at": routed_at, "rolled": False}


def detector_run(rng: random.Random, drop: bool, before: int, after: int) -> int | None:
    """One stream through the detector alone: the case (after the change) it fired at, or None."""
    state = advance(DetectorState(M, ROLLBACK_ARL), [float(rng.random() < GOOD) for _ in range(before)])
    if state.fired_at is not None:
        return state.fired_at - before
    p = BAD if drop else GOOD
    state = advance(state, [float(rng.random() < p) for _ in range(after)])
    return None if state.fired_at is None else state.fired_at - before


def _summary(name: str, delays: list[int | None], runs: int) -> None:
    fired = [d for d in delays if d is not None]
    early = sum(1 for d in fired if d <= 0)
    line = f"  {name}: rolled back in {len(fired)}/{runs} ({len(fired) / runs:.1%})"
    if fired:
        late = sorted(d for d in fired if d > 0)
        if late:
            q = statistics.quantiles(late, n=20) if len(late) > 1 else [late[0]] * 19
            line += f"; delay after the drop: median {statistics.median(late):.0f} cases, p95 {q[18]:.0f}"
        line += f"; before the drop: {early}"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="histories through the detector alone")
    parser.add_argument(
        "--router-runs", type=int, default=100, help="histories through the Router and ledger"
    )
    parser.add_argument("--before", type=int, default=2000, help="cases at 0.95 after routing, before a drop")
    parser.add_argument("--after", type=int, default=1000, help="cases at 0.80 after the drop (at most)")
    parser.add_argument(
        "--stable-cases", type=int, default=20_000, help="cases at 0.95 after routing (stable)"
    )
    parser.add_argument("--batch", type=int, default=25, help="cases between two decisions (Router runs)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--only", choices=["drop", "stable"], help="through the Router: only these histories (two processes)"
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"min_quality {M}, before {GOOD}, after a drop {BAD}, rollback_arl {ROLLBACK_ARL:,}")

    t0 = time.perf_counter()
    if args.only is None:
        print(f"the detector alone ({args.runs} runs each):")
        drops_d = [detector_run(rng, True, args.before, args.after) for _ in range(args.runs)]
        _summary("drop", drops_d, args.runs)
        stable = [detector_run(rng, False, args.stable_cases, 0) for _ in range(args.runs)]
        print(f"  stable: a false rollback within {args.stable_cases:,} cases in "
              f"{sum(d is not None for d in stable)}/{args.runs}")  # fmt: skip
        print(f"  ({time.perf_counter() - t0:.1f} s)")
    else:
        rng = random.Random(f"{args.seed}-{args.only}")  # each process its own histories

    t0 = time.perf_counter()
    print(
        f"through the Router and ledger ({args.router_runs} runs each, a decision every {args.batch} cases):"
    )
    if args.only in (None, "drop"):
        drops = [router_run(rng, True, args.before, args.after, args.batch) for _ in range(args.router_runs)]
        routed = [r["routed_at"] for r in drops if r["routed_at"] is not None]
        print(f"  routed after a median of {statistics.median(routed):.0f} cases ({len(routed)} routed)")
        delays = [r.get("delay") if r.get("rolled") else None for r in drops]
        _summary("drop", delays, args.router_runs)  # type: ignore[arg-type]
    if args.only in (None, "stable"):
        stable_r = [router_run(rng, False, args.stable_cases, 0, 100) for _ in range(args.router_runs)]
        false = sum(bool(r.get("rolled")) for r in stable_r)
        print(f"  stable: a false rollback within {args.stable_cases:,} cases in {false}/{args.router_runs}")
    print(f"  ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
