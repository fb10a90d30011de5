"""schema judge: full JSON Schema validation, errors with JSON paths, schema checked first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_connect.errors import CaseDataError, ConfigurationError
from llm_connect.grading import Case, JudgeContext, build_judge
from llm_connect.scoring.rules import SchemaScorer

PERSON = {
    "type": "object",
    "required": ["name", "age"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}


def test_valid_instance_scores_one() -> None:
    result = SchemaScorer(PERSON).score('{"name": "Ada", "age": 36}', prompt="")
    assert result.value == 1.0
    assert result.details["valid"] is True and result.details["errors"] == []
    assert result.details["dialect"] == "Draft202012"


def test_every_error_is_listed_with_its_json_path() -> None:
    text = '{"age": -1, "tags": ["ok", 7], "extra": true}'
    result = SchemaScorer(PERSON).score(text, prompt="")
    assert result.value == 0.0
    found = {(e["path"], e["validator"]) for e in result.details["errors"]}
    assert found == {
        ("$", "required"),
        ("$", "additionalProperties"),
        ("$.age", "minimum"),
        ("$.tags[1]", "type"),
    }


def test_keywords_beyond_type_and_required_are_enforced() -> None:
    schema = {"type": "object", "properties": {"id": {"pattern": "^[a-z]+$"}, "n": {"enum": [1, 2]}}}
    result = SchemaScorer(schema).score('{"id": "ABC", "n": 3}', prompt="")
    assert {e["validator"] for e in result.details["errors"]} == {"pattern", "enum"}


def test_non_json_response_scores_zero_with_the_parse_error() -> None:
    result = SchemaScorer(PERSON).score("The person is Ada, 36.", prompt="")
    assert result.value == 0.0
    assert "Expecting value" in result.details["parse_error"]


def test_fenced_json_is_accepted() -> None:
    result = SchemaScorer(PERSON).score('```json\n{"name": "Ada", "age": 36}\n```', prompt="")
    assert result.value == 1.0 and result.details["fenced"] is True


def test_invalid_schema_fails_at_build_time() -> None:
    with pytest.raises(ConfigurationError, match="invalid JSON schema"):
        build_judge({"name": "schema", "args": {"schema": {"type": "not-a-type"}}})


def test_schema_file_is_resolved_against_the_context(tmp_path: Path) -> None:
    (tmp_path / "person.json").write_text(json.dumps(PERSON))
    judge = build_judge("schema:person.json", JudgeContext(base_dir=tmp_path))
    assert judge.scorer.spec == {"name": "schema", "args": {"schema": str(tmp_path / "person.json")}}
    assert judge.scorer.score('{"name": "Ada", "age": 1}', prompt="").value == 1.0


def test_missing_or_broken_schema_file_fails_at_build_time(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read JSON schema file"):
        build_judge("schema:nope.json", JudgeContext(base_dir=tmp_path))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigurationError, match="is not JSON"):
        build_judge("schema:bad.json", JudgeContext(base_dir=tmp_path))


def test_unknown_draft_fails_at_build_time() -> None:
    with pytest.raises(ConfigurationError, match="unknown draft"):
        build_judge({"name": "schema", "args": {"schema": PERSON, "draft": "2042"}})


def test_draft_option_selects_the_dialect() -> None:
    scorer = SchemaScorer({"type": "integer"}, draft="draft-07")
    result = scorer.score("3", prompt="")
    assert result.value == 1.0 and result.details["dialect"] == "Draft7"


def test_check_formats_asserts_format_keywords() -> None:
    schema = {"type": "string", "format": "email"}
    assert SchemaScorer(schema).score('"nope"', prompt="").value == 1.0  # annotation only by default
    assert SchemaScorer(schema, check_formats=True).score('"nope"', prompt="").value == 0.0


def test_schema_from_the_case_inline_or_path(tmp_path: Path) -> None:
    scorer = SchemaScorer(context=JudgeContext(base_dir=tmp_path))
    inline = Case(id="c1", prompt="p", expected={"schema": {"type": "array"}})
    assert scorer.score("[1]", prompt="p", case=inline).value == 1.0
    (tmp_path / "s.json").write_text('{"type": "object"}')
    by_path = Case(id="c2", prompt="p", expected={"schema": "s.json"})
    assert scorer.score("[1]", prompt="p", case=by_path).value == 0.0


def test_judge_option_overrides_the_case_schema() -> None:
    case = Case(id="c1", prompt="p", expected={"schema": {"type": "array"}})
    assert SchemaScorer({"type": "object"}).score("{}", prompt="p", case=case).value == 1.0


def test_no_schema_anywhere_is_a_per_case_error_naming_case_and_field() -> None:
    judge = build_judge("schema")  # building succeeds: cases may carry their schema
    with pytest.raises(CaseDataError) as info:
        judge.scorer.score("{}", prompt="p", case=Case(id="case-7", prompt="p", expected={"answer": "x"}))
    assert info.value.case_id == "case-7" and info.value.field == "expected.schema"
    assert "case-7" in str(info.value)


def test_invalid_case_schema_is_a_per_case_error() -> None:
    case = Case(id="c9", prompt="p", expected={"schema": {"type": 12}})
    with pytest.raises(CaseDataError, match="invalid JSON schema"):
        SchemaScorer().score("{}", prompt="p", case=case)
