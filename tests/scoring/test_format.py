"""format judge: json, xml, yaml, markdown, csv checks with their details."""

from __future__ import annotations

import pytest

from llm_connect.errors import ConfigurationError
from llm_connect.grading import build_judge
from llm_connect.scoring.rules import FormatScorer


def _score(fmt: str, text: str) -> tuple[float, dict]:
    result = FormatScorer(fmt).score(text, prompt="give me data")
    return result.value, dict(result.details)


@pytest.mark.parametrize("text", ['{"key": "value"}', "[1, 2, 3]", '  {"nested": {"a": [1, null]}}\n'])
def test_json_valid(text: str) -> None:
    value, details = _score("json", text)
    assert value == 1.0
    assert details["valid"] is True and details["fenced"] is False


@pytest.mark.parametrize("text", ["not json", "{'single': 'quotes'}", '{"a": 1,}', "", '{"x": NaN}'])
def test_json_invalid_reports_the_parse_error(text: str) -> None:
    value, details = _score("json", text)
    assert value == 0.0
    assert details["valid"] is False and details["error"]


def test_json_in_a_markdown_fence_is_accepted_and_reported() -> None:
    value, details = _score("json", '```json\n{"a": 1}\n```')
    assert value == 1.0 and details["fenced"] is True
    value, details = _score("json", "```\n[1, 2]\n```\n")
    assert value == 1.0 and details["fenced"] is True


def test_json_fence_with_prose_around_it_is_not_json() -> None:
    value, details = _score("json", 'Sure! Here it is:\n```json\n{"a": 1}\n```')
    assert value == 0.0 and details["fenced"] is False


def test_json_fence_of_another_language_is_not_unwrapped() -> None:
    value, details = _score("json", '```python\n{"a": 1}\n```')
    assert value == 0.0 and details["fenced"] is False


def test_xml_valid_and_invalid() -> None:
    value, details = _score("xml", "<root><item>text</item></root>")
    assert value == 1.0 and details["root"] == "root"
    value, details = _score("xml", "<root><item>text</root>")
    assert value == 0.0 and "mismatched tag" in details["error"]


def test_xml_entity_expansion_bomb_is_rejected_not_expanded() -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(
            f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 9)
        )
        + "]><lolz>&lol8;</lolz>"
    )
    value, details = _score("xml", bomb)
    assert value == 0.0
    assert details["rejected"] == "EntitiesForbidden"


def test_xml_external_entity_is_rejected() -> None:
    xxe = '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>'
    value, details = _score("xml", xxe)
    assert value == 0.0 and details["rejected"] == "EntitiesForbidden"
    assert "root:" not in str(details)


@pytest.mark.parametrize(("text", "kind"), [("a: 1\nb: [1, 2]", "mapping"), ("- one\n- two", "list")])
def test_yaml_mapping_or_list(text: str, kind: str) -> None:
    value, details = _score("yaml", text)
    assert value == 1.0 and details["yaml_type"] == kind


@pytest.mark.parametrize("text", ["just a sentence", "42", "a: [unclosed", ""])
def test_yaml_scalars_and_syntax_errors_fail(text: str) -> None:
    value, details = _score("yaml", text)
    assert value == 0.0 and details["error"]


def test_yaml_python_tags_are_not_constructed() -> None:
    value, details = _score("yaml", "!!python/object/apply:os.system ['echo hi']")
    assert value == 0.0 and "python/object" in details["error"]


@pytest.mark.parametrize(
    ("text", "element"),
    [
        ("# Title\n\nBody", "headings"),
        ("Items:\n\n- a\n- b", "lists"),
        ("1. first\n2. second", "lists"),
        ("```\ncode\n```", "code_fences"),
        ("See [the docs](https://example.org).", "links"),
        ("Some **bold** text", "emphasis"),
        ("> quoted", "blockquotes"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "tables"),
    ],
)
def test_markdown_structure_is_found(text: str, element: str) -> None:
    value, details = _score("markdown", text)
    assert value == 1.0 and element in details["elements"]


def test_plain_prose_is_not_markdown() -> None:
    value, details = _score("markdown", "Plain prose. It has two sentences, and a comma; nothing else.")
    assert value == 0.0 and "elements" not in details


@pytest.mark.parametrize(
    ("text", "delimiter"),
    [("a,b,c\n1,2,3\n4,5,6", ","), ("a\tb\n1\t2", "\t"), ("a;b\n1;2", ";"), ("a|b\n1|2\n", "|")],
)
def test_csv_with_each_delimiter(text: str, delimiter: str) -> None:
    value, details = _score("csv", text)
    assert value == 1.0 and details["delimiter"] == delimiter


def test_csv_ragged_row_names_the_row() -> None:
    value, details = _score("csv", "a,b,c\n1,2\n4,5,6")
    assert value == 0.0 and details["error"] == "row 2 has 2 columns, the header has 3"


@pytest.mark.parametrize("text", ["a,b,c", "just words\nmore words", ""])
def test_csv_needs_header_row_and_delimiter(text: str) -> None:
    assert _score("csv", text)[0] == 0.0


def test_csv_fenced_is_unwrapped() -> None:
    value, details = _score("csv", "```csv\nname,age\nAda,36\n```")
    assert value == 1.0 and details["fenced"] is True


def test_unknown_format_fails_when_the_judge_is_built() -> None:
    with pytest.raises(ConfigurationError, match="unknown format 'toml'"):
        build_judge("format:toml")
    with pytest.raises(ValueError, match="unknown option"):
        build_judge({"name": "format", "args": {"fmt": "json", "strict": True}})


def test_grader_id_and_spec_name_the_format() -> None:
    judge = build_judge("format:YAML")
    assert judge.grader_id == "format:yaml"
    assert judge.scorer.spec == {"name": "format", "args": {"fmt": "yaml"}}


def test_the_answer_formats_old_name_still_works_for_one_release_with_a_warning() -> None:
    import llm_connect.scoring.rules as rules

    with pytest.warns(DeprecationWarning, match="renamed ANSWER_FORMATS"):
        assert rules.FORMATS is rules.ANSWER_FORMATS
    assert "FORMATS" not in rules.__all__ and "json" in rules.ANSWER_FORMATS
    with pytest.raises(AttributeError):
        rules.no_such_name  # noqa: B018
