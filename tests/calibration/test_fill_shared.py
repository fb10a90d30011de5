"""The calibration fill step, shared: processes grade a ledger's missing pairs together, each pair once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from llm_connect.calibration import fill_missing_grades
from llm_connect.grading import GradingResult, JudgeContext, build_judge
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.types import LLMResponse
from tests.cli._util import invoke


def stored_pairs(url: str, n: int) -> None:
    items = []
    for i in range(n):
        base = LLMResponse(f"the answer is {i}", "big", "openai")
        cand = LLMResponse(f"the answer is {i}" if i % 3 else f"maybe {i}", "small", "openai")
        items.append(
            RecordItem(GradingResult(1.0, "n", "exact", base, cand, prompt=f"q{i}"), "t", "r", f"c{i}")
        )
    with QualityLedger(url) as ledger:
        ledger.record_batch(items)


def _fill(url: str, run_id: str) -> dict[str, int]:
    judge = build_judge("length:max_words=3", JudgeContext())
    with QualityLedger(url) as ledger:
        report = fill_missing_grades(ledger, [judge], shared_run=run_id, lease_s=5, batch_size=4)
    return dict(report.graded)


def test_processes_fill_together_and_grade_each_pair_once(postgres_url: str) -> None:
    stored_pairs(postgres_url, 40)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        results = pool.starmap(_fill, [(postgres_url, "fill-1")] * 3)
    with QualityLedger(postgres_url) as ledger:
        grades = [g for g in ledger.results() if g.grader_id.startswith("length")]
        status = ledger.run_status("fill-1")
    assert sorted(g.case_id for g in grades) == sorted(f"c{i}" for i in range(40))  # once each
    assert sum(sum(r.values()) for r in results) == 40  # the work was split, not repeated
    assert status.done == 40 and status.pending == status.claimed == 0
    # A second fill under a new run id finds nothing left to grade.
    assert sum(_fill(postgres_url, "fill-2").values()) == 0


def test_shared_fill_on_sqlite_is_a_usage_error(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    stored_pairs(db, 2)
    result = invoke(
        "calibrate", "--judge", "exact", "--against", "length:max_words=3", "--db", db, "--shared-run", "r"
    )
    assert result.exit_code == 2 and "PostgreSQL" in result.stderr
