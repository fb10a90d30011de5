"""Benchmark: Router.decide and QualityLedger.summary over a ledger of 1,000,000 grades.

The ledger holds 100 tasks x 5 candidates x 2 graders x 1,000 grades (one
baseline): by default each group is 200 cases graded in 5 runs (``--runs``;
``--runs 1`` makes every grade its own case), generated with fast raw bulk
inserts (sqlite3 ``executemany`` / PostgreSQL ``COPY``) into a migrated schema.
Routing reads one row per case (``case_stats``), so a decision over 5
candidates x 2 graders reads 2,000 case rows here (10,000 with ``--runs 1``).
Timed in the same run:

* ``Router.decide`` for a random task, all 5 candidates, both graders (each
  call also stores its decision): median and p95 over ``--calls`` calls, on one
  Router (which reuses a group's evidence while its running totals are
  unchanged, as when routing code asks again before new grades arrive);
* the same on a new Router per call (as a new process would): before issue 33 it used the
  evidence earlier decisions stored (``evidence_snapshots``) while the group's totals were
  unchanged; since, nothing is stored and it reads every case row (as "cold");
* the same with the stored evidence deleted before each call (outside the timing), as after
  new grades everywhere: every case row read and computed ("cold");
* one Router deciding one task after each batch of 10 new cases in each of its 10 groups
  (recorded through the ledger, outside the timing), as routing code asking while grades
  accrue: the new cases are read with the totals ("loop");
* the same after each batch of 10 known cases per group graded again (a second run of
  the suite): the new rows do not account for the change, so every changed group is
  read in full ("replicates"; its cost grows with the group's cases);
* ``summary(task=...)`` for one task;
* baseline: a bare ``SELECT COUNT(*) FROM grades WHERE task = ?`` on the same connection pool.

After the raw fill, ``ledger.rebuild_stats()`` computes the running totals
(``grade_stats``, ``case_stats``) that every ledger write otherwise keeps current.

Targets: decide median < 5 ms, summary < 50 ms, on SQLite and PostgreSQL.

    python scripts/bench/routing_decide.py [--rows 1000000] [--runs 5] [--calls 200] [--rounds 1]
        [--backend ...]

``--rounds N`` measures N times on the same filled ledger (a shared, noisy machine: read the
spread, not one figure).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _pg import pg_schema, raw_connect
from sqlalchemy import create_engine, inspect, text

from llm_connect.ledger import QualityLedger, upgrade
from llm_connect.ledger._convert import INSERT_COLUMNS
from llm_connect.ledger._models import Grade
from llm_connect.routing import Router

TASKS = [f"task-{i:03d}" for i in range(100)]
CANDIDATES = ["cand-a", "cand-b", "cand-c", "cand-d", "cand-e"]
GRADERS = ["exact", "embedding"]
QUALITY = {"cand-a": 0.97, "cand-b": 0.95, "cand-c": 0.91, "cand-d": 0.85, "cand-e": 0.99}
LLM_JUDGES = [False]
"""``--llm-judges``: the graders' grades say they asked a model (``asks_llm``, a served model in
the details), so a decision also reads each judge's newest grade for a changed identity."""
COST = {"cand-a": 0.0004, "cand-b": 0.0002, "cand-c": 0.0001, "cand-d": 0.00005, "cand-e": 0.002}


