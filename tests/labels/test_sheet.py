"""Labelling sheets: ``labels queue --sheet FILE`` writes the chosen cases waiting for a label
with both answers in a blind order; ``labels import`` reads the filled sheet back
(contracts/labels.md, S11-S13), on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_connect.cli import app
from llm_connect.errors import LabelError
from llm_connect.grading import GradingResult
from llm_connect.labels import SamplingStore, import_labels, read_labels
from llm_connect.labels._sheet import SHEET_FIELDS, candidate_first
from llm_connect.ledger import QualityLedger, RecordItem

N = 60


def _grade(ledger: QualityLedger, make_result: Callable[..., GradingResult]) -> None:
    ledger.record_batch(
        [
            RecordItem(
                make_result(
                    0.5,
                    candidate_model="small",
                    baseline_model="big",
                    grader_id="g",
                    prompt=f"question {i}",
                    baseline_text=f"baseline answer {i}",
                    candidate_text=f"candidate answer {i}",
                ),
                "qa",
                "r1",
                f"c{i:03d}",
            )
            for i in range(N)
        ]
    )


def _queue(ledger: QualityLedger, sheet: Path) -> list[str]:
    args = ["labels", "queue", "-t", "qa", "-c", "small", "-j", "g", "--rate", "0.5", "--seed", "3"]
    out = CliRunner().invoke(app, [*args, "--sheet", str(sheet), "--db", ledger.url, "--json"])
    assert out.exit_code == 0, out.output
    found = json.loads(out.stdout)
    assert found["sheet"] == {"path": str(sheet), "rows": len(found["cases"])}
    return list(found["cases"])


def _rows(path: Path) -> list[dict[str, str]]:
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_the_sheet_lists_the_waiting_cases_in_order_with_both_answers_blind(
    ledger: QualityLedger, make_result: Callable[..., GradingResult], tmp_path: Path, suffix: str
) -> None:
    _grade(ledger, make_result)
    sheet = tmp_path / f"sheet{suffix}"
    cases = _queue(ledger, sheet)
    rows = _rows(sheet)
    assert cases == SamplingStore(ledger.engine).queue("qa", "small", "g") and len(cases) > 10
    assert [r["case_id"] for r in rows] == cases
    assert all(list(r) == list(SHEET_FIELDS) for r in rows)
    firsts = set()
    for r in rows:
        i = int(r["case_id"][1:])
        first = candidate_first("qa", r["case_id"], "small")
        firsts.add(first)
        answers = (f"candidate answer {i}", f"baseline answer {i}")
        assert (r["answer_1"], r["answer_2"]) == (answers if first else answers[::-1])
        assert r["prompt"] == f"question {i}" and r["run_id"] == "r1" and not r["better"]
        assert "small" not in r["answer_1"] + r["answer_2"]  # the file never says which is which
    assert firsts == {True, False}  # both orders occur


def test_a_filled_sheet_imports_as_preferences_and_blank_rows_stay_waiting(
    ledger: QualityLedger, make_result: Callable[..., GradingResult], tmp_path: Path
) -> None:
    _grade(ledger, make_result)
    sheet = tmp_path / "sheet.csv"
    cases = _queue(ledger, sheet)
    rows = _rows(sheet)
    filled = rows[:6]
    for r, better in zip(filled, ["1", "2", "tie", "1", "2", "TIE"], strict=True):
        r["better"] = better
    with sheet.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(SHEET_FIELDS))
        writer.writeheader()
        writer.writerows(rows)
    out = CliRunner().invoke(app, ["labels", "import", str(sheet), "--annotator", "ana", "--db", ledger.url])
    assert out.exit_code == 0, out.output
    assert "6 written" in out.stdout and f"{len(rows) - 6} row(s) with no 'better' yet" in out.stderr
    stored = {lb.case_id: lb for lb in ledger.labels(task="qa")}
    assert set(stored) == {r["case_id"] for r in filled}
    for r in filled:
        first = candidate_first("qa", r["case_id"], "small")
        want = {"1": "candidate" if first else "baseline", "2": "baseline" if first else "candidate"}
        label = stored[r["case_id"]]
        assert label.preference == want.get(r["better"], "tie")
        assert label.annotator == "ana" and label.run_id == "r1" and label.note is None
    # The queue now starts at the first blank row; the context columns are not stored anywhere.
    assert SamplingStore(ledger.engine).queue("qa", "small", "g") == [c for c in cases if c not in stored]
    read = read_labels(sheet, annotator="ana")
    assert [(lb.case_id, lb.preference) for lb in read] == [
        (r["case_id"], stored[r["case_id"]].preference) for r in filled
    ]


def test_a_bad_better_value_names_the_line_and_writes_nothing(
    ledger: QualityLedger, make_result: Callable[..., GradingResult], tmp_path: Path
) -> None:
    _grade(ledger, make_result)
    sheet = tmp_path / "sheet.jsonl"
    _queue(ledger, sheet)
    rows = _rows(sheet)
    rows[0]["better"] = "1"
    rows[2]["better"] = "first"
    sheet.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(LabelError) as err:
        import_labels(ledger, sheet, annotator="ana")
    assert (err.value.path, err.value.line, err.value.field) == (str(sheet), 3, "better")
    assert "'first' is not one of 1, 2, tie" in str(err.value)
    assert ledger.labels() == []
    # A sheet row with a field a sheet does not have is refused too, naming it.
    rows[2]["better"] = "2"
    rows[1]["preference"] = "candidate"
    sheet.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(LabelError, match="labelling sheet's row") as err:
        import_labels(ledger, sheet, annotator="ana")
    assert (err.value.line, err.value.field) == (2, "preference")


def test_a_sheet_that_cannot_be_written_is_an_error_naming_it(
    ledger: QualityLedger, make_result: Callable[..., GradingResult], tmp_path: Path
) -> None:
    _grade(ledger, make_result)
    missing = tmp_path / "no-such-dir" / "sheet.csv"
    args = [
        "labels",
        "queue",
        "-t",
        "qa",
        "-c",
        "small",
        "-j",
        "g",
        "--sheet",
        str(missing),
        "--db",
        ledger.url,
    ]
    out = CliRunner().invoke(app, args)
    assert (
        out.exit_code == 2 and "cannot write the labelling sheet" in out.stderr and str(missing) in out.stderr
    )


def test_a_conversation_case_shows_its_turns_in_the_prompt_column(tmp_path: Path) -> None:
    import dataclasses
    import io

    from llm_connect.report._label_sheet import write_label_sheet
    from llm_connect.types import Conversation
    from tests.fixtures.databases import _make_result
    from tests.report.test_label import TOOL_CONVERSATION

    conversation = Conversation(TOOL_CONVERSATION)
    result = dataclasses.replace(
        _make_result(0.5, prompt="and when?", candidate_model="small", candidate_text="Tuesday, «soon»"),
        conversation=conversation,
    )
    with QualityLedger(f"sqlite:///{tmp_path / 'conv.db'}") as ledger:
        ledger.record_batch([RecordItem(result, task="t", run_id="r", case_id="c")])
        out = io.StringIO()
        assert write_label_sheet(ledger, [("t", "small", "c"), ("t", "small", "gone")], out, "csv") == 1
    (row,) = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert row["prompt"] == (
        'system: be brief\nuser: where is order 7?\nassistant: tool call: lookup({"id":7})\n'
        "tool: shipped\nuser: and when?"
    )
    assert {row["answer_1"], row["answer_2"]} == {"Tuesday, «soon»", "4"}
