"""Case data through ``llm-connect grade``: relative paths in a suite resolve against the
suite's folder, and a rule judge with no data for a case is "not applicable", not a failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_connect.ledger import QualityLedger
from tests.cli._util import invoke, write_suite

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SCHEMA = {
    "type": "object",
    "required": ["city"],
    "properties": {"city": {"type": "string"}},
}


def _case(case_id: str, expected: object, base: str, cand: str, task: str = "mixed") -> dict:
    row: dict = {
        "id": case_id,
        "task": task,
        "prompt": f"prompt for {case_id}",
        "baseline_response": {"text": base, "model": "big"},
        "candidate_response": {"text": cand, "model": "small"},
    }
    if expected is not None:
        row["expected"] = expected
    return row


def _mixed_suite(folder: Path) -> Path:
    """Two JSON cases with a schema (a relative file, an inline one) and two free-text cases without."""
    (folder / "schemas").mkdir(parents=True)
    (folder / "schemas" / "city.schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    rows = [
        _case("json-file", {"schema": "schemas/city.schema.json"}, '{"city": "Paris"}', '{"city": 3}'),
        _case("json-inline", {"schema": SCHEMA}, '{"city": "Rome"}', '{"city": "Roma"}'),
        _case("text-1", {"keywords": ["hello"]}, "hello there", "hello"),
        _case("text-2", None, "fine, thanks", "fine"),
    ]
    return write_suite(folder / "suite.jsonl", rows)


def _grader_counts(db: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in QualityLedger(db).results():
        counts[row.grader_id] = counts.get(row.grader_id, 0) + 1
    return counts


def test_a_mixed_suite_with_the_schema_judge_exits_0_and_reports_not_applicable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = _mixed_suite(tmp_path / "data" / "suites")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the suite's relative schema path must not depend on the cwd
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    result = invoke("grade", str(suite), "--db", db, "--judge", "schema", "--judge", "format:json", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["failures"] == [] and data["exit_code"] == 0
    (na,) = data["not_applicable"]
    assert na["grader_id"] == "schema" and na["cases"] == 2 and na["field"] == "expected.schema"
    assert na["first_case"] == "text-1" and "no JSON schema" in na["reason"]
    by_judge = {s["grader_id"]: s for s in data["stats"]}
    assert by_judge["schema"]["n"] == 2 and by_judge["format:json"]["n"] == 4
    assert by_judge["schema"]["mean"] == pytest.approx(0.5)  # the file schema rejects {"city": 3}
    assert _grader_counts(db) == {"schema": 2, "format:json": 4}
    rows = {r.case_id for r in QualityLedger(db).results() if r.grader_id == "schema"}
    assert rows == {"json-file", "json-inline"}
    assert list(QualityLedger(db).failures(run_id=data["run_id"])) == []


def test_not_applicable_is_shown_in_plain_output(tmp_path: Path) -> None:
    suite = _mixed_suite(tmp_path / "s")
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    result = invoke("grade", str(suite), "--db", db, "--judge", "schema")
    assert result.exit_code == 0, result.output
    assert "judge schema: not applicable to 2 of 4 case(s), e.g. text-1: no JSON schema" in result.stdout
    assert "failure" not in result.stderr


def test_a_judge_with_no_data_anywhere_grades_nothing_and_says_why(tmp_path: Path) -> None:
    rows = [_case(f"t{i}", None, "a", "b") for i in range(3)]
    suite = write_suite(tmp_path / "s.jsonl", rows)
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    result = invoke("grade", str(suite), "--db", db, "--judge", "schema", "--judge", "exact", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [s["grader_id"] for s in data["stats"]] == ["exact"]
    assert data["not_applicable"][0]["cases"] == 3
    assert data["routing"] and all("schema" not in json.dumps(d) for d in data["routing"])


def test_present_but_unusable_case_data_stays_a_failure(tmp_path: Path) -> None:
    rows = [
        _case("ok", {"schema": SCHEMA}, '{"city": "Paris"}', '{"city": "Paris"}'),
        _case("missing-file", {"schema": "schemas/nope.json"}, '{"city": "Paris"}', "{}"),
        _case("no-schema", None, "a", "b"),
    ]
    suite = write_suite(tmp_path / "s.jsonl", rows)
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    result = invoke("grade", str(suite), "--db", db, "--judge", "schema", "--json")
    assert result.exit_code == 3, result.output
    data = json.loads(result.stdout)
    (failure,) = data["failures"]
    assert failure["case_id"] == "missing-file" and failure["error_type"] == "CaseDataError"
    assert str(tmp_path / "schemas" / "nope.json") in failure["message"]  # resolved against the suite
    assert data["not_applicable"][0]["cases"] == 1 and data["not_applicable"][0]["first_case"] == "no-schema"


def test_judge_options_stay_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "suites").mkdir()
    suite = write_suite(
        tmp_path / "suites" / "s.jsonl", [_case("a", None, '{"city": "Paris"}', '{"city": 1}')]
    )
    cwd = tmp_path / "work"
    (cwd / "opts").mkdir(parents=True)
    (cwd / "opts" / "city.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    monkeypatch.chdir(cwd)
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    result = invoke("grade", str(suite), "--db", db, "--judge", "schema:opts/city.json", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["not_applicable"] == [] and data["stats"][0]["mean"] == 0.0


def test_the_example_suite_grades_its_schemas_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    result = invoke(
        "grade",
        str(EXAMPLES / "suite.jsonl"),
        "--db",
        db,
        "--baseline",
        "recorded:gpt-4o",
        "--candidate",
        "recorded:llama-3.1-8b",
        "--judge",
        "schema",
        "--judge",
        "format:json",
        "--json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["failures"] == []
    by_judge: dict[str, int] = {}
    for s in data["stats"]:
        by_judge[s["grader_id"]] = by_judge.get(s["grader_id"], 0) + s["n"]
    assert by_judge == {"schema": 21, "format:json": 66}
    assert data["not_applicable"] == [
        {
            "grader_id": "schema",
            "cases": 45,
            "field": "expected.schema",
            "reason": "no JSON schema: give the judge option 'schema' or the case field expected.schema",
            "first_case": "support-password-reset-email-missing",
        }
    ]
