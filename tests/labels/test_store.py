"""The labels store over the ledger's engine, on SQLite and PostgreSQL (contracts/labels.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from llm_connect.errors import LabelConflictError, LabelError, LedgerError
from llm_connect.grading import GradingResult
from llm_connect.labels import HumanLabel, LabelStore, LabelWrite, label_status
from llm_connect.ledger import QualityLedger, RecordItem


def _grade(ledger: QualityLedger, make_result: Callable[..., GradingResult], cases: int = 4) -> None:
    """``cases`` graded cases of task ``qa`` for candidate ``small`` (asked as ``openai:small``)."""
    for i in range(cases):
        ledger.record(
            make_result(0.5, candidate_model="small", baseline_model="big"),
            task="qa",
            run_id="r1",
            case_id=f"c{i}",
        )


def _label(case: str = "c0", who: str = "ana", **value: Any) -> HumanLabel:
    candidate = value.pop("candidate", "small")
    if not value:
        value = {"preference": "candidate"}
    return HumanLabel("qa", case, candidate, who, **value)


def _grade_rows(ledger: QualityLedger) -> list[Any]:
    with ledger.engine.connect() as conn:
        grades = conn.execute(text("SELECT * FROM grades ORDER BY id")).all()
        stats = conn.execute(text("SELECT * FROM grade_stats")).all()
        cases = conn.execute(text("SELECT * FROM case_stats ORDER BY case_key")).all()
    return [grades, stats, cases]


def test_labels_are_stored_and_read_back_with_the_model_name(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    _grade(ledger, make_result)
    result = ledger.record_labels(
        [_label("c0"), _label("c1", score=0.25, note="terse", run_id="r1", candidate="openai:small")]
    )
    assert result == LabelWrite(written=2, unchanged=0, replaced=0)
    stored = ledger.labels(task="qa")
    assert [(lb.case_id, lb.candidate, lb.preference, lb.score, lb.note, lb.run_id) for lb in stored] == [
        ("c0", "small", "candidate", None, None, None),
        ("c1", "small", None, 0.25, "terse", "r1"),
    ]
    assert all(lb.created_at is not None and lb.created_at.tzinfo is not None for lb in stored)
    assert ledger.labels(candidate="other") == []


def test_the_identical_label_again_is_a_no_op(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    _grade(ledger, make_result)
    ledger.record_labels([_label("c0"), _label("c1", score=0.5)])
    again = ledger.record_labels(
        [_label("c0", candidate="openai:small"), _label("c1", score=0.5), _label("c2")]
    )
    assert again == LabelWrite(written=1, unchanged=2, replaced=0)
    assert len(ledger.labels()) == 3


def test_a_different_label_is_refused_naming_both_and_replace_overwrites(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    _grade(ledger, make_result)
    ledger.record_labels([_label("c0"), _label("c1")])
    with pytest.raises(LabelConflictError) as info:
        ledger.record_labels([_label("c2"), _label("c0", preference="baseline"), _label("c1", score=0.1)])
    err = info.value
    assert "stored preference 'candidate'" in str(err) and "new preference 'baseline'" in str(err)
    assert (err.stored, err.given, err.count, err.index) == (
        "preference 'candidate'",
        "preference 'baseline'",
        2,
        1,
    )
    assert len(ledger.labels()) == 2  # nothing of the batch, c2 included
    replaced = ledger.record_labels(
        [_label("c2"), _label("c0", preference="baseline"), _label("c1", score=0.1)], replace=True
    )
    assert replaced == LabelWrite(written=1, unchanged=0, replaced=2)
    assert [(lb.case_id, lb.preference, lb.score) for lb in ledger.labels()] == [
        ("c0", "baseline", None),
        ("c1", None, 0.1),
        ("c2", "candidate", None),
    ]


def test_two_different_labels_for_one_key_in_a_batch_are_refused(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    _grade(ledger, make_result)
    with pytest.raises(LabelConflictError, match="given earlier, at label 1"):
        ledger.record_labels(
            [_label("c0"), _label("c0", candidate="openai:small", preference="tie")], replace=True
        )
    assert ledger.labels() == []


@pytest.mark.parametrize(
    ("label", "field", "words"),
    [
        (_label("c9"), "case_id", "no grade for case 'c9' of task 'qa'"),
        (HumanLabel("other", "c0", "small", "ana", preference="tie"), "case_id", "of task 'other'"),
        (_label("c0", candidate="openai:big"), "candidate", "no grade for candidate 'openai:big'"),
    ],
)
def test_a_label_without_a_grade_writes_nothing(
    ledger: QualityLedger,
    make_result: Callable[..., GradingResult],
    label: HumanLabel,
    field: str,
    words: str,
) -> None:
    _grade(ledger, make_result)
    with pytest.raises(LabelError, match=words) as info:
        ledger.record_labels([_label("c1"), label])
    assert (info.value.field, info.value.index) == (field, 1)
    assert isinstance(info.value, LedgerError)  # the CLI maps it to exit 2
    assert ledger.labels() == []


def test_labels_never_change_a_grade(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    _grade(ledger, make_result)
    before = _grade_rows(ledger)
    ledger.record_labels([_label("c0"), _label("c1", score=0.0)])
    ledger.record_labels([_label("c0", preference="baseline")], replace=True)
    assert _grade_rows(ledger) == before


def test_the_database_refuses_a_row_with_both_or_neither_value(ledger: QualityLedger) -> None:
    insert = (
        "INSERT INTO human_labels (task, case_id, candidate, annotator, preference, score, created_at) "
        "VALUES ('qa', 'c0', 'small', 'ana', :p, :s, '2026-01-01 00:00:00')"
    )
    for params in (
        {"p": "tie", "s": 0.5},
        {"p": None, "s": None},
        {"p": "better", "s": None},
        {"p": None, "s": 2},
    ):
        with pytest.raises(Exception, match=r"(?i)check"), ledger.engine.begin() as conn:
            conn.execute(text(insert), params)


def test_counts_case_labels_and_status_per_candidate(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    _grade(ledger, make_result)
    ledger.record(make_result(0.9, candidate_model="tiny"), task="qa", run_id="r1", case_id="c0")
    ledger.record_labels(
        [
            _label("c0", "ana"),
            _label("c0", "bob", preference="baseline"),
            _label("c0", "cy", score=0.9),
            _label("c1", "ana", preference="tie"),
        ]
    )
    store = LabelStore(ledger.engine)
    cases = {c.case_id: c for c in store.case_labels(task="qa", candidate="small")}
    assert cases["c0"].annotators == 3 and cases["c0"].preference == "tie"  # one each: no majority
    assert cases["c0"].verdict == "candidate" and cases["c0"].mean_score == 0.9
    assert cases["c1"].preference == "tie" and cases["c1"].mean_score is None
    rows = {(r.task, r.candidate): r for r in label_status(ledger)}
    small, tiny = rows[("qa", "small")], rows[("qa", "tiny")]
    assert (small.cases_graded, small.cases_labelled, small.annotators, small.labels) == (4, 2, 3, 4)
    assert (small.cases_shared, small.kappa_method) == (1, "fleiss")
    assert (tiny.cases_graded, tiny.cases_labelled, tiny.kappa_method, tiny.kappa) == (1, 0, None, None)


def test_a_large_batch_checks_in_chunks(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    result = make_result(0.5, candidate_model="small")
    ledger.record_batch([RecordItem(result, "qa", "r1", f"c{i}", ()) for i in range(1100)])
    # 1,100 cases: three chunks of the existence and conflict checks' IN lists
    labels = [_label(f"c{i}", "ana", score=(i % 11) / 10) for i in range(1100)]
    assert ledger.record_labels(labels) == LabelWrite(1100, 0, 0)
    assert ledger.record_labels(labels) == LabelWrite(0, 1100, 0)
    with pytest.raises(LabelError, match="'c1100'"):
        ledger.record_labels([*labels, _label("c1100")])
    assert len(ledger.labels()) == 1100


def test_the_documented_query_runs(ledger: QualityLedger, make_result: Callable[..., GradingResult]) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "ledger.md").read_text(encoding="utf-8")
    section = doc.split("### `human_labels`", 1)[1].split("\n## ", 1)[0]
    query = section.split("```sql\n", 1)[1].split("```", 1)[0]
    _grade(ledger, make_result)
    ledger.record_labels(
        [_label("c0", "ana"), _label("c0", "bob", score=0.5), _label("c1", "ana", score=0.2)]
    )
    with ledger.engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(text(query))]
    assert rows == [("qa", "small", "c0", 1, 0, 1, 2), ("qa", "small", "c1", 0, 1, 0, 1)]
