"""The report shows the judge's and the people's estimate side by side (issue 23, item 3)."""

from __future__ import annotations

from pathlib import Path

from llm_connect.labels import HumanLabel, choose_for_labels
from llm_connect.ledger import QualityLedger
from llm_connect.report import render_report
from tests.cli._util import invoke, pair_suite


def _graded(tmp_path: Path) -> str:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    suite = pair_suite(tmp_path / "s.jsonl", 40, same=32)  # the judge (exact) says 0.8
    assert invoke("grade", str(suite), "--db", db).exit_code == 0
    return db


def test_people_row_beside_the_judge_once_cases_are_sampled_and_labelled(tmp_path: Path) -> None:
    db = _graded(tmp_path)
    with QualityLedger(db) as ledger:
        chosen = choose_for_labels(ledger, task="qa", candidate="small", grader_id="exact", rate=0.5, seed=3)
        assert chosen
        # people think the candidate is only half as good as the judge does
        ledger.record_labels(
            [
                HumanLabel("qa", case_id, "small", "ana", preference="tie" if i % 2 else "baseline")
                for i, case_id in enumerate(chosen)
            ]
        )
        html = render_report(ledger, min_quality=0.4)
    assert "what people would say" in html
    assert "judge alone 0.800 | people " in html and f"{len(chosen)} labels used" in html


def test_no_people_row_without_sampling_or_labels(tmp_path: Path) -> None:
    db = _graded(tmp_path)
    with QualityLedger(db) as ledger:
        html = render_report(ledger)
    assert "what people would say" not in html


def test_sampled_but_unlabelled_says_no_labels_yet(tmp_path: Path) -> None:
    db = _graded(tmp_path)
    with QualityLedger(db) as ledger:
        chosen = choose_for_labels(ledger, task="qa", candidate="small", grader_id="exact", rate=0.5, seed=3)
        html = render_report(ledger)
    assert "no human labels yet" in html and f"{len(chosen)} pending" in html
