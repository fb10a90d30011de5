"""Wall time of a 20-run stability analysis against a 100 ms loopback server, vs its floor.

Usage: python scripts/bench/stability.py [--runs 20] [--delay-ms 100] [--rounds 5]

Starts a loopback OpenAI-compatible server in a child process (the tests' server,
every answer delayed ``--delay-ms``, each answer a different ~40-word text so the
embedder has 20 distinct texts to encode), loads the offline all-MiniLM-L6-v2 once,
makes one warm-up analysis (imports, HTTP clients, torch), then per round measures
in this process:

* ``analysis``: ``llm_connect.stability.analyze(adapter, query, runs=N)`` with the
  default concurrency (all N runs in flight), the calls, one batched embedding and
  the metrics;
* ``floor``: the slowest call of that same analysis (its ``latency_ms``) plus one
  batched ``embed`` of the same N response texts with the same embedder.

Prints each round and the median ratio analysis / floor. Target (issue 12): <= 1.5.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SERVER = r"""
import itertools, sys, threading
from tests.fixtures.openai_server import OpenAIServer

WORDS = ("order shipped parcel courier warehouse delivery address tracking refund invoice customer "
         "support weekday morning evening region carrier label package status update").split()
counter = itertools.count()
lock = threading.Lock()

def reply(body):
    with lock:
        n = next(counter)
    words = [WORDS[(n * 7 + i * (n % 5 + 1)) % len(WORDS)] for i in range(36)]
    return f"Answer {n}: your order 42 " + " ".join(words) + "."

server = OpenAIServer(record=False)
server.responder = reply
server.delay_s = float(sys.argv[1]) / 1000.0
print(server.base_url, flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    pass
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--delay-ms", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from llm_connect.adapters import OpenAIAdapter, SentenceTransformerEmbeddingAdapter
    from llm_connect.stability import analyze
    from llm_connect.types import RunConfig

    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(args.delay_ms)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        embedder = SentenceTransformerEmbeddingAdapter()
        embedder.load()
        adapter = OpenAIAdapter("bench-model", base_url=url)
        run_config = RunConfig(temperature=0.0)
        query = "Where is my order 42?"
        analyze(adapter, query, runs=args.runs, run_config=run_config, embedder=embedder)  # warm-up

        ratios = []
        print(f"runs={args.runs} delay={args.delay_ms:.0f} ms server={url}")
        print(f"{'round':>5} {'analysis':>10} {'slowest call':>13} {'embed':>8} {'floor':>8} {'ratio':>6}")
        for i in range(args.rounds):
            start = time.perf_counter()
            report = analyze(adapter, query, runs=args.runs, run_config=run_config, embedder=embedder)
            analysis = time.perf_counter() - start
            assert report.runs_succeeded == args.runs
            texts = [r.text for r in report.runs]
            assert len(set(texts)) == args.runs, "the server should answer distinct texts"
            slowest = max(r.response.latency_ms or 0.0 for r in report.runs if r.response) / 1000.0
            start = time.perf_counter()
            embedder.embed(texts)
            embed = time.perf_counter() - start
            floor = slowest + embed
            ratios.append(analysis / floor)
            print(
                f"{i + 1:>5} {analysis * 1000:>8.1f}ms {slowest * 1000:>11.1f}ms {embed * 1000:>6.1f}ms "
                f"{floor * 1000:>6.1f}ms {ratios[-1]:>6.2f}"
            )
        median = statistics.median(ratios)
        print(f"median ratio analysis / (slowest call + one batched embedding): {median:.2f} (target <= 1.5)")
        if median > 1.5:
            raise SystemExit(1)
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
