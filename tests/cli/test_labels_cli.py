"""``llm-connect labels import|export|status`` on SQLite and PostgreSQL (contracts/labels.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger
from tests.cli._util import invoke

HEADER = "task,case_id,candidate,preference,score,annotator,note\n"
GOOD = [
    "qa,c0,small,candidate,,ana,\n",
    'qa,c1,openai:small,,0.75,ana,"longer, but right"\n',
    "qa,c0,small,baseline,,bob,\n",
    "qa,c1,small,tie,,bob,\n",
    "qa,c2,small,tie,,,no annotator on the line\n",
]


@pytest.fixture
def graded(ledger_url: str, make_result: Callable[..., GradingResult]) -> str:
    """A ledger with cases c0..c3 of task qa graded for candidate ``small`` (adapter ``openai:small``)."""
    with QualityLedger(ledger_url) as ledger:
        for i in range(4):
            ledger.record(make_result(0.5, candidate_model="small"), task="qa", run_id="r1", case_id=f"c{i}")
    return ledger_url


def _labels(url: str) -> list[tuple[object, ...]]:
    with QualityLedger(url) as ledger, ledger.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT task, case_id, candidate, annotator, preference, score, note, run_id, created_at "
                "FROM human_labels ORDER BY task, candidate, case_id, annotator"
            )
        )
        return [tuple(r) for r in rows]


def _write(path: Path, *lines: str) -> Path:
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_import_export_import_is_a_no_op(graded: str, tmp_path: Path, fmt: str) -> None:
    source = _write(tmp_path / "labels.csv", HEADER, *GOOD)
    first = invoke("labels", "import", str(source), "--annotator", "cy", "--db", graded)
    assert first.exit_code == 0, first.output
    assert "5 written, 0 unchanged (already stored), 0 replaced" in first.stdout
    stored = _labels(graded)
    assert len(stored) == 5 and {r[2] for r in stored} == {"small"}  # the adapter id became the model
    out = tmp_path / f"export.{fmt}"
    exported = invoke("labels", "export", "-o", str(out), "--db", graded)
    assert exported.exit_code == 0, exported.output
    again = invoke("labels", "import", str(out), "--db", graded, "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout) == {
        "file": str(out),
        "written": 0,
        "unchanged": 5,
        "replaced": 0,
        "blank": 0,
    }
    assert _labels(graded) == stored


def test_export_to_stdout_reimports_into_another_ledger(
    graded: str, tmp_path: Path, sqlite_url: str, make_result: Callable[..., GradingResult]
) -> None:
    invoke("labels", "import", str(_write(tmp_path / "in.csv", HEADER, *GOOD[:4])), "--db", graded)
    printed = invoke("labels", "export", "--task", "qa", "--format", "csv", "--db", graded).stdout
    copy = _write(tmp_path / "copy.csv", printed)
    with QualityLedger(sqlite_url) as other:
        for i in range(4):
            other.record(make_result(0.5, candidate_model="small"), task="qa", run_id="r9", case_id=f"c{i}")
    assert invoke("labels", "import", str(copy), "--db", sqlite_url).exit_code == 0
    with QualityLedger(sqlite_url) as other, QualityLedger(graded) as ledger:
        assert other.labels() == ledger.labels()  # created_at travels with the label


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        ("qa,c9,small,tie,,ana,\n", "case_id", "no grade for case 'c9'"),
        ("qa,c1,large,tie,,ana,\n", "candidate", "no grade for candidate 'large'"),
        ("qa,c1,small,,1.5,ana,\n", "score", "1.5 is outside 0..1"),
        ("qa,c1,small,,lots,ana,\n", "score", "'lots' is not a number"),
        ("qa,c1,small,better,,ana,\n", "preference", "'better' is not one of candidate, baseline, tie"),
        ("qa,c1,small,tie,,,\n", "annotator", "no annotator"),
        ("qa,c1,small,tie,0.5,ana,\n", "score", "either a preference or a score"),
    ],
)
def test_a_bad_line_writes_nothing_and_names_file_line_and_field(
    graded: str, tmp_path: Path, line: str, field: str, words: str
) -> None:
    path = _write(tmp_path / "labels.csv", HEADER, GOOD[0], GOOD[1], line)
    result = invoke("labels", "import", str(path), "--db", graded)
    assert result.exit_code == 2
    assert f"error: {path} line 4 field '{field}': " in result.stderr
    assert words in result.stderr
    assert _labels(graded) == []


def test_a_bad_jsonl_line_names_its_line(graded: str, tmp_path: Path) -> None:
    good = {"task": "qa", "case_id": "c0", "candidate": "small", "preference": "tie", "annotator": "ana"}
    path = _write(
        tmp_path / "labels.jsonl",
        json.dumps(good) + "\n",
        "\n",
        json.dumps({**good, "case_id": "c1", "preference": None, "score": True}) + "\n",
    )
    result = invoke("labels", "import", str(path), "--db", graded)
    assert result.exit_code == 2
    assert f"{path} line 3 field 'score': must be a number from 0 to 1, not True" in result.stderr
    unknown = _write(tmp_path / "x.jsonl", json.dumps({**good, "verdict": "A"}) + "\n")
    assert (
        "line 1 field 'verdict': unknown field"
        in invoke("labels", "import", str(unknown), "--db", graded).stderr
    )
    assert _labels(graded) == []


def test_a_conflict_is_refused_naming_both_and_replace_says_how_many(graded: str, tmp_path: Path) -> None:
    invoke("labels", "import", str(_write(tmp_path / "a.csv", HEADER, *GOOD[:4])), "--db", graded)
    changed = _write(
        tmp_path / "b.csv",
        HEADER,
        "qa,c3,small,tie,,ana,\n",
        "qa,c0,small,tie,,ana,\n",
        "qa,c1,small,,0.5,bob,\n",
    )
    refused = invoke("labels", "import", str(changed), "--db", graded)
    assert refused.exit_code == 2
    assert f"{changed} line 3: a different label is stored" in refused.stderr
    assert (
        "stored preference 'candidate', new preference 'tie' (2 labels of the batch conflict)"
        in refused.stderr
    )
    assert len(_labels(graded)) == 4  # c3 was not written either
    replaced = invoke("labels", "import", str(changed), "--db", graded, "--replace")
    assert replaced.exit_code == 0, replaced.output
    assert "1 written, 0 unchanged (already stored), 2 replaced" in replaced.stdout
    values = {(r[1], r[3]): (r[4], r[5]) for r in _labels(graded)}
    assert values[("c0", "ana")] == ("tie", None) and values[("c1", "bob")] == (None, 0.5)


def test_status_counts_and_agreement(graded: str, tmp_path: Path) -> None:
    invoke("labels", "import", str(_write(tmp_path / "a.csv", HEADER, *GOOD[:4])), "--db", graded)
    rows = json.loads(invoke("labels", "status", "--json", "--db", graded).stdout)
    assert rows == [
        {
            "task": "qa",
            "candidate": "small",
            "cases_graded": 4,
            "cases_labelled": 2,
            "annotators": 2,
            "labels": 4,
            "cases_shared": 2,
            "kappa_method": "cohen",
            # ana: candidate, candidate (0.75); bob: baseline, tie -> p_o = 0, p_e = 0: kappa 0
            "kappa": 0.0,
            "observed_agreement": 0.0,
            "sampling": [],  # the label sampler never ran
        }
    ]
    plain = invoke("labels", "status", "--db", graded).stdout
    assert "qa    small      4       2         2           4       0.000 (cohen, 2 cases)" in plain
    assert "chosen by the label sampler" not in plain


def test_a_missing_file_is_exit_2(tmp_path: Path, sqlite_url: str) -> None:
    result = invoke("labels", "import", str(tmp_path / "none.csv"), "--db", sqlite_url)
    assert result.exit_code == 2 and "cannot read the labels file" in result.stderr


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("empty.csv", "", "the labels file is empty"),
        ("blank.jsonl", "\n\n", "the labels file is empty"),
        ("header.csv", HEADER, "the labels file holds a header but no label rows"),
        (
            "sheet.csv",
            "task,case_id,candidate,prompt,answer_1,answer_2,better,annotator,note,run_id\n"
            "qa,c0,small,q,a,b,,,,\nqa,c1,small,q,a,b,,,,\n",
            "no row has a label (2 rows, all blank): fill 'better' with 1, 2 or tie",
        ),
    ],
)
def test_a_file_with_no_label_is_exit_2_naming_the_file(
    graded: str, tmp_path: Path, name: str, content: str, why: str
) -> None:
    source = _write(tmp_path / name, content)
    result = invoke("labels", "import", str(source), "--db", graded)
    assert result.exit_code == 2, result.output
    assert f"{source}: {why}; nothing written" in result.stderr
    assert "written," not in result.stdout and _labels(graded) == []


def test_a_sheet_with_some_blank_rows_imports_the_rest(graded: str, tmp_path: Path) -> None:
    sheet = _write(
        tmp_path / "sheet.csv",
        "task,case_id,candidate,prompt,answer_1,answer_2,better,annotator,note,run_id\n",
        "qa,c0,small,q,a,b,tie,ana,,\n",
        "qa,c1,small,q,a,b,,,,\n",
    )
    result = invoke("labels", "import", str(sheet), "--db", graded)
    assert result.exit_code == 0, result.output
    assert "1 written" in result.stdout and "1 row(s) with no 'better' yet" in result.stderr


@pytest.mark.parametrize("args", [["labels", "--help"], ["labels", "import", "--help"]])
def test_labels_help_imports_nothing_heavy(args: list[str]) -> None:
    from tests.cli.test_help import HEAVY, imported_modules

    rc, names, out = imported_modules(*args)
    assert rc == 0 and "labels" in out
    assert not names & set(HEAVY), sorted(names & set(HEAVY))
