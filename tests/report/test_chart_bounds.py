"""A report of a suite whose good cases came first still draws its chart.

The anytime-valid lower bound is a running maximum: after 32 identical answers and then 8
different ones, the lower bound can sit above today's mean. matplotlib refuses a negative error
bar, which used to fail the whole report.
"""

from __future__ import annotations

from pathlib import Path

from llm_connect.ledger import QualityLedger
from llm_connect.report import render_report
from tests.cli._util import invoke, pair_suite


def test_a_mean_below_its_running_lower_bound_still_charts(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    suite = pair_suite(tmp_path / "s.jsonl", 40, same=32)
    assert invoke("grade", str(suite), "--db", db).exit_code == 0
    with QualityLedger(db) as ledger:
        (summary,) = ledger.summary()
        html = render_report(ledger)
    assert "<svg" in html and "cost against quality" in html
    assert summary.n == 40
