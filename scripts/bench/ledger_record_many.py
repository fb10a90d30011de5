"""Benchmark: QualityLedger.record_many vs a raw driver executemany into the same schema.

Both sides insert the same N grades (keyed by run_id/case_id, as the CLI
writes them) into freshly migrated databases in the same run, in batches:

* SQLite: ``record_many`` vs ``sqlite3.Connection.executemany`` (same pragmas: WAL,
  synchronous=NORMAL, one transaction per batch).
* PostgreSQL (when ``LLM_CONNECT_BENCH_POSTGRES_URL`` or ``LLM_CONNECT_TEST_POSTGRES_URL``
  is set): ``record_many`` vs ``psycopg`` ``executemany`` (one transaction per batch).

Two raw baselines are timed: "raw insert" gets rows already converted to
tuples (pure database cost); "raw + convert" also turns each GradingResult into
its row in plain Python (what a hand-written logger does). The ratio printed
is raw time / record_many time (1.0 = as fast as the raw driver).
For SQLite the per-row cost of the ledger's Python side alone (validation and
conversion to row tuples, no database) is printed too: the work the
pre-converted baseline skips.

    python scripts/bench/ledger_record_many.py [--n 20000] [--batch 500]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger, RecordItem, upgrade
from llm_connect.ledger._models import Grade
from llm_connect.types import LLMResponse, RunConfig, Usage

COLUMNS = [c.name for c in Grade.__table__.columns if c.name != "id"]
JSON_COLUMNS = {"tags", "details", "run_config", "baseline_tool_calls", "candidate_tool_calls"}


def make_results(n: int) -> list[GradingResult]:
    config = RunConfig(temperature=0.0, max_tokens=256, system_prompt="You are a support agent.")
    out = []
    for i in range(n):
        prompt = f"Customer {i} asks: how do I reset my password on the mobile app? " * 2
        base = LLMResponse(
            f"To reset your password, open Settings > Account > Reset password. Case {i}. " * 3,
            "gpt-4o",
            "openai",
            latency_ms=820.0 + i % 50,
            usage=Usage(60, 90),
            cost_usd=0.0011,
            finish_reason="stop",
        )
        cand = LLMResponse(
            f"Open Settings, then Account, then Reset password. Case {i}. " * 3,
            "gpt-4o-mini",
            "openai",
            latency_ms=310.0 + i % 30,
            usage=Usage(60, 70),
            cost_usd=0.00006,
            finish_reason="stop",
        )
        out.append(
            GradingResult(
                quality_score=(i % 100) / 100,
                notes="cosine similarity 0.93",
                grader_id="embedding",
                baseline_response=base,
                candidate_response=cand,
                details={"judge_spec": {"name": "embedding", "args": {}}, "cosine": 0.93},
                prompt=prompt,
                run_config=config,
            )
        )
    return out


def _sha(text_: str) -> str:
    return hashlib.sha256(text_.encode()).hexdigest()


def convert(
    result: GradingResult, run_id: str, case_id: str, now: Any, json_dumps: Callable[[Any], Any]
) -> tuple:
    """Plain-Python conversion a hand-written logger would do (no secret scrubbing)."""
    b, c = result.baseline_response, result.candidate_response
    config = result.run_config
    row = {
        "created_at": now,
        "run_id": run_id,
        "case_id": case_id,
        "task": "support",
        "tags": json_dumps([]),
        "prompt": result.prompt,
        "prompt_sha256": _sha(result.prompt),
        "system_prompt_sha256": _sha(config.system_prompt) if config and config.system_prompt else None,
        "grader_id": result.grader_id,
        "quality_score": result.quality_score,
        "notes": result.notes,
        "details": json_dumps(dict(result.details)),
        "run_config": json_dumps(config.to_dict()) if config else None,
        "llm_connect_version": "0.1.0",
    }
    for prefix, r in (("baseline", b), ("candidate", c)):
        row.update(
            {
                f"{prefix}_adapter_id": f"{r.provider}:{r.model}",
                f"{prefix}_provider": r.provider,
                f"{prefix}_model": r.model,
                f"{prefix}_text": r.text,
                f"{prefix}_text_sha256": _sha(r.text),
                f"{prefix}_latency_ms": r.latency_ms,
                f"{prefix}_prompt_tokens": r.usage.prompt_tokens if r.usage else None,
                f"{prefix}_completion_tokens": r.usage.completion_tokens if r.usage else None,
                f"{prefix}_cost_usd": r.cost_usd,
                f"{prefix}_finish_reason": r.finish_reason,
                f"{prefix}_tool_calls": None,
            }
        )
    return tuple(row[name] for name in COLUMNS)


def bench_ledger(url: str, results: list[GradingResult], batch: int) -> float:
    with QualityLedger(url) as ledger:
        t0 = time.perf_counter()
        for lo in range(0, len(results), batch):
            ledger.record_batch(
                [
                    RecordItem(r, "support", run_id="bench", case_id=str(lo + i))
                    for i, r in enumerate(results[lo : lo + batch])
                ]
            )
        return time.perf_counter() - t0


def bench_convert_only(results: list[GradingResult], batch: int) -> float:
    """The ledger's Python side alone: items built, validated and turned into row tuples, no database."""
    from llm_connect.ledger._convert import item_values, validate_item
    from llm_connect.ledger._insert import created_value
    from llm_connect.ledger._models import utcnow

    t0 = time.perf_counter()
    for lo in range(0, len(results), batch):
        items = [
            validate_item(i, RecordItem(r, "support", run_id="bench", case_id=str(lo + i)))
            for i, r in enumerate(results[lo : lo + batch])
        ]
        now = created_value(utcnow(), "sqlite")
        memo: dict[Any, Any] = {}
        [item_values(item, store_text=True, now=now, memo=memo) for item in items]
    return time.perf_counter() - t0


