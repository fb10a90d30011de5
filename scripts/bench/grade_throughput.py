"""Throughput of ``llm-connect grade`` against the loopback server, vs the ideal and a bare SDK script.

Usage: python scripts/bench/grade_throughput.py [--cases 1000] [--concurrency 64] [--delay-ms 100]
                                               [--repeat 3]

Starts ``python -m tests.fixtures.openai_server --delay-ms 100 --no-record`` (every answer
takes a fixed 100 ms), writes a suite of N cases, then measures, as whole processes
(interpreter start to exit), in alternating order within one run:

* ``llm-connect grade SUITE -b openai:base -c openai:cand --judge exact --concurrency C``
  on a fresh SQLite ledger (2N model calls, N grades, every response cached);
* a bare ``AsyncOpenAI`` script making the same 2N calls under an ``asyncio.Semaphore(C)``.

Prints medians and the ratios against the ideal ``2N x delay / C`` and against the
bare script. Target (issue 4): grade <= 1.25 x max(ideal, bare).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BARE = r"""
import asyncio, sys, time
import openai

async def main(url: str, n: int, concurrency: int) -> None:
    client = openai.AsyncOpenAI(base_url=url, api_key="sk-bench", max_retries=0)
    sem = asyncio.Semaphore(concurrency)

    async def one(model: str, i: int) -> str:
        async with sem:
            r = await client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": f"question {i}"}]
            )
            return r.choices[0].message.content or ""

    texts = await asyncio.gather(*(one(m, i) for i in range(n) for m in ("base", "cand")))
    assert len(texts) == 2 * n

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay-ms", type=float, default=100.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    server = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.openai_server", "--port", "0",
         "--delay-ms", str(args.delay_ms), "--no-record"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        work = Path(tempfile.mkdtemp(prefix="llmc-bench-"))
        suite = work / "suite.jsonl"
        suite.write_text(
            "".join(json.dumps({"id": f"c{i}", "prompt": f"question {i}", "task": "bench"}) + "\n"
                    for i in range(args.cases)),
            encoding="utf-8",
        )  # fmt: skip
        script = Path(sys.executable).with_name("llm-connect")
        cli = [str(script)] if script.exists() else [shutil.which("llm-connect") or "llm-connect"]
        bare_cmd = [sys.executable, "-c", BARE, url, str(args.cases), str(args.concurrency)]
        timed(bare_cmd, work)  # warm-up: page cache, .pyc, server threads
        grade_times, bare_times = [], []
        for rep in range(args.repeat):
            db = work / f"ledger-{rep}.db"
            grade_cmd = [
                *cli, "grade", str(suite), "-b", "openai:base", "-c", "openai:cand", "--judge", "exact",
                "--concurrency", str(args.concurrency), "--base-url", url, "--api-key", "sk-bench",
                "--db", f"sqlite:///{db}", "--json",
            ]  # fmt: skip
            grade_times.append(timed(grade_cmd, work))
            bare_times.append(timed(bare_cmd, work))
        shutil.rmtree(work, ignore_errors=True)
    finally:
        server.terminate()
        server.wait(timeout=10)

    calls = 2 * args.cases
    ideal = calls * args.delay_ms / 1000.0 / args.concurrency
    grade = statistics.median(grade_times)
    bare = statistics.median(bare_times)
    floor = max(ideal, bare)
    runs_bare = ", ".join(f"{t:.2f}" for t in bare_times)
    runs_grade = ", ".join(f"{t:.2f}" for t in grade_times)
    print(f"{calls} calls, concurrency {args.concurrency}, delay {args.delay_ms:g} ms, {args.repeat} runs")
    import os

    print(
        f"load average after the runs: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        f" on {os.cpu_count()} cores"
    )
    print(f"ideal (calls x delay / concurrency)  {ideal:7.2f} s")
    print(f"bare AsyncOpenAI script (process)    {bare:7.2f} s   runs: {runs_bare}")
    print(f"llm-connect grade (process)          {grade:7.2f} s   runs: {runs_grade}")
    print(
        f"grade / ideal = {grade / ideal:.2f}x   grade / bare = {grade / bare:.2f}x   "
        f"grade / max(ideal, bare) = {grade / floor:.2f}x (target <= 1.25x)"
    )


if __name__ == "__main__":
    main()
