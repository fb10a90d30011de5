"""Benchmark: the ledger's two PostgreSQL write paths (COPY staging vs executemany) by batch size.

One freshly migrated schema; for each batch size the two paths alternate
(forced by setting ``PG_COPY_MIN_ROWS`` to 1 or to a huge number), and the median time of one
``record_batch`` call is printed for each. This is how ``PG_COPY_MIN_ROWS``
was chosen.

    LLM_CONNECT_TEST_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test \\
        python scripts/bench/pg_batch_paths.py [--sizes 1,6,25,50,100,500]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from _pg import pg_schema
from ledger_record_many import make_results

import llm_connect.ledger._insert as insert_module
from llm_connect.ledger import QualityLedger, RecordItem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,6,25,50,100,500")
    parser.add_argument("--calls", type=int, default=60, help="grades per size and path (at least 3 calls)")
    args = parser.parse_args()
    base = os.environ.get("LLM_CONNECT_BENCH_POSTGRES_URL") or os.environ.get("LLM_CONNECT_TEST_POSTGRES_URL")
    if not base:
        raise SystemExit("set LLM_CONNECT_TEST_POSTGRES_URL")
    sizes = [int(s) for s in args.sizes.split(",")]
    results = make_results(max(sizes))
    url, drop = pg_schema(base)
    threshold = insert_module.PG_COPY_MIN_ROWS
    case = 0
    try:
        with QualityLedger(url) as ledger:
            print("grades per batch | COPY staging | executemany (median per record_batch call)")
            for size in sizes:
                times: dict[str, list[float]] = {"copy": [], "executemany": []}
                for _ in range(max(3, args.calls // size)):
                    for path in ("copy", "executemany"):
                        insert_module.PG_COPY_MIN_ROWS = 1 if path == "copy" else 10**9
                        items = [
                            RecordItem(r, "bench", run_id="paths", case_id=str(case + i))
                            for i, r in enumerate(results[:size])
                        ]
                        case += size
                        t0 = time.perf_counter()
                        ledger.record_batch(items)
                        times[path].append(time.perf_counter() - t0)
                copy, rows = (1e3 * statistics.median(times[k]) for k in ("copy", "executemany"))
                print(f"{size:>16} | {copy:9.2f} ms | {rows:8.2f} ms   (executemany/COPY {rows / copy:.2f})")
    finally:
        insert_module.PG_COPY_MIN_ROWS = threshold
        drop()


if __name__ == "__main__":
    main()
