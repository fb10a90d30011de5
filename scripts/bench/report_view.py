"""Benchmark: ``llm-connect view`` over a ledger of 1,000,000 grades (page + first page of cases).

The ledger holds 4 tasks x 3 candidates x 2 judges x ~41,667 grades (one
baseline; each group's grades are ~8,333 cases graded in 5 runs, so routing and
the distributions read ~200,000 per-case rows in all), bulk-filled with raw
inserts (sqlite3 ``executemany`` / PostgreSQL ``COPY``) into a migrated schema
with the grades' indexes dropped during the fill, then ``rebuild_stats()``
(the running totals every ledger write otherwise keeps current) - the same idea
as ``routing_decide.py``, written out here.

Timed against a server started with ``serve(ledger, port=0)`` in this process:

* ``GET /`` cold (first render: matplotlib's import, the evidence of every group
  from ``case_stats``, the charts) and again (cached while the totals are unchanged);
* ``GET /api/cases`` as the page first asks it (no filter, worst first, 200 rows),
  then with a task + candidate + judge filter, failures only, a score range and a
  text search (the search scans the texts: no index serves LIKE '%...%').

Target: page + first page of cases under 2 s.

    python scripts/bench/report_view.py [--rows 1000000] [--backend sqlite|postgres|both] [--db URL]

``--db URL`` measures a ledger filled before (e.g. by an earlier run's ``fill``) in a
fresh process, so two versions of the code can be timed in turns on the same data.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, inspect, text

from llm_connect.ledger import QualityLedger, upgrade
from llm_connect.report import serve

TASKS = ["support", "billing", "search", "summaries"]
CANDIDATES = {"mini": (0.95, 0.0006), "small": (0.9, 0.0002), "tiny": (0.75, 0.00005)}
GRADERS = ["embedding", "vrty"]
FIXED: dict[str, Any] = {
    "tags": "[]",
    "prompt_sha256": "0" * 64,
    "system_prompt_sha256": None,
    "baseline_adapter_id": "openai:gpt-4o",
    "baseline_provider": "openai",
    "baseline_model": "gpt-4o",
    "baseline_text_sha256": "0" * 64,
    "baseline_prompt_tokens": 50,
    "baseline_completion_tokens": 80,
    "baseline_cost_usd": 0.002,
    "baseline_finish_reason": "stop",
    "baseline_tool_calls": None,
    "baseline_served_model": "gpt-4o-2024-08-06",
    "baseline_endpoint": None,
    "candidate_provider": "openai",
    "candidate_text_sha256": "0" * 64,
    "candidate_prompt_tokens": 50,
    "candidate_completion_tokens": 70,
    "candidate_finish_reason": "stop",
    "candidate_tool_calls": None,
    "candidate_endpoint": None,
    "details": '{"judge_spec": {"name": "exact", "args": {}}}',
    "run_config": None,
    "llm_connect_version": "0.1.0",
    "metadata": None,
    "asks_llm": False,
    "score_delta": None,
}


def rows(total: int, stamp: Callable[[datetime], Any], runs: int = 5) -> Iterator[dict[str, Any]]:
    per_group = max(1, total // (len(TASKS) * len(CANDIDATES) * len(GRADERS)))
    cases = max(1, per_group // runs)
    rng = random.Random(5)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    n = 0
    for task in TASKS:
        for cand, (quality, cost) in CANDIDATES.items():
            for grader in GRADERS:
                for i in range(per_group):
                    n += 1
                    case = i % cases
                    score = min(1.0, max(0.0, rng.gauss(quality, 0.06)))
                    yield {
                        **FIXED,
                        "created_at": stamp(start + timedelta(seconds=n)),
                        "run_id": f"bulk-{i // cases}",
                        "case_id": f"{task}/{case}",
                        "task": task,
                        "prompt": f"question {case} about {task}",
                        "baseline_text": f"The baseline answer to question {case}, in a few words.",
                        "baseline_latency_ms": 800.0,
                        "candidate_adapter_id": f"openai:{cand}",
                        "candidate_model": cand,
                        "candidate_text": f"The {cand} answer to question {case}, in other words.",
                        "candidate_latency_ms": 300.0,
                        "candidate_cost_usd": cost,
                        "candidate_served_model": f"{cand}-2025",
                        "grader_id": grader,
                        "quality_score": score,
                        "notes": f"{grader} {score:.3f}",
                    }


def _columns(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        return [c["name"] for c in inspect(engine).get_columns("grades") if c["name"] != "id"]
    finally:
        engine.dispose()


def _indexes(url: str) -> list[tuple[str, str]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                found = conn.execute(
                    text(
                        "SELECT name, sql FROM sqlite_master "
                        "WHERE type='index' AND tbl_name='grades' AND sql IS NOT NULL"
                    )
                )
            else:
                found = conn.execute(
                    text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename='grades' "
                         "AND indexname LIKE 'ix_%' AND schemaname = current_schema()")
                )  # fmt: skip
            return [(r[0], r[1]) for r in found]
    finally:
        engine.dispose()


def fill(url: str, total: int) -> None:
    upgrade(url)
    indexes = _indexes(url)
    cols = _columns(url)
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        for name, _ in indexes:
            conn.execute(text(f"DROP INDEX {name}"))
    if engine.dialect.name == "sqlite":
        import sqlite3

        raw = sqlite3.connect(engine.url.database or "", isolation_level=None)
        raw.execute("PRAGMA synchronous=OFF")
        raw.execute("BEGIN")
        raw.executemany(
            f"INSERT INTO grades ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
            ([r[c] for c in cols] for r in rows(total, lambda d: d.strftime("%Y-%m-%d %H:%M:%S.%f"))),
        )
        raw.execute("COMMIT")
        raw.close()
    else:
        import psycopg

        options = str(engine.url.query.get("options", ""))
        with psycopg.connect(
            host=engine.url.host, port=engine.url.port, user=engine.url.username,
            password=engine.url.password, dbname=engine.url.database, options=options.replace("%3D", "="),
        ) as pg, pg.cursor() as cur, cur.copy(f"COPY grades ({', '.join(cols)}) FROM STDIN") as copy:  # fmt: skip  # noqa: E501
            for r in rows(total, lambda d: d):
                copy.write_row([r[c] for c in cols])
    with engine.connect() as conn:
        for _, sql in indexes:
            conn.execute(text(sql))
        conn.execute(text("ANALYZE"))
    engine.dispose()
    with QualityLedger(url) as ledger:
        ledger.rebuild_stats()


def _get(url: str) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as resp:
        body = resp.read()
    return time.perf_counter() - t0, body


def measure(url: str) -> None:
    with QualityLedger(url, auto_migrate=False) as ledger:
        print(f"  {ledger.count():,} grades")
        server = serve(ledger, port=0)
        try:
            base = server.url
            first, page = _get(base)
            again, _ = _get(base)
            cases, body = _get(base + "api/cases?sort=score-asc&offset=0&limit=200")
            print(
                f"  GET / cold {first * 1000:.0f} ms ({len(page) / 1e3:.0f} kB), cached {again * 1000:.0f} ms"
            )
            print(
                f"  GET /api/cases first page (200 rows of {json.loads(body)['total']:,}) "
                f"{cases * 1000:.0f} ms"
            )
            print(f"  page + first page of cases: {(first + cases) * 1000:.0f} ms (target < 2000 ms)")
            for label, query in (
                ("task+candidate+judge", "task=billing&candidate=small&judge=vrty"),
                ("failures only", "failures=1"),
                ("score 0.5..0.6", "min=0.5&max=0.6"),
                ("desc, offset 10000", "sort=score-desc&offset=10000"),
                ("text search", "q=question%20123%20"),
            ):
                took, body = _get(base + f"api/cases?{query}&limit=200")
                print(f"  GET /api/cases {label}: {took * 1000:.0f} ms ({json.loads(body)['total']:,} match)")
        finally:
            server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument(
        "--db", default=None, help="measure this already filled ledger (no fill; --backend ignored)"
    )
    args = parser.parse_args()
    if args.db:
        print(f"{args.db.split(':', 1)[0]} (given):")
        measure(args.db)
        return
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'ledger.db'}"
            t0 = time.perf_counter()
            fill(url, args.rows)
            print(f"sqlite (filled in {time.perf_counter() - t0:.0f} s):")
            measure(url)
    if args.backend in ("postgres", "both"):
        import sys

        sys.path.insert(0, str(Path(__file__).parent))
        from _pg import pg_schema

        base = os.environ.get(
            "LLM_CONNECT_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        )
        url, drop = pg_schema(base)
        try:
            t0 = time.perf_counter()
            fill(url, args.rows)
            print(f"postgresql (filled in {time.perf_counter() - t0:.0f} s):")
            measure(url)
        finally:
            drop()


if __name__ == "__main__":
    main()
