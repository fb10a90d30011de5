"""8 processes write 500 grades each into one ledger at the same time (SQLite file and PostgreSQL).

Every process opens the same fresh database (so they also race to migrate it),
writes its grades as single records and batches, and re-records 50 of its
neighbour's grades (the identical grades, so the writes are no-ops whichever
process gets there first): afterwards every grade is present exactly once, the
running totals count each once, and no "database is locked" escaped.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from typing import Any

import pytest
from sqlalchemy import text

from llm_connect.ledger import QualityLedger, RecordItem
from tests.fixtures.databases import _make_result

PROCESSES = 8
GRADES = 500


def _worker(url: str, index: int, start: Any, errors: Any) -> None:
    try:
        start.wait(60)
        with QualityLedger(url) as ledger:
            own = [f"p{index}"] * GRADES
            cases = [str(i) for i in range(GRADES)]
            items = [
                RecordItem(_make_result(i / GRADES), "concurrency", run_id=run, case_id=case)
                for i, (run, case) in enumerate(zip(own, cases, strict=True))
            ]
            for item in items[:100]:  # single records
                ledger.record(item.result, task=item.task, run_id=item.run_id, case_id=item.case_id)
            for lo in range(100, GRADES, 80):  # batches of various sizes
                ledger.record_batch(items[lo : lo + 80])
            neighbour = f"p{(index + 1) % PROCESSES}"
            ledger.record_batch(
                [
                    RecordItem(_make_result(i / GRADES), "concurrency", run_id=neighbour, case_id=str(i))
                    for i in range(50)
                ]
            )
    except BaseException:
        errors.put(f"process {index}: {traceback.format_exc()}")
        raise


def _hammer(url: str) -> None:
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    errors = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, i, start, errors)) for i in range(PROCESSES)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(150)
    problems = []
    while not errors.empty():
        problems.append(errors.get())
    assert not problems, "\n".join(problems)
    assert [p.exitcode for p in procs] == [0] * PROCESSES

    with QualityLedger(url) as ledger, ledger.engine.connect() as conn:
        total = conn.execute(text("SELECT COUNT(*) FROM grades")).scalar_one()
        distinct = conn.execute(
            text("SELECT COUNT(*) FROM (SELECT DISTINCT run_id, case_id FROM grades) AS k")
        ).scalar_one()
        per_run = dict(conn.execute(text("SELECT run_id, COUNT(*) FROM grades GROUP BY run_id")).all())
        totals = conn.execute(text("SELECT SUM(n) FROM grade_stats")).scalar_one()
    assert total == distinct == PROCESSES * GRADES
    assert per_run == {f"p{i}": GRADES for i in range(PROCESSES)}
    assert totals == total  # the running totals saw every insert exactly once


@pytest.mark.slow
def test_eight_processes_into_one_sqlite_file(sqlite_url: str) -> None:
    _hammer(sqlite_url)


@pytest.mark.slow
@pytest.mark.postgres
def test_eight_processes_into_one_postgres_schema(postgres_url: str) -> None:
    _hammer(postgres_url)
