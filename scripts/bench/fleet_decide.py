"""Benchmark: ``Router.decide`` on a 1,000,000-grade PostgreSQL ledger while a fleet writes to it.

The ledger is filled like ``routing_decide.py`` (100 tasks x 5 candidates x 2
graders, 1,000,000 grades), then ``--workers`` real CLI workers (``grade
--shared``, ``--concurrency`` each, a 100 ms loopback server) grade a shared run
of ``--cases`` cases into the same schema. While they write, this process asks
``Router.decide`` in a loop and times each call; the same calls are timed with no
fleet running, before it starts (the baseline of the ratio).

Three kinds of call, alternating:

* ``fleet task``: one Router deciding the task the fleet is grading: while the fleet
  writes, its groups change between calls (new grades, up to ``--cases`` cases), so
  each call reads and recomputes the changed group, as routing code asking after
  every batch does (with no fleet running its groups do not change: the quiet figure
  is the kept evidence);
* ``filled task, one Router``: a task of the filled ledger, evidence kept in the
  Router (its groups do not change);
* ``filled task, new Router``: the same on a new Router per call (a new process),
  evidence read from what earlier decisions stored.

Target (issue 14): decide median < 5 ms at 1,000,000 grades while the fleet writes.

    LLM_CONNECT_TEST_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test \\
        python scripts/bench/fleet_decide.py [--rows 1000000] [--cases 2400] [--workers 4] [--concurrency 16]
            [--pin]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _pg import pg_schema
from fleet import ROOT, server, worker_args
from routing_decide import CANDIDATES, GRADERS, TASKS, fill_postgres

from llm_connect.ledger import QualityLedger
from llm_connect.routing import Router

FLEET_TASK = "fleet"


def _workers(suite: Path, url: str, base_url: str, run_id: str, workers: int, concurrency: int) -> list[Any]:
    args = worker_args(suite, url, base_url, run_id, concurrency)
    procs = [
        subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(workers)
    ]
    for proc in procs:
        _pin(proc.pid, FLEET_CPUS)
    return procs


FLEET_CPUS: set[int] = set()
"""``--pin``: the CPUs the workers and the model server run on (the other hosts of a fleet)."""


def _pin(pid: int, cpus: set[int]) -> None:
    if cpus:
        os.sched_setaffinity(pid, cpus)


def _calls(ledger: QualityLedger) -> dict[str, Callable[[], Any]]:
    rng = random.Random(5)
    fleet_router, filled_router = Router(ledger), Router(ledger)
    for task in TASKS:  # every filled task decided once: their evidence is stored and kept
        filled_router.decide(task, baseline="gpt-4o", candidates=CANDIDATES, grader_id=GRADERS)

    def fleet() -> Any:
        return fleet_router.decide(FLEET_TASK, baseline="big", candidates=["small"], grader_id="exact")

    def filled() -> Any:
        return filled_router.decide(
            rng.choice(TASKS), baseline="gpt-4o", candidates=CANDIDATES, grader_id=GRADERS
        )

    def filled_new() -> Any:
        return Router(ledger).decide(
            rng.choice(TASKS), baseline="gpt-4o", candidates=CANDIDATES, grader_id=GRADERS
        )

    return {"fleet task": fleet, "filled task, one Router": filled, "filled task, new Router": filled_new}


def _time(
    calls: dict[str, Callable[[], Any]], until: Callable[[], bool], limit: int
) -> dict[str, list[float]]:
    """Call each kind in turn until ``until()`` or ``limit`` rounds; ms per call."""
    out: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(limit):
        if until():
            break
        for name, fn in calls.items():
            start = time.perf_counter()
            fn()
            out[name].append((time.perf_counter() - start) * 1000)
        time.sleep(0.02)  # routing code asks between batches, not in a busy loop
    return out


def _line(name: str, samples: list[float]) -> str:
    if not samples:
        return f"{name}: no calls"
    ordered = sorted(samples)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return f"{statistics.median(ordered):6.2f} ms median, p95 {p95:6.2f} ms ({len(ordered)} calls)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--cases", type=int, default=2400)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--delay-ms", type=int, default=100)
    parser.add_argument("--quiet-calls", type=int, default=150, help="rounds timed with no fleet running")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="workers and model server on the last CPU, this process on the others (PostgreSQL "
        "unpinned): the fleet's own CPU work stands apart from routing's, as on separate hosts",
    )
    args = parser.parse_args()
    if args.pin:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise SystemExit("--pin needs at least 2 CPUs")
        FLEET_CPUS.add(cpus[-1])
        os.sched_setaffinity(0, set(cpus[:-1]))
    base = os.environ.get(
        "LLM_CONNECT_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    url, drop = pg_schema(base)
    proc, base_url = server(args.delay_ms)
    _pin(proc.pid, FLEET_CPUS)
    try:
        start = time.perf_counter()
        fill_postgres(url, args.rows, 5)
        print(f"filled {args.rows:,} grades in {time.perf_counter() - start:.1f} s")
        with tempfile.TemporaryDirectory() as tmp, QualityLedger(url) as ledger:
            suite = Path(tmp) / "suite.jsonl"
            suite.write_text(
                "".join(
                    json.dumps({"id": f"c{i}", "task": FLEET_TASK, "prompt": f"question {i}"}) + "\n"
                    for i in range(args.cases)
                )
            )
            # A first small shared run gives the fleet task grades, so "fleet task" reads case rows
            # in the quiet rounds too.
            warm = Path(tmp) / "warm.jsonl"
            warm.write_text(
                "".join(
                    json.dumps({"id": f"warm-{i}", "task": FLEET_TASK, "prompt": f"warm-up {i}"}) + "\n"
                    for i in range(100)
                )
            )
            for p in _workers(warm, url, base_url, "warm-up", 1, args.concurrency):
                _, err = p.communicate(timeout=600)
                if p.returncode != 0:
                    raise SystemExit(f"warm-up worker failed: {err[-2000:]}")
            calls = _calls(ledger)
            quiet = _time(calls, lambda: False, args.quiet_calls)
            before = ledger.count()
            procs = _workers(suite, url, base_url, "fleet-run", args.workers, args.concurrency)
            fleet_start = time.perf_counter()
            busy = _time(calls, lambda: all(p.poll() is not None for p in procs), 100_000)
            for p in procs:
                _, err = p.communicate(timeout=600)
                if p.returncode != 0:
                    raise SystemExit(f"worker failed ({p.returncode}): {err[-2000:]}")
            elapsed = time.perf_counter() - fleet_start
            written = ledger.count() - before
    finally:
        proc.terminate()
        drop()
    where = f"; fleet pinned to CPU {sorted(FLEET_CPUS)}, this process to the rest" if FLEET_CPUS else ""
    print(
        f"fleet: {args.workers} workers x concurrency {args.concurrency}{where}, {written:,} grades "
        f"written in {elapsed:.1f} s ({written / elapsed:.0f} grades/s) into a ledger of {args.rows:,}"
    )
    for name in quiet:
        q, b = quiet[name], busy[name]
        ratio = statistics.median(b) / statistics.median(q) if q and b else float("nan")
        print(f"  {name:26s} no fleet: {_line(name, q)}")
        print(f"  {'':26s} fleet writing: {_line(name, b)}; ratio {ratio:.2f}x")
    print("target: median < 5 ms while the fleet writes")


if __name__ == "__main__":
    main()
