"""Benchmark: QualityLedger.record_many vs a raw driver executemany into the same schema.

Both sides insert the same N grades (keyed by run_id/case_id, as the CLI
writes them) into freshly migrated databases in the same run, in batches:

* SQLite: ``record_batch`` vs ``sqlite3.Connection.executemany`` (the ledger's pragmas: WAL,
  synchronous=NORMAL, mmap; one ``BEGIN IMMEDIATE`` transaction per batch).
* PostgreSQL (when ``LLM_CONNECT_BENCH_POSTGRES_URL`` or ``LLM_CONNECT_TEST_POSTGRES_URL``
  is set): ``record_many`` vs ``psycopg`` ``executemany`` (one transaction per batch).

Two raw baselines are timed: "raw insert" gets rows already converted to
tuples (pure database cost); "raw + convert" also turns each GradingResult into
its row in plain Python (what a hand-written logger does). The ratio printed
is raw time / record_many time (1.0 = as fast as the raw driver), per round,
summarised by its median over the rounds. Within a round the sides take turns
batch by batch (rotating order), each into its own fresh database: this disk's
fsync and checkpoint times swing by tens of percent from second to second, so
timing each side in a separate run mostly measured which side met a slow spell.
For SQLite the per-row cost of the ledger's Python side alone (validation and
conversion to row tuples, no database) is printed too: the work the
pre-converted baseline skips.

    python scripts/bench/ledger_record_many.py [--n 20000] [--batch 500] [--rounds 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _pg import pg_schema, raw_connect

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger, RecordItem, upgrade
from llm_connect.ledger._engine import SQLITE_MMAP_BYTES
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
) -> tuple[Any, ...]:
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
        "metadata": None,
        "asks_llm": result.asks_llm,
        "score_delta": None,
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
                f"{prefix}_served_model": r.model,
                f"{prefix}_endpoint": r.endpoint,
            }
        )
    return tuple(row[name] for name in COLUMNS)


def items(results: list[GradingResult], lo: int, batch: int) -> list[RecordItem]:
    """The batch starting at ``lo`` as the CLI writes it: keyed by run and case, built in the timed loop."""
    return [
        RecordItem(r, "support", run_id="bench", case_id=str(lo + i))
        for i, r in enumerate(results[lo : lo + batch])
    ]


class Side:
    """One way of writing the grades: ``open()``, then ``write(lo)`` per batch, then ``close()``."""

    def __init__(self, results: list[GradingResult], batch: int) -> None:
        self.results, self.batch = results, batch

    def open(self) -> None: ...

    def write(self, lo: int) -> None:
        raise NotImplementedError

    def close(self) -> None: ...


class Ours(Side):
    """``QualityLedger.record_batch``: RecordItems built, validated, converted and inserted."""

    def __init__(self, results: list[GradingResult], batch: int, url: Callable[[], str]) -> None:
        super().__init__(results, batch)
        self.url = url

    def open(self) -> None:
        self.ledger = QualityLedger(self.url())

    def write(self, lo: int) -> None:
        self.ledger.record_batch(items(self.results, lo, self.batch))

    def close(self) -> None:
        self.ledger.close()


class Raw(Side):
    """The driver's ``executemany`` of rows; pre-converted (timed: the insert alone) or converted
    in the timed loop by :func:`convert` (what a hand-written logger does)."""

    def __init__(
        self,
        results: list[GradingResult],
        batch: int,
        connect: Callable[[], Any],
        json_value: Any,
        *,
        pre: bool,
    ) -> None:
        super().__init__(results, batch)
        self.connect, self.json_value, self.pre = connect, json_value, pre
        self.now: Any = None
        self.rows: list[tuple[Any, ...]] | None = None

    def open(self) -> None:
        self.conn, self.sql, self.now = self.connect()
        if self.pre:
            self.rows = [
                convert(r, "bench", str(i), self.now, self.json_value) for i, r in enumerate(self.results)
            ]

    def chunk(self, lo: int) -> list[tuple[Any, ...]]:
        if self.rows is not None:
            return self.rows[lo : lo + self.batch]
        return [
            convert(r, "bench", str(lo + i), self.now, self.json_value)
            for i, r in enumerate(self.results[lo : lo + self.batch])
        ]

    def close(self) -> None:
        self.conn.close()


class RawSqlite(Raw):
    def write(self, lo: int) -> None:
        chunk = self.chunk(lo)
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(self.sql, chunk)
        self.conn.execute("COMMIT")


class RawPostgres(Raw):
    def write(self, lo: int) -> None:
        chunk = self.chunk(lo)
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(self.sql, chunk)


def sqlite_connect(path: Callable[[], str]) -> Callable[[], Any]:
    """A raw ``sqlite3`` connection to a freshly migrated file, with the ledger's pragmas."""

    def connect() -> Any:
        file = path()
        upgrade(f"sqlite:///{file}")
        conn = sqlite3.connect(file, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA mmap_size={SQLITE_MMAP_BYTES}")
        sql = f"INSERT INTO grades ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})"
        return conn, sql, "2026-01-01 00:00:00.000000"

    return connect


def postgres_connect(url: Callable[[], str]) -> Callable[[], Any]:
    """A raw psycopg connection to a freshly migrated schema."""

    def connect() -> Any:
        schema_url = url()
        upgrade(schema_url)
        conn = raw_connect(schema_url)
        sql = f"INSERT INTO grades ({', '.join(COLUMNS)}) VALUES ({', '.join('%s' for _ in COLUMNS)})"
        return conn, sql, datetime.now(UTC)

    return connect


def bench_round(sides: dict[str, Side], n: int, batch: int, round_no: int) -> dict[str, float]:
    """Every side writes all ``n`` grades into its own fresh database, batch by batch in turn.

    Within a round the sides take turns per batch (the order rotating from batch
    to batch), so a slow spell of the machine or the disk (fsync, checkpoints)
    falls on all of them alike; only the ``write`` calls are timed.
    """
    names = list(sides)
    spent = dict.fromkeys(names, 0.0)
    for side in sides.values():
        side.open()
    try:
        for k, lo in enumerate(range(0, n, batch)):
            shift = (k + round_no) % len(names)
            for name in names[shift:] + names[:shift]:
                t0 = time.perf_counter()
                sides[name].write(lo)
                spent[name] += time.perf_counter() - t0
    finally:
        for side in sides.values():
            side.close()
    return spent


def bench_convert_only(results: list[GradingResult], batch: int) -> float:
    """The ledger's Python side alone: items built, validated and turned into rows, no database."""
    from llm_connect.ledger._convert import grade_rows
    from llm_connect.ledger._models import utcnow

    t0 = time.perf_counter()
    for lo in range(0, len(results), batch):
        grade_rows(items(results, lo, batch), store_text=True, now=utcnow(), dialect="sqlite")
    return time.perf_counter() - t0


def run(
    name: str, sides: dict[str, Side], n: int, batch: int, rounds: int, what: str
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(rounds):
        for k, t in bench_round(sides, n, batch, r).items():
            times[k].append(t)
    _report(name, n, times, what)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", "--repeat", type=int, default=5, help="rounds (fresh databases each)")
    parser.add_argument("--dir", default=None, help="directory of the SQLite files (default: temp dir)")
    args = parser.parse_args()
    results = make_results(args.n)
    n, batch = args.n, args.batch
    print(f"{n} grades, batches of {batch}, {args.rounds} rounds; load {os.getloadavg()[0]:.1f}")

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        counter = iter(range(10**6))

        def fresh() -> str:
            return str(Path(tmp) / f"{next(counter)}.db")

        sides: dict[str, Side] = {
            "ours": Ours(results, batch, lambda: f"sqlite:///{fresh()}"),
            "raw": RawSqlite(results, batch, sqlite_connect(fresh), json.dumps, pre=True),
            "raw_conv": RawSqlite(results, batch, sqlite_connect(fresh), json.dumps, pre=False),
        }
        times = run("SQLite", sides, n, batch, args.rounds, "sqlite3 executemany")
        convert_only = min(bench_convert_only(results, batch) for _ in range(3))
        print(
            "SQLite per row (medians): record_many {:.1f} us, raw insert {:.1f} us; the ledger's Python "
            "side alone (validate + convert, no database, best of 3) {:.1f} us".format(
                *(1e6 * statistics.median(times[k]) / n for k in ("ours", "raw")), 1e6 * convert_only / n
            )
        )

    base = os.environ.get("LLM_CONNECT_BENCH_POSTGRES_URL") or os.environ.get("LLM_CONNECT_TEST_POSTGRES_URL")
    if not base:
        print("PostgreSQL: skipped (set LLM_CONNECT_TEST_POSTGRES_URL)")
        return
    drops: list[Callable[[], None]] = []

    def schema() -> str:
        url, drop = pg_schema(base)
        drops.append(drop)
        return url

    from psycopg.types.json import Json

    pg_sides: dict[str, Side] = {
        "ours": Ours(results, batch, schema),
        "raw": RawPostgres(results, batch, postgres_connect(schema), Json, pre=True),
        "raw_conv": RawPostgres(results, batch, postgres_connect(schema), Json, pre=False),
    }
    try:
        run("PostgreSQL", pg_sides, n, batch, args.rounds, "psycopg executemany")
    finally:
        for drop in drops:
            drop()


def _report(name: str, n: int, times: dict[str, list[float]], what: str) -> None:
    ours, raw, raw_conv = times["ours"], times["raw"], times["raw_conv"]
    med = statistics.median
    rate = n / med(ours)
    goal = 20_000 if name == "SQLite" else 10_000
    target = f" (target >= {goal:,}: {'met' if rate >= goal else 'MISSED'}; load {os.getloadavg()[0]:.1f})"
    print(
        f"{name}: record_many {rate:,.0f} grades/s{target}; {what} {n / med(raw):,.0f} rows/s "
        f"(pre-converted), {n / med(raw_conv):,.0f} rows/s (converting in the loop) [medians]"
    )
    vs_raw = sorted(r / o for r, o in zip(raw, ours, strict=True))
    vs_conv = sorted(r / o for r, o in zip(raw_conv, ours, strict=True))
    print(
        f"{name}: ratio vs raw insert: median {med(vs_raw):.2f} of {len(vs_raw)} rounds "
        f"(range {vs_raw[0]:.2f}-{vs_raw[-1]:.2f}); vs raw + convert: median {med(vs_conv):.2f}"
    )


if __name__ == "__main__":
    main()