def bench_sqlite_raw(path: Path, results: list[GradingResult], batch: int, pre_converted: bool) -> float:
    upgrade(f"sqlite:///{path}")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    sql = f"INSERT INTO grades ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})"
    now = "2026-01-01 00:00:00.000000"
    rows = None
    if pre_converted:
        rows = [convert(r, "bench", str(i), now, json.dumps) for i, r in enumerate(results)]
    t0 = time.perf_counter()
    for lo in range(0, len(results), batch):
        chunk = (
            rows[lo : lo + batch]
            if rows is not None
            else [
                convert(r, "bench", str(lo + i), now, json.dumps)
                for i, r in enumerate(results[lo : lo + batch])
            ]
        )
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(sql, chunk)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def bench_pg_raw(url: str, results: list[GradingResult], batch: int, pre_converted: bool) -> float:
    import psycopg
    from psycopg.types.json import Json

    upgrade(url)
    sa_url = create_engine(url).url
    schema = sa_url.query["options"].split("=", 1)[1]
    conn = psycopg.connect(
        host=sa_url.host,
        port=sa_url.port,
        user=sa_url.username,
        dbname=sa_url.database,
        password=sa_url.password,
        options=f"-csearch_path={schema}",
    )
    sql = f"INSERT INTO grades ({', '.join(COLUMNS)}) VALUES ({', '.join('%s' for _ in COLUMNS)})"
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    rows = [convert(r, "bench", str(i), now, Json) for i, r in enumerate(results)] if pre_converted else None
    t0 = time.perf_counter()
    for lo in range(0, len(results), batch):
        chunk = (
            rows[lo : lo + batch]
            if rows is not None
            else [convert(r, "bench", str(lo + i), now, Json) for i, r in enumerate(results[lo : lo + batch])]
        )
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(sql, chunk)
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def _pg_schema(base: str) -> tuple[str, Callable[[], None]]:
    engine = create_engine(base, isolation_level="AUTOCOMMIT")
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with engine.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))

    def drop() -> None:
        with engine.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()

    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}", drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs per side")
    args = parser.parse_args()
    results = make_results(args.n)
    print(f"{args.n} grades, batches of {args.batch}, best of {args.repeat}")

    base = os.environ.get("LLM_CONNECT_BENCH_POSTGRES_URL") or os.environ.get("LLM_CONNECT_TEST_POSTGRES_URL")
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(10**6))

        def fresh() -> str:
            return str(Path(tmp) / f"{next(counter)}.db")

        sides: dict[str, Callable[[], float]] = {
            "ours": lambda: bench_ledger(f"sqlite:///{fresh()}", results, args.batch),
            "raw": lambda: bench_sqlite_raw(Path(fresh()), results, args.batch, True),
            "raw_conv": lambda: bench_sqlite_raw(Path(fresh()), results, args.batch, False),
        }
        best = _interleaved(sides, args.repeat)
        _report("SQLite", args.n, *best, "sqlite3 executemany")
        convert_only = min(bench_convert_only(results, args.batch) for _ in range(args.repeat))
        per_row = [1e6 * t / args.n for t in (best[0], best[1], convert_only)]
        print(
            "SQLite per row: record_many {:.1f} us, raw insert {:.1f} us; the ledger's Python side "
            "alone (validate + convert, no database) {:.1f} us".format(*per_row)
        )

    if not base:
        print("PostgreSQL: skipped (set LLM_CONNECT_TEST_POSTGRES_URL)")
        return

    def on_pg(kind: str) -> float:
        url, drop = _pg_schema(base)
        try:
            if kind == "ours":
                return bench_ledger(url, results, args.batch)
            return bench_pg_raw(url, results, args.batch, kind == "raw")
        finally:
            drop()

    pg_sides: dict[str, Callable[[], float]] = {
        k: (lambda k=k: on_pg(k)) for k in ("ours", "raw", "raw_conv")
    }
    _report("PostgreSQL", args.n, *_interleaved(pg_sides, args.repeat), "psycopg executemany")


def _interleaved(sides: dict[str, Callable[[], float]], repeat: int) -> list[float]:
    """Best time of each side, the sides alternating so machine load hits them alike."""
    best = {name: float("inf") for name in sides}
    for _ in range(repeat):
        for name, fn in sides.items():
            best[name] = min(best[name], fn())
    return [best[name] for name in sides]


def _report(name: str, n: int, ours: float, raw: float, raw_conv: float, what: str) -> None:
    print(
        f"{name}: record_many {n / ours:,.0f} grades/s; {what} {n / raw:,.0f} rows/s "
        f"(pre-converted), {n / raw_conv:,.0f} rows/s (converting in the loop)"
    )
    print(
        f"{name}: ratio vs raw insert {raw / ours:.2f}; ratio vs raw + convert {raw_conv / ours:.2f} "
        f"(target >= 0.70)"
    )


if __name__ == "__main__":
    main()
