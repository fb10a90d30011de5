"""Does ``llm-connect watch`` keep up with 200 sampled calls a minute while the judge answers in 1 s?

Usage: python scripts/bench/watch_throughput.py [--rate 240] [--seconds 60] [--backlog 200]
                                                [--concurrency 8] [--judge-delay 1.0]

Runs the tests' loopback OpenAI-compatible server in this process, answering the candidate at
once and the LLM judge (``llm:openai:judge``) after ``--judge-delay`` seconds, and one
``python -m llm_connect watch`` process (SQLite ledger, ``--sample-rate 1``, the default
``--concurrency 8``) following an OpenAI-style log file. Two measurements:

* **stream**: a writer appends ``--rate`` calls a minute for ``--seconds``; the watch keeps up
  when every call is graded shortly after the last one is written. Printed: the rate written,
  the rate graded (calls / time from the first line written to the last grade stored) and the
  lag after the last line.
* **backlog**: ``--backlog`` calls already in the file when the watch starts: the most it can
  grade a minute (calls / time from the first grade to the last), its ceiling on this machine.

Each graded call is one candidate call and one judge call (the baseline's answer is the
production one recorded in the log). Target (issue 38): the stream graded at >= 200 a minute
with a lag of a few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fixtures.openai_server import OpenAIServer  # noqa: E402 - the repository's own fixture


def line(i: int) -> str:
    return (
        json.dumps(
            {
                "id": f"req-{i}",
                "request": {"model": "big", "messages": [{"role": "user", "content": f"question {i}"}]},
                "response": {
                    "model": "big",
                    "choices": [{"message": {"role": "assistant", "content": f"a {i}"}}],
                },
                "metadata": {"task": "support"},
            }
        )
        + "\n"
    )


def responder(delay: float) -> Any:
    def respond(body: dict[str, Any]) -> str | dict[str, Any]:
        if body.get("model") == "judge":
            time.sleep(delay)
            return {"quality_score": 0.95, "notes": "loopback judge"}
        return "echo: " + str((body.get("messages") or [{}])[-1].get("content"))

    return respond


def graded(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM grades").fetchone()[0])
    except sqlite3.OperationalError:
        return 0  # not migrated yet


def start_watch(log: Path, db: Path, url: str, concurrency: int) -> subprocess.Popen[str]:
    cmd = [
        sys.executable, "-m", "llm_connect", "watch", str(log), "-b", "openai:big", "-c", "openai:small",
        "-j", "llm:openai:judge", "--allow-uncalibrated", "--task-from", "task", "--sample-rate", "1",
        "--concurrency", str(concurrency), "--poll", "0.5", "--db", f"sqlite:///{db}", "--base-url", url,
        "--api-key", "sk-bench", "--name", "bench",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(cmd, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for(db: Path, n: int, proc: subprocess.Popen[str], timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while graded(db) < n:
        if proc.poll() is not None:
            raise SystemExit(f"the watch ended ({proc.returncode}): {proc.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"only {graded(db)} of {n} graded after {timeout:.0f} s")
        time.sleep(0.05)
    return time.monotonic()


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.communicate(timeout=60)


def stream(work: Path, url: str, rate: float, seconds: float, concurrency: int) -> None:
    log, db = work / "stream.jsonl", work / "stream.db"
    log.touch()
    proc = start_watch(log, db, url, concurrency)
    time.sleep(3.0)  # let it start (imports, migration) before the traffic begins
    n = int(rate * seconds / 60.0)
    first = time.monotonic()

    def write() -> None:
        with log.open("a", encoding="utf-8") as fh:
            for i in range(n):
                due = first + i * 60.0 / rate
                time.sleep(max(0.0, due - time.monotonic()))
                fh.write(line(i))
                fh.flush()

    writer = threading.Thread(target=write)
    writer.start()
    writer.join()
    written = time.monotonic()
    done = wait_for(db, n, proc, timeout=seconds + 120)
    stop(proc)
    print(
        f"stream:  {n} calls written at {n / (written - first) * 60:.0f}/min over {written - first:.0f} s; "
        f"graded at {n / (done - first) * 60:.0f}/min; lag after the last line {done - written:.1f} s"
    )


def backlog(work: Path, url: str, n: int, concurrency: int) -> None:
    log, db = work / "backlog.jsonl", work / "backlog.db"
    log.write_text("".join(line(i) for i in range(n)), encoding="utf-8")
    proc = start_watch(log, db, url, concurrency)
    start = wait_for(db, 1, proc, timeout=120)
    done = wait_for(db, n, proc, timeout=600)
    stop(proc)
    print(f"backlog: {n} calls graded at {(n - 1) / (done - start) * 60:.0f}/min (concurrency {concurrency})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=240.0, help="sampled calls written a minute")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--backlog", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--judge-delay", type=float, default=1.0)
    args = parser.parse_args()
    server = OpenAIServer(record=False).start()
    server.responder = responder(args.judge_delay)
    print(
        f"judge delay {args.judge_delay:.1f} s, watch --concurrency {args.concurrency}, "
        f"{os.cpu_count()} CPU(s)"
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stream(Path(tmp), server.base_url, args.rate, args.seconds, args.concurrency)
            if args.backlog:
                backlog(Path(tmp), server.base_url, args.backlog, args.concurrency)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
