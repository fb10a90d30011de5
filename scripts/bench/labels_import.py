"""Benchmark: importing 100,000 human labels (``llm-connect labels import``) vs a plain executemany.

A fresh SQLite ledger holds ``--cases`` graded cases of one task for two
candidates (one judge); a CSV file holds one label per (case, candidate,
annotator) for ``--annotators`` annotators, half of them naming the candidate
by its adapter id (``openai:small``) so the store maps it to the model name.
The issue's goal: 100,000 labels in under 10 s on SQLite.

Timed per round, the sides taking turns on the same ledger (the labels table
emptied before each):

* **import**: ``llm_connect.labels.import_labels`` on the file: read and check every line,
  check every (task, case, candidate) has a grade and no different label is stored
  (set-based ``task = ? AND case_id IN (...)`` queries, 500 cases each), one ``executemany``
  insert, one transaction. What ``labels import`` does after opening the ledger.
* **re-import**: the same file again: every label found identical, nothing written.
* **baseline**: ``sqlite3`` ``executemany`` of the same rows, already parsed into tuples, into
  ``human_labels`` in one ``BEGIN IMMEDIATE`` transaction: no parsing, no checks (pure database cost).

The ratio printed is import time / baseline time, per round, summarised by the median.

    python scripts/bench/labels_import.py [--cases 25000] [--annotators 2] [--rounds 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llm_connect.labels import import_labels
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.ledger._engine import SQLITE_MMAP_BYTES
from llm_connect.types import LLMResponse, RunConfig, Usage
from llm_connect.values import GradingResult

CANDIDATES = ("small", "tiny")
INSERT = (
    "INSERT INTO human_labels (task, case_id, candidate, annotator, preference, score, note, run_id, "
    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def grade(url: str, cases: int) -> None:
    """``cases`` graded cases of task ``qa`` for each candidate, as ``grade`` stores them."""
    config = RunConfig(temperature=0.0, max_tokens=64)
    base = LLMResponse("The baseline's answer.", "big", "openai", usage=Usage(20, 10), cost_usd=0.001)
    with QualityLedger(url) as ledger:
        for model in CANDIDATES:
            cand = LLMResponse(
                "The candidate's answer.", model, "openai", usage=Usage(20, 8), cost_usd=0.0001
            )
            items = [
                RecordItem(
                    GradingResult(
                        quality_score=(i % 10) / 10,
                        notes="",
                        grader_id="exact",
                        baseline_response=base,
                        candidate_response=cand,
                        prompt=f"question {i}",
                        run_config=config,
                    ),
                    "qa",
                    "r1",
                    f"case-{i:06d}",
                    (),
                )
                for i in range(cases)
            ]
            for start in range(0, len(items), 5000):
                ledger.record_batch(items[start : start + 5000])


def write_labels(path: Path, cases: int, annotators: int) -> list[tuple[Any, ...]]:
    """The labels CSV; returns the same labels as the rows the baseline inserts."""
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = []
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["task", "case_id", "candidate", "annotator", "preference", "score", "note"])
        n = 0
        for i in range(cases):
            for model in CANDIDATES:
                for a in range(annotators):
                    spelled = model if n % 2 else f"openai:{model}"
                    note = "shorter, still right" if n % 7 == 0 else ""
                    if n % 3 == 0:
                        pref, score = "", str((n % 11) / 10)
                    else:
                        pref, score = ("candidate", "baseline", "tie")[n % 3], ""
                    writer.writerow(["qa", f"case-{i:06d}", spelled, f"annotator-{a}", pref, score, note])
                    rows.append(
                        (
                            "qa",
                            f"case-{i:06d}",
                            model,
                            f"annotator-{a}",
                            pref or None,
                            float(score) if score else None,
                            note or None,
                            None,
                            now,
                        )
                    )
                    n += 1
    return rows


def empty_labels(url: str) -> None:
    with QualityLedger(url) as ledger, ledger.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM human_labels")


def time_import(url: str, path: Path) -> tuple[float, Any]:
    with QualityLedger(url) as ledger:
        start = time.perf_counter()
        result = import_labels(ledger, path)
        return time.perf_counter() - start, result


def time_baseline(db_path: str, rows: list[tuple[Any, ...]]) -> float:
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA mmap_size = {SQLITE_MMAP_BYTES}")
        conn.execute("PRAGMA foreign_keys = ON")
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(INSERT, [(*r[:8], r[8].isoformat(sep=" ")) for r in rows])
        conn.execute("COMMIT")
        return time.perf_counter() - start
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=25000, help="graded cases per candidate")
    parser.add_argument("--annotators", type=int, default=2, help="labels per (case, candidate)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="directory of the SQLite file (default: a temp dir)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        db_path = os.path.join(tmp, "ledger.db")
        url = f"sqlite:///{db_path}"
        start = time.perf_counter()
        grade(url, args.cases)
        print(f"setup: {args.cases * len(CANDIDATES):,} grades in {time.perf_counter() - start:.1f} s")
        path = Path(tmp) / "labels.csv"
        rows = write_labels(path, args.cases, args.annotators)
        print(f"{len(rows):,} labels, {path.stat().st_size / 1e6:.1f} MB of CSV")

        imports, reimports, baselines, ratios = [], [], [], []
        for r in range(args.rounds):
            empty_labels(url)
            base = time_baseline(db_path, rows)
            empty_labels(url)
            took, result = time_import(url, path)
            assert result.written == len(rows), result
            again, same = time_import(url, path)
            assert same.unchanged == len(rows), same
            imports.append(took)
            reimports.append(again)
            baselines.append(base)
            ratios.append(took / base)
            print(
                f"round {r + 1}: import {took:.2f} s ({len(rows) / took:,.0f} labels/s), "
                f"re-import {again:.2f} s, baseline executemany {base:.2f} s, ratio {took / base:.1f}x"
            )
        med = statistics.median
        print(
            f"median: import {med(imports):.2f} s, re-import {med(reimports):.2f} s, "
            f"baseline {med(baselines):.2f} s, import / baseline {med(ratios):.1f}x "
            f"(goal: {len(rows):,} labels in < 10 s)"
        )


if __name__ == "__main__":
    main()