def sqlite_timestamp(moment: datetime) -> str:
    """``moment`` in the text form SQLAlchemy stores SQLite timestamps in (naive UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def rows(total: int, timestamp: Callable[[datetime], Any], runs: int = 5) -> Iterator[tuple[Any, ...]]:
    """``total`` grade rows in INSERT_COLUMNS order (short texts; digests are fixed strings)."""
    per_group = max(1, total // (len(TASKS) * len(CANDIDATES) * len(GRADERS)))
    cases = max(1, per_group // runs)
    rng = random.Random(7)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    digest = "0" * 64
    details = json.dumps(_details())
    config = json.dumps({"temperature": 0.0, "max_tokens": 256})
    template = {
        "tags": "[]",
        "prompt_sha256": digest,
        "system_prompt_sha256": None,
        "baseline_adapter_id": "openai:gpt-4o",
        "baseline_provider": "openai",
        "baseline_model": "gpt-4o",
        "baseline_text": "baseline answer",
        "baseline_text_sha256": digest,
        "baseline_prompt_tokens": 50,
        "baseline_completion_tokens": 80,
        "baseline_cost_usd": 0.002,
        "baseline_finish_reason": "stop",
        "baseline_tool_calls": None,
        "candidate_provider": "openai",
        "candidate_text": "candidate answer",
        "candidate_text_sha256": digest,
        "candidate_prompt_tokens": 50,
        "candidate_completion_tokens": 70,
        "candidate_finish_reason": "stop",
        "candidate_tool_calls": None,
        "notes": "",
        "details": details,
        "run_config": config,
        "llm_connect_version": "0.1.0",
        "baseline_served_model": "gpt-4o-2024-08-06",
        "baseline_endpoint": "https://api.openai.com/v1",
        "candidate_served_model": None,
        "candidate_endpoint": "https://api.openai.com/v1",
        "metadata": None,
        "asks_llm": LLM_JUDGES[0],
        "score_delta": None,
    }
    varying = (
        "created_at",
        "run_id",
        "case_id",
        "task",
        "prompt",
        "baseline_latency_ms",
        "candidate_adapter_id",
        "candidate_model",
        "candidate_latency_ms",
        "candidate_cost_usd",
        "grader_id",
        "quality_score",
    )
    order = [*varying, *template]
    fixed = tuple(template.values())
    # Permutation from (varying..., fixed...) to INSERT_COLUMNS order.
    perm = [order.index(c) for c in INSERT_COLUMNS]
    n = 0
    gauss, rand = rng.gauss, rng.random
    for task in TASKS:
        for cand in CANDIDATES:
            quality, cost, adapter = QUALITY[cand], COST[cand], f"openai:{cand}"
            for grader in GRADERS:
                for i in range(per_group):
                    n += 1
                    score = min(1.0, max(0.0, gauss(quality, 0.05)))
                    case = i % cases
                    head = (
                        timestamp(start + timedelta(seconds=n)),
                        f"bulk-{i // cases}",
                        f"{task}/{case}",
                        task,
                        f"prompt {case}",
                        800.0 + rand() * 100,
                        adapter,
                        cand,
                        300.0 + rand() * 100,
                        cost,
                        grader,
                        score,
                    )
                    full = head + fixed
                    yield tuple([full[j] for j in perm])


def _drop_indexes(conn: Any) -> None:
    for index in Grade.__table__.indexes:  # type: ignore[attr-defined]
        conn.execute(text(f"DROP INDEX {index.name}"))


def _create_indexes(conn: Any) -> None:
    for index in Grade.__table__.indexes:  # type: ignore[attr-defined]
        index.create(conn)


def fill_sqlite(path: Path, total: int, runs: int) -> None:
    import sqlite3

    url = f"sqlite:///{path}"
    upgrade(url)
    engine = create_engine(url)
    with engine.begin() as conn:
        _drop_indexes(conn)
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=OFF")
    sql = (
        f"INSERT INTO grades ({', '.join(INSERT_COLUMNS)}) VALUES ({', '.join('?' for _ in INSERT_COLUMNS)})"
    )
    raw.execute("BEGIN")
    raw.executemany(sql, rows(total, sqlite_timestamp, runs))
    raw.execute("COMMIT")
    raw.close()
    with engine.begin() as conn:
        _create_indexes(conn)
        conn.execute(text("ANALYZE"))
    engine.dispose()
    with QualityLedger(url) as ledger:  # the raw inserts bypassed the running totals
        ledger.rebuild_stats()


def fill_postgres(url: str, total: int, runs: int) -> None:
    upgrade(url)
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        _drop_indexes(conn)
    with (
        raw_connect(url) as pg,
        pg.cursor() as cur,
        cur.copy(f"COPY grades ({', '.join(INSERT_COLUMNS)}) FROM STDIN") as copy,
    ):
        for row in rows(total, lambda d: d, runs):
            copy.write_row(row)
    with engine.connect() as conn:
        _create_indexes(conn)
    with QualityLedger(url) as ledger:  # the raw inserts bypassed the running totals
        ledger.rebuild_stats()
    with engine.connect() as conn:
        conn.execute(text("VACUUM ANALYZE"))
    engine.dispose()


def measure(url: str, calls: int) -> dict[str, float]:
    rng = random.Random(11)
    with QualityLedger(url) as ledger:
        router = Router(ledger)
        count = ledger.count()

        def decide_on(r: Router, task: str | None = None) -> Any:
            return r.decide(
                task or rng.choice(TASKS),
                baseline="gpt-4o",
                candidates=CANDIDATES,
                grader_id=GRADERS,
                min_quality=0.9,
                allow_uncalibrated=LLM_JUDGES[0],
            )

        def decide() -> Any:  # one Router: evidence kept while a group's totals are unchanged
            return decide_on(router)

        def decide_new() -> Any:  # a new Router (as a new process): evidence stored by earlier decisions
            return decide_on(Router(ledger))

        stored = "evidence_snapshots" in inspect(ledger.engine).get_table_names()  # before issue 33

        def forget() -> None:  # outside the timing: as if new grades had arrived everywhere
            if stored:
                with ledger.engine.begin() as conn:
                    conn.execute(text("DELETE FROM evidence_snapshots"))

        loop_router, loop_task, arrived = Router(ledger), TASKS[0], [0]
        loop_prefix = f"loop {time.time_ns()}"  # new cases in every round, never replicates

        def decide_loop() -> Any:  # routing code asking after every batch of new grades
            return decide_on(loop_router, loop_task)

        def new_batch() -> None:  # outside the timing: 10 new cases in each of the task's 10 groups
            first = arrived[0]
            arrived[0] += 10
            ledger.record_many(
                [
                    _result(
                        cand, grader, f"{loop_prefix}/{i}", min(1.0, max(0.0, rng.gauss(QUALITY[cand], 0.05)))
                    )
                    for i in range(first, first + 10)
                    for cand in CANDIDATES
                    for grader in GRADERS
                ],
                task=loop_task,
            )

        def replicate_batch() -> None:  # outside the timing: 10 known cases per group graded again
            ledger.record_many(
                [
                    _result(
                        cand, grader, f"{loop_prefix}/{i}", min(1.0, max(0.0, rng.gauss(QUALITY[cand], 0.05)))
                    )
                    for i in rng.sample(range(arrived[0]), 10)
                    for cand in CANDIDATES
                    for grader in GRADERS
                ],
                task=loop_task,
            )

        def summary() -> Any:
            return ledger.summary(task=rng.choice(TASKS))

        def bare() -> Any:
            with ledger.engine.connect() as conn:
                return conn.execute(
                    text("SELECT COUNT(*) FROM grades WHERE task = :t"), {"t": rng.choice(TASKS)}
                ).scalar_one()

        example = decide()
        timings = {}
        # decide_cold: a new Router with no stored evidence (forgotten before each call, untimed):
        # every case row read and computed.
        for name, fn, before in (
            ("decide", decide, None),
            ("decide_new", decide_new, None),
            ("decide_cold", decide_new, forget),
            ("decide_loop", decide_loop, new_batch),
            ("decide_replicates", decide_loop, replicate_batch),
            ("summary", summary, None),
            ("bare_count", bare, None),
        ):
            for _ in range(5):
                fn()  # warm caches
            if name == "decide":  # every task decided once before (no grades arrive since)
                for task in TASKS:
                    decide_on(router, task)
            samples = []
            for _ in range(calls):
                if before is not None:
                    before()
                t0 = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t0) * 1000)
            samples.sort()
            timings[f"{name}_median_ms"] = statistics.median(samples)
            timings[f"{name}_p95_ms"] = samples[int(len(samples) * 0.95) - 1]
    print(f"  grades in ledger: {count:,}; example decision: {example.model} — {example.reason[:160]}...")
    return timings


def _result(candidate: str, grader: str, prompt: str, score: float) -> Any:
    from llm_connect.grading import GradingResult
    from llm_connect.types import LLMResponse

    return GradingResult(
        score,
        "bench",
        grader,
        LLMResponse("baseline answer", "gpt-4o", "openai", latency_ms=850.0, cost_usd=0.002),
        LLMResponse("candidate answer", candidate, "openai", latency_ms=350.0, cost_usd=COST[candidate]),
        prompt=prompt,
        details=_details(),
        asks_llm=LLM_JUDGES[0],
    )


def _details() -> dict[str, Any]:
    """A grade's details: an exact-match judge's, or with ``--llm-judges`` an LLM judge's."""
    if LLM_JUDGES[0]:
        return {"judge_spec": {"name": "llm", "args": {}}, "judge_model": "judge-2026-01-01"}
    return {"judge_spec": {"name": "exact", "args": {}}}


