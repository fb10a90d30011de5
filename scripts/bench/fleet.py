"""Benchmark: a shared run graded by 1 worker and by 4, against a 100 ms loopback server.

Each worker is the real CLI (``llm-connect grade --shared``) in its own process,
``--concurrency 16``, on one PostgreSQL ledger (a throwaway schema). Throughput is
cases per second between the first and the last grade written (so process start-up,
the same for every worker, is not counted); the target is 4 workers >= 3.5x one.

Then the coordination cost per case, in the same process: one case claimed,
recorded with its lease check and marked done (``claim_cases`` + ``record_outcomes(...,
worker_id=...)``) against the same grade recorded without coordination.

    LLM_CONNECT_TEST_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test \\
        python scripts/bench/fleet.py [--cases 4800] [--workers 4] [--concurrency 16] [--delay-ms 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _pg import pg_schema
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parents[2]


def server(delay_ms: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fixtures.openai_server",
            "--port",
            "0",
            "--delay-ms",
            str(delay_ms),
            "--no-record",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def worker_args(suite: Path, url: str, base_url: str, run_id: str, concurrency: int) -> list[str]:
    """The command line of one shared-run worker (the real CLI) grading ``suite``."""
    return [
        sys.executable, "-m", "llm_connect", "grade", str(suite), "--shared", "--run-id", run_id,
        "--db", url, "-b", "openai:big", "-c", "openai:small", "--base-url", base_url, "-j", "exact",
        "--api-key", "sk-bench", "--concurrency", str(concurrency), "--no-cache", "--json",
    ]  # fmt: skip


def run_fleet(suite: Path, url: str, base_url: str, run_id: str, workers: int, concurrency: int) -> float:
    """Cases per second of ``workers`` processes grading ``suite`` as one shared run."""
    args = worker_args(suite, url, base_url, run_id, concurrency)
    procs = [
        subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(workers)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"worker failed ({proc.returncode}): {err[-2000:]}")
    engine = create_engine(url)
    with engine.connect() as conn:
        first, last, n = conn.execute(
            text("SELECT MIN(created_at), MAX(created_at), COUNT(*) FROM grades WHERE run_id = :r"),
            {"r": run_id},
        ).one()
    engine.dispose()
    return float(n) / max(1e-9, (last - first).total_seconds())


def coordination_cost(url: str, rounds: int = 300) -> tuple[float, float]:
    """Median ms per case: claim + record with the lease check, and a plain record."""
    from llm_connect.grading import GradingResult
    from llm_connect.ledger import QualityLedger, RecordItem
    from llm_connect.types import LLMResponse

    ledger = QualityLedger(url)
    ledger.register_run_cases("cost", [(f"c{i}", "t", "d") for i in range(rounds)], suite_digest="s")
    ledger.register_worker("cost", "w", host="bench", pid=os.getpid())
    ledger.start_run("plain")
    resp = LLMResponse("a", "m", "openai")
    shared, plain = [], []
    for i in range(rounds):
        result = GradingResult(1.0, "n", "exact", resp, resp, prompt=f"q{i}")
        start = time.perf_counter()
        (case,) = ledger.claim_cases("cost", "w", limit=1, lease_s=60)
        ledger.record_outcomes("cost", records=[RecordItem(result, "t", "cost", case)], worker_id="w")
        shared.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        ledger.record_outcomes("plain", records=[RecordItem(result, "t", "plain", f"c{i}")])
        plain.append((time.perf_counter() - start) * 1000)
    ledger.close()
    return statistics.median(shared), statistics.median(plain)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # 4,800: at 1,200 the other workers' start-up (about 1.2 s of CPU each, on 2 cores) overlaps
    # a large share of the first worker's grading.
    parser.add_argument("--cases", type=int, default=4800)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--delay-ms", type=int, default=100)
    args = parser.parse_args()
    base = os.environ.get(
        "LLM_CONNECT_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    url, drop = pg_schema(base)
    proc, base_url = server(args.delay_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            suite = Path(tmp) / "suite.jsonl"
            suite.write_text(
                "".join(
                    json.dumps({"id": f"c{i}", "prompt": f"question {i}"}) + "\n" for i in range(args.cases)
                )
            )
            one = run_fleet(suite, url, base_url, "one", 1, args.concurrency)
            many = run_fleet(suite, url, base_url, "many", args.workers, args.concurrency)
        shared_ms, plain_ms = coordination_cost(url)
    finally:
        proc.terminate()
        drop()
    ideal = 1000.0 / args.delay_ms * args.concurrency
    print(
        f"cases={args.cases} concurrency={args.concurrency} server delay={args.delay_ms} ms "
        f"(ideal {ideal:.0f}/s per worker)"
    )
    print(f"1 worker:  {one:7.1f} cases/s")
    print(f"{args.workers} workers: {many:7.1f} cases/s  ratio {many / one:.2f}x (target >= 3.5x)")
    print(f"per case: claim + record with lease check {shared_ms:.2f} ms, plain record {plain_ms:.2f} ms, "
          f"coordination {shared_ms - plain_ms:.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
