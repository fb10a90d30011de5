"""Benchmark: ``llm-connect suite import`` on OTLP JSON vs plain ``json.loads`` of each line.

Generates an OTLP JSON file as a Collector's file exporter writes it: one
``resourceSpans`` export per line, ``--batch`` spans per export (the SDK's batch
processor sends up to 512), every span (or ``--chat-share`` of them, the rest
HTTP server spans) a GenAI chat span with its content on the attributes
(``gen_ai.input.messages``, ``gen_ai.output.messages``: a system prompt, one
to three user turns, the answer; distinct conversations, about one in ten a
duplicate), usage, settings and a few other attributes. The issue's goal: 50,000
spans/s or better on this machine, memory bounded independent of the file's size.

Timed per round, the sides taking turns on the same file:

* **import**: ``llm_connect.traffic.import_traffic`` (read, decode attributes, convert the
  messages, check each ``Conversation``, mask credentials, remove duplicates, write the
  suite) — what ``suite import`` does; with ``--sample N`` the reservoir keeps N cases;
* **baseline**: ``json.loads`` of every line and nothing else (the least any reader does);
* **orjson alone**: ``orjson.loads`` of every line with the cyclic GC off, as the import
  parses (its floor on this machine).

* **import, N workers** (``--workers N``, N > 1): the same import with ``workers=N``
  (worker processes read byte ranges of the file: with ``--sample`` they probe the chat
  spans, :mod:`llm_connect.traffic._parallel`; without, they build every case,
  :mod:`llm_connect.traffic._parallel_cases`), timed in the same round right after the
  sequential one; the suites and their ``.meta.json`` must be the same bytes (checked
  every round). Files under 256 MiB are read by
  one process whatever ``--workers`` says (``_parallel.PARALLEL_MIN_BYTES``): the
  script says so.

The ratio printed is import time / baseline time, per round, summarised by the median.
``--peak`` instead runs one import in a child process and prints its peak resident memory
(``ru_maxrss``; with workers also the largest worker's) next to the file's size; give a
large ``--spans`` for a large file.

    python scripts/bench/suite_import.py [--spans 200000] [--batch 200] [--rounds 3] [--sample N]
        [--workers N]
    python scripts/bench/suite_import.py --spans 2000000 --peak [--keep FILE] [--workers 2]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_connect.traffic import ImportOptions, import_traffic
from llm_connect.traffic._parallel import PARALLEL_MIN_BYTES

_TOPICS = ["refund", "delivery", "password", "invoice", "upgrade", "warranty", "address", "discount"]
_WORDS = [
    "the",
    "a",
    "my",
    "order",
    "please",
    "help",
    "when",
    "where",
    "how",
    "can",
    "you",
    "is",
    "it",
    "not",
    "yet",
    "arrived",
    "again",
    "account",
]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _attr(key: str, value: object) -> dict[str, object]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _span(rng: random.Random, i: int) -> dict[str, object]:
    k = i if rng.random() > 0.1 else rng.randrange(max(1, i))  # about one in ten repeats a conversation
    crng = random.Random(k)
    topic = crng.choice(_TOPICS)
    messages = [{"role": "system", "parts": [{"type": "text", "content": f"You are the {topic} assistant."}]}]
    for turn in range(crng.randint(1, 3)):
        if turn:
            messages.append({"role": "assistant", "parts": [{"type": "text", "content": _text(crng, 12)}]})
        messages.append({"role": "user", "parts": [{"type": "text", "content": f"#{k} {_text(crng, 20)}"}]})
    output = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": _text(crng, 30)}],
            "finish_reason": "stop",
        }
    ]
    start = 1_800_000_000_000_000_000 + i * 1_000_000
    attrs = [
        _attr("gen_ai.operation.name", "chat"),
        _attr("gen_ai.provider.name", "openai"),
        _attr("gen_ai.request.model", "gpt-4o-mini"),
        _attr("gen_ai.request.temperature", 0.2),
        _attr("gen_ai.request.max_tokens", 400),
        _attr("gen_ai.response.model", "gpt-4o-mini-2024-07-18"),
        _attr("gen_ai.response.id", f"chatcmpl-{i}"),
        _attr("gen_ai.usage.input_tokens", 40 + k % 200),
        _attr("gen_ai.usage.output_tokens", 30 + k % 90),
        _attr("server.address", "api.openai.com"),
        _attr("app.feature", topic),
        _attr("gen_ai.input.messages", json.dumps(messages, separators=(",", ":"))),
        _attr("gen_ai.output.messages", json.dumps(output, separators=(",", ":"))),
    ]
    return {
        "traceId": f"{rng.getrandbits(128):032x}",
        "spanId": f"{rng.getrandbits(64):016x}",
        "parentSpanId": "",
        "name": "chat gpt-4o-mini",
        "kind": 3,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + rng.randint(200, 4000) * 1_000_000),
        "attributes": attrs,
        "status": {},
    }


def _other_span(rng: random.Random, i: int) -> dict[str, object]:
    start = 1_800_000_000_000_000_000 + i * 1_000_000
    return {
        "traceId": f"{rng.getrandbits(128):032x}",
        "spanId": f"{rng.getrandbits(64):016x}",
        "parentSpanId": f"{rng.getrandbits(64):016x}",
        "name": "GET /api/orders/{id}",
        "kind": 2,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + rng.randint(1, 50) * 1_000_000),
        "attributes": [
            _attr("http.request.method", "GET"),
            _attr("http.route", "/api/orders/{id}"),
            _attr("http.response.status_code", 200),
            _attr("server.address", "shop.internal"),
            _attr("user_agent.original", "Mozilla/5.0"),
        ],
        "status": {},
    }


def generate(path: Path, spans: int, batch: int, seed: int = 0, chat_share: float = 1.0) -> int:
    """Write ``spans`` spans (``chat_share`` of them chat spans), ``batch`` per line; return the size."""
    rng = random.Random(seed)
    resource_attrs = [_attr("service.name", "support-bot"), _attr("telemetry.sdk.language", "python")]
    with path.open("w", encoding="utf-8") as fh:
        for first in range(0, spans, batch):
            items = [
                _span(rng, i) if rng.random() < chat_share else _other_span(rng, i)
                for i in range(first, min(spans, first + batch))
            ]
            export = {
                "resourceSpans": [
                    {
                        "resource": {"attributes": resource_attrs},
                        "scopeSpans": [
                            {"scope": {"name": "opentelemetry.instrumentation.openai_v2"}, "spans": items}
                        ],
                    }
                ]
            }
            fh.write(json.dumps(export, separators=(",", ":")) + "\n")
    return path.stat().st_size


def baseline(path: Path, loads: Callable[[bytes], Any] = json.loads) -> int:
    n = 0
    with path.open("rb") as fh:
        for raw in fh:
            obj = loads(raw)
            n += sum(len(s["spans"]) for r in obj["resourceSpans"] for s in r["scopeSpans"])
    return n


def floor(path: Path) -> float | None:
    """Seconds orjson takes to parse every line with the cyclic GC off (what the import starts from)."""
    try:
        import orjson
    except ImportError:
        return None
    was = gc.isenabled()
    gc.disable()
    try:
        t = time.perf_counter()
        baseline(path, orjson.loads)
        return time.perf_counter() - t
    finally:
        if was:
            gc.enable()


def peak(path: Path, sample: int | None, workers: int) -> None:
    """One import in this process (a child of the benchmark); print the peak RSS (and its workers')."""
    out = Path(tempfile.mkdtemp()) / "suite.jsonl"
    t = time.perf_counter()
    report = import_traffic([path], out, ImportOptions(sample=sample), workers=workers)
    elapsed = time.perf_counter() - t
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "file_mb": round(path.stat().st_size / 1e6, 1),
                "spans": report.spans,
                "written": report.written,
                "duplicates": report.duplicates,
                "seconds": round(elapsed, 1),
                "spans_per_s": round((report.spans or 0) / elapsed),
                "peak_rss_mb": round(rss_mb, 1),
                "workers": workers,
                "largest_worker_peak_rss_mb": round(workers_mb, 1) if workers > 1 else None,
                "load": round(os.getloadavg()[0], 1),
            }
        )
    )
    out.unlink()
    Path(report.meta).unlink()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument(
        "--chat-share", type=float, default=1.0, help="the share of spans that are chat spans"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sample", type=int, default=None)
    parser.add_argument(
        "--workers", type=int, default=1, help="also time (or --peak) the import with this many workers"
    )
    parser.add_argument("--peak", action="store_true", help="measure one import's peak memory instead")
    parser.add_argument("--keep", type=Path, default=None, help="generate into (or reuse) this file")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        peak(args.child, args.sample, args.workers)
        return
    path = args.keep or Path(tempfile.mkdtemp()) / "traces.jsonl"
    if not path.exists():
        t = time.perf_counter()
        size = generate(path, args.spans, args.batch, chat_share=args.chat_share)
        print(f"generated {args.spans:,} spans, {size / 1e6:.1f} MB in {time.perf_counter() - t:.1f} s")
    try:
        if args.peak:
            cmd = [sys.executable, __file__, "--child", str(path)]
            if args.sample is not None:
                cmd += ["--sample", str(args.sample)]
            cmd += ["--workers", str(args.workers)]
            subprocess.run(cmd, check=True)
            return
        out = path.with_name("suite.jsonl")
        if args.workers > 1 and path.stat().st_size < PARALLEL_MIN_BYTES:
            mib = PARALLEL_MIN_BYTES >> 20
            print(f"note: under {mib} MiB: the {args.workers} workers' import runs in one process")
        ratios: list[float] = []
        floors: list[float] = []
        speedups: list[float] = []
        for r in range(args.rounds):
            t = time.perf_counter()
            n = baseline(path)
            base = time.perf_counter() - t
            fast = floor(path)
            t = time.perf_counter()
            report = import_traffic([path], out, ImportOptions(sample=args.sample))
            imp = time.perf_counter() - t
            ratios.append(imp / base)
            if fast is not None:
                floors.append(imp / fast)
            parse = ""
            if fast:
                parse = f" | orjson alone (GC off) {n / fast:,.0f} spans/s, ratio {imp / fast:.2f}"
            print(
                f"round {r + 1}: import {n / imp:,.0f} spans/s ({imp:.2f} s, {report.written:,} cases, "
                f"{report.duplicates:,} duplicates) | baseline json.loads {n / base:,.0f} spans/s "
                f"({base:.2f} s) | ratio {imp / base:.2f}{parse} | load {os.getloadavg()[0]:.1f}"
            )
            if args.workers > 1:
                single, single_meta = out.read_bytes(), Path(report.meta).read_bytes()
                t = time.perf_counter()
                import_traffic([path], out, ImportOptions(sample=args.sample), workers=args.workers)
                par = time.perf_counter() - t
                assert out.read_bytes() == single, "the workers wrote another suite"
                assert Path(report.meta).read_bytes() == single_meta, "the workers wrote another sidecar"
                speedups.append(imp / par)
                print(
                    f"         {args.workers} workers: {n / par:,.0f} spans/s ({par:.2f} s, same suite) | "
                    f"ratio {par / base:.2f} | {imp / par:.2f}x one process | load {os.getloadavg()[0]:.1f}"
                )
        print(f"median ratio import/baseline: {statistics.median(ratios):.2f}")
        if speedups:
            print(f"median speed-up with {args.workers} workers: {statistics.median(speedups):.2f}x")
        if floors:
            print(f"median ratio import/orjson alone: {statistics.median(floors):.2f}")
    finally:
        if args.keep is None:
            for p in path.parent.iterdir():
                p.unlink()
            os.rmdir(path.parent)


if __name__ == "__main__":
    main()