def report(name: str, timings: dict[str, float]) -> None:
    d, s, b = timings["decide_median_ms"], timings["summary_median_ms"], timings["bare_count_median_ms"]
    c, w = timings["decide_cold_median_ms"], timings["decide_new_median_ms"]
    print(
        f"{name}: decide median {d:.2f} ms (p95 {timings['decide_p95_ms']:.2f}; target < 5) "
        f"| new Router, stored evidence: median {w:.2f} ms (p95 {timings['decide_new_p95_ms']:.2f}) "
        f"| new Router, nothing stored (every case row read) median {c:.2f} ms "
        f"(p95 {timings['decide_cold_p95_ms']:.2f}) "
        f"| one Router after each batch of 10 new cases per group: median "
        f"{timings['decide_loop_median_ms']:.2f} ms (p95 {timings['decide_loop_p95_ms']:.2f}) "
        f"| the same after 10 known cases per group were graded again (a full read of the "
        f"task's changed groups): median {timings['decide_replicates_median_ms']:.2f} ms "
        f"(p95 {timings['decide_replicates_p95_ms']:.2f}) "
        f"| summary median {s:.2f} ms (p95 {timings['summary_p95_ms']:.2f}; target < 50) "
        f"| bare COUNT(*) per task {b:.2f} ms; decide/bare {d / b:.1f}x, summary/bare {s / b:.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5, help="runs per case (1: every grade its own case)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1, help="measurements per filled ledger")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument(
        "--llm-judges", action="store_true", help="graders that asked a model (the identity read; issue 37)"
    )
    args = parser.parse_args()
    LLM_JUDGES[0] = args.llm_judges

    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "ledger.db"
            t0 = time.perf_counter()
            fill_sqlite(path, args.rows, args.runs)
            print(f"SQLite: filled {args.rows:,} rows in {time.perf_counter() - t0:.1f} s")
            for _ in range(args.rounds):
                report("SQLite", measure(f"sqlite:///{path}", args.calls))

    base = os.environ.get("LLM_CONNECT_BENCH_POSTGRES_URL") or os.environ.get("LLM_CONNECT_TEST_POSTGRES_URL")
    if args.backend in ("postgres", "both"):
        if not base:
            print("PostgreSQL: skipped (set LLM_CONNECT_TEST_POSTGRES_URL)")
            return
        url, drop = pg_schema(base)
        try:
            t0 = time.perf_counter()
            fill_postgres(url, args.rows, args.runs)
            print(f"PostgreSQL: filled {args.rows:,} rows in {time.perf_counter() - t0:.1f} s")
            for _ in range(args.rounds):
                report("PostgreSQL", measure(url, args.calls))
        finally:
            drop()


if __name__ == "__main__":
    main()
