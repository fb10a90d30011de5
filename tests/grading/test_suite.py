"""Suite loading: JSONL and YAML, validated before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_connect.errors import SuiteError
from llm_connect.grading import Suite, load_suite


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_jsonl_cases_keep_every_field(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {
                "id": "a",
                "prompt": "Say hi",
                "task": "greet",
                "system_prompt": "Be brief.",
                "expected": {"keywords": ["hi"]},
                "tags": ["x", "y"],
                "responses": {
                    "gold": "hi",
                    "cheap": {
                        "text": "hello",
                        "latency_ms": 12,
                        "cost_usd": 0.001,
                        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                    },
                },
                "metadata": {"anything": [1, 2]},
            },
            {"id": 7, "prompt": "Second"},
        ],
    )
    suite = load_suite(path)
    a, b = suite.cases
    assert (a.id, a.prompt, a.task, a.system_prompt) == ("a", "Say hi", "greet", "Be brief.")
    assert a.expected == {"keywords": ["hi"]} and a.tags == ("x", "y") and a.line == 1
    assert a.responses == {"gold": "hi", "cheap": "hello"}
    cheap = suite.recorded(a, "cheap")
    assert (cheap.model, cheap.provider, cheap.latency_ms, cheap.cost_usd) == (
        "cheap",
        "recorded",
        12.0,
        0.001,
    )
    assert cheap.usage is not None and cheap.usage.completion_tokens == 1
    assert b.id == "7" and b.task == "default" and b.line == 2
    assert suite.tasks == ["greet", "default"]


def test_shorthand_fields_become_baseline_and_candidate(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {
                "id": "a",
                "prompt": "p",
                "baseline_response": "x",
                "candidate_response": {"text": "y", "model": "m-2"},
            }
        ],
    )
    suite = load_suite(path)
    assert suite.recorded_names() == {"baseline", "candidate"}
    assert suite.recorded("a", "baseline").model == "baseline"
    assert suite.recorded("a", "candidate").model == "m-2"  # the object's model wins over the name


def test_task_defaults_case_then_file_then_argument(tmp_path: Path) -> None:
    jsonl = write_jsonl(
        tmp_path / "s.jsonl", [{"id": "a", "prompt": "p"}, {"id": "b", "prompt": "p", "task": "own"}]
    )
    assert [c.task for c in load_suite(jsonl, default_task="cli").cases] == ["cli", "own"]
    yml = tmp_path / "s.yaml"
    yml.write_text("task: file\ncases:\n  - id: a\n    prompt: p\n", encoding="utf-8")
    assert load_suite(yml, default_task="cli").cases[0].task == "file"


def test_yaml_list_and_mapping_forms_with_lines(tmp_path: Path) -> None:
    yml = tmp_path / "s.yml"
    yml.write_text("- id: a\n  prompt: first\n\n- id: b\n  prompt: second\n", encoding="utf-8")
    suite = load_suite(yml)
    assert [(c.id, c.line) for c in suite.cases] == [("a", 1), ("b", 4)]
    mapping = tmp_path / "m.yaml"
    mapping.write_text("metadata: {owner: qa}\ncases:\n- id: a\n  prompt: p\n", encoding="utf-8")
    loaded = load_suite(mapping)
    assert loaded.metadata == {"owner": "qa"} and loaded.cases[0].line == 3


def test_two_cases_sharing_a_prompt_keep_their_own_recordings(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"id": "a", "prompt": "same", "responses": {"m": "one"}},
            {"id": "b", "prompt": "same", "responses": {"m": "two"}},
        ],
    )
    suite = load_suite(path)
    assert [suite.recorded(c, "m").text for c in suite.cases] == ["one", "two"]


@pytest.mark.parametrize(
    ("content", "line", "field", "words"),
    [
        (b'{"id": "a", "prompt": "p"}\n{"id": "b", "prompt": \n', 2, None, "not valid JSON"),
        (b'{"id": "a", "prompt": "p"}\n["not", "an", "object"]\n', 2, None, "must be an object"),
        (b'{"id": "a"}\n', 1, "prompt", "is required"),
        (b'{"id": "a", "prompt": "   "}\n', 1, "prompt", "must not be empty"),
        (b'{"id": "a", "prompt": 5}\n', 1, "prompt", "must be a string"),
        (b'{"prompt": "p"}\n', 1, "id", "is required"),
        (b'{"id": "a", "prompt": "p"}\n\n{"id": "a", "prompt": "q"}\n', 3, "id", "duplicate id 'a'"),
        (b'{"id": "a", "prompt": "p"}\n{"id": "b", "prompt": "caf\xe9"}\n', 2, None, "invalid UTF-8"),
        (b'{"id": "a", "prompt": "p", "promt": "typo"}\n', 1, "promt", "unknown field"),
        (b'{"id": "a", "prompt": "p", "tags": "x"}\n', 1, "tags", "list of strings"),
        (b'{"id": "a", "prompt": "p", "responses": ["x"]}\n', 1, "responses", "mapping"),
        (
            b'{"id": "a", "prompt": "p", "responses": {"m": {"txt": "x"}}}\n',
            1,
            "responses.m",
            "unknown field",
        ),
        (
            b'{"id": "a", "prompt": "p", "responses": {"m": {"text": "x", "cost_usd": -1}}}\n',
            1,
            "responses.m",
            "cost_usd",
        ),
        (b'{"id": true, "prompt": "p"}\n', 1, "id", "string or an integer"),
        (b'{"id": "a", "prompt": "p", "system_prompt": 3}\n', 1, "system_prompt", "must be a string"),
        (
            b'{"id": "a", "prompt": "p", "baseline_response": "x", "responses": {"baseline": "y"}}\n',
            1,
            "baseline_response",
            "twice",
        ),
    ],
)
def test_bad_input_names_file_line_and_field(
    tmp_path: Path, content: bytes, line: int, field: str | None, words: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), line, field)
    assert words in str(err) and str(path) in str(err)


def test_bad_yaml_reports_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("- id: a\n  prompt: p\n- id: b\n  prompt: [unclosed\n", encoding="utf-8")
    with pytest.raises(SuiteError, match="not valid YAML") as info:
        load_suite(path)
    assert info.value.line is not None
    typo = tmp_path / "typo.yaml"
    typo.write_text("case:\n- id: a\n  prompt: p\n", encoding="utf-8")
    with pytest.raises(SuiteError) as info2:
        load_suite(typo)
    assert info2.value.field == "case"


def test_missing_file_and_empty_suite(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="no such file"):
        load_suite(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(SuiteError, match="no cases"):
        load_suite(empty)


def test_unknown_recorded_name_is_a_suite_error_naming_the_case(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [{"id": "a", "prompt": "p", "responses": {"m": "x"}}, {"id": "b", "prompt": "q"}],
    )
    suite = load_suite(path)
    with pytest.raises(SuiteError, match="'b' has no recorded response 'm'") as info:
        suite.check_recorded("m")
    assert info.value.line == 2


def test_single_prompt_suite() -> None:
    suite = Suite.single("hello", task="t")
    assert len(suite) == 1 and suite.cases[0].prompt == "hello" and suite.cases[0].task == "t"
    with pytest.raises(SuiteError):
        Suite.single("  ")


def test_relative_paths_in_expected_resolve_against_the_suite_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "suites" / "nested"
    folder.mkdir(parents=True)
    absolute = str(tmp_path / "abs.schema.json")
    path = write_jsonl(
        folder / "s.jsonl",
        [
            {"id": "rel", "prompt": "p", "expected": {"schema": "schemas/a.json", "persona": "../p.yaml"}},
            {"id": "abs", "prompt": "p", "expected": {"schema": absolute, "keywords": ["x/y"]}},
            {"id": "inline", "prompt": "p", "expected": {"schema": {"type": "object"}, "answer": "a/b"}},
            {"id": "text", "prompt": "p", "expected": "schemas/a.json"},
        ],
    )
    monkeypatch.chdir(tmp_path)
    cases = {c.id: c for c in load_suite(Path("suites/nested/s.jsonl"))}
    assert cases["rel"].expected == {
        "schema": str(folder / "schemas" / "a.json"),
        "persona": str(folder / ".." / "p.yaml"),
    }
    assert cases["abs"].expected == {"schema": absolute, "keywords": ["x/y"]}
    assert cases["inline"].expected == {"schema": {"type": "object"}, "answer": "a/b"}
    assert cases["text"].expected == "schemas/a.json"  # a string ``expected`` is an answer, not a path
    assert load_suite(path).cases[0].expected == cases["rel"].expected


# -- JSONL lines end at "\n" only; per-case metadata (issue 10, item 7) ------------------


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\t"])
def test_line_break_characters_inside_a_json_string_do_not_end_the_line(tmp_path: Path, char: str) -> None:
    path = tmp_path / "s.jsonl"
    # Raw, not escaped: json.dumps(ensure_ascii=False) writes U+2028 as it is, other tools the rest.
    lines = [
        '{"id": "a", "prompt": "first"}',
        '{"id": "b", "prompt": "before' + char + 'after", "metadata": {"note": "x' + char + 'y"}}',
        '{"id": "c", "prompt": "p", "tags": 3}',
    ]
    path.write_bytes("\n".join(lines).encode("utf-8"))
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert (info.value.line, info.value.field) == (3, "tags")  # line numbers count "\n" only
    path.write_bytes("\n".join(lines[:2]).encode("utf-8"))
    a, b = load_suite(path).cases
    assert (a.line, b.line) == (1, 2)
    assert b.prompt == f"before{char}after" and b.metadata == {"note": f"x{char}y"}


def test_u2028_written_by_json_dumps_loads(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    row = {"id": "a", "prompt": "line\u2028separator\u2029paragraph"}
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    assert load_suite(path).cases[0].prompt == row["prompt"]


def test_crlf_files_still_load_with_their_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"id": "a", "prompt": "p"}\r\n\r\n{"id": "b", "prompt": "q\\r"}\r\n')
    a, b = load_suite(path).cases
    assert (a.line, b.line, b.prompt) == (1, 3, "q\r")
    path.write_bytes(b'{"id": "a", "prompt": "p"}\r\n{"id": "b", "prompt": \r\n')
    with pytest.raises(SuiteError, match="not valid JSON") as info:
        load_suite(path)
    assert info.value.line == 2


def test_metadata_is_kept_on_the_case_read_only(tmp_path: Path) -> None:
    meta = {
        "source": "ticket-42",
        "difficulty": 3,
        "weights": [0.5, 1.5],
        "nested": {"ok": True, "none": None},
    }
    path = write_jsonl(
        tmp_path / "s.jsonl", [{"id": "a", "prompt": "p", "metadata": meta}, {"id": "b", "prompt": "q"}]
    )
    a, b = load_suite(path).cases
    assert a.metadata == meta and dict(b.metadata) == {}
    with pytest.raises(TypeError):
        a.metadata["source"] = "changed"  # type: ignore[index]
    assert json.loads(json.dumps(dict(a.metadata))) == meta


def test_yaml_case_metadata_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("- id: a\n  prompt: p\n  metadata:\n    owner: qa\n    sizes: [1, 2]\n", encoding="utf-8")
    assert load_suite(path).cases[0].metadata == {"owner": "qa", "sizes": [1, 2]}


def test_a_case_with_metadata_survives_pickle_deepcopy_and_replace() -> None:
    import copy
    import dataclasses
    import pickle

    from llm_connect.grading import Case

    case = Case(id="a", prompt="p", metadata={"k": [1, {"x": 2}]}, line=4)
    for clone in (pickle.loads(pickle.dumps(case)), copy.deepcopy(case), dataclasses.replace(case, task="t")):
        assert clone.metadata == {"k": [1, {"x": 2}]} and clone.line == 4
    given = {"k": [1]}
    frozen = Case(id="b", prompt="p", metadata=given)
    given["k"].append(2)  # the case holds its own copy
    assert frozen.metadata == {"k": [1]}


@pytest.mark.parametrize(
    ("metadata", "words"),
    [
        (b'"text"', "must be a JSON object"),
        (b"[1, 2]", "must be a JSON object"),
        (b"null", "must be a JSON object"),
        (b'{"score": NaN}', "metadata.score is nan"),
        (b'{"deep": {"list": [1, Infinity]}}', "metadata.deep.list[1] is inf"),
        (b'{"x": -Infinity}', "NaN and infinities"),
    ],
)
def test_bad_metadata_names_file_line_and_field(tmp_path: Path, metadata: bytes, words: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(
        b'{"id": "a", "prompt": "p"}\n{"id": "b", "prompt": "p", "metadata": ' + metadata + b"}\n"
    )
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), 2, "metadata")
    assert words in str(err) and f"{path}:2" in str(err)


@pytest.mark.parametrize(
    ("yaml_metadata", "words"),
    [
        ("when: 2024-06-01", "metadata.when is a date"),
        ("1: one", "key 1 that is not a string"),
        ("score: .nan", "NaN and infinities"),
        ("tags: !!set {a, b}", "metadata.tags is a set"),
    ],
)
def test_bad_yaml_metadata_names_the_field(tmp_path: Path, yaml_metadata: str, words: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        f"- id: a\n  prompt: p\n- id: b\n  prompt: p\n  metadata:\n    {yaml_metadata}\n", encoding="utf-8"
    )
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert (info.value.line, info.value.field) == (3, "metadata")
    assert words in str(info.value)
