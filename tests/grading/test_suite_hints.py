"""An unknown suite field is refused with the closest known field ("did you mean 'prompt'?")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_connect.errors import SuiteError
from llm_connect.grading import load_suite


def jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def refused(path: Path) -> SuiteError:
    with pytest.raises(SuiteError) as raised:
        load_suite(path)
    return raised.value


def test_a_misspelt_field_names_file_line_and_the_field_meant(tmp_path: Path) -> None:
    suite = jsonl(
        tmp_path / "x.jsonl", [{"id": 1, "prompt": "a"}, {"id": 2, "prompt": "b"}, {"id": 3, "promt": "c"}]
    )
    error = refused(suite)
    assert (error.path, error.line, error.field) == (str(suite), 3, "promt")
    assert str(error) == (
        f"{suite}:3 field 'promt': unknown field; did you mean 'prompt'? (free-form data goes under 'metadata')"
    )


@pytest.mark.parametrize(
    ("field", "meant"),
    [
        ("expcted", "expected"),
        ("system_promt", "system_prompt"),
        ("Tags", "tags"),
        ("input", "prompt"),  # Inspect
        ("target", "expected"),  # Inspect
        ("ideal", "expected"),  # OpenAI evals
        ("system", "system_prompt"),
    ],
)
def test_near_misses_and_other_tools_names_get_the_field_meant(
    tmp_path: Path, field: str, meant: str
) -> None:
    suite = jsonl(tmp_path / "s.jsonl", [{"id": 1, "prompt": "a", field: "x"}])
    assert f"field {field!r}: unknown field; did you mean {meant!r}?" in str(refused(suite))


def test_a_field_close_to_nothing_points_to_metadata(tmp_path: Path) -> None:
    suite = jsonl(tmp_path / "s.jsonl", [{"id": 1, "prompt": "a", "colour": "red"}])
    message = str(refused(suite))
    assert "did you mean" not in message and "free-form data goes under 'metadata'" in message


def test_free_form_data_under_metadata_is_kept(tmp_path: Path) -> None:
    suite = jsonl(tmp_path / "s.jsonl", [{"id": 1, "prompt": "a", "metadata": {"colour": "red", "promt": 1}}])
    assert load_suite(suite).cases[0].metadata == {"colour": "red", "promt": 1}


def test_a_yaml_top_level_field_and_a_recorded_response_field_get_hints_too(tmp_path: Path) -> None:
    top = tmp_path / "s.yaml"
    top.write_text("case:\n  - id: 1\n    prompt: a\n", encoding="utf-8")
    assert "unknown top-level field; did you mean 'cases'?" in str(refused(top))
    recorded = jsonl(tmp_path / "r.jsonl", [{"id": 1, "prompt": "a", "responses": {"b": {"txt": "x"}}}])
    assert "unknown field 'txt' in a recorded response; did you mean 'text'?" in str(refused(recorded))
