"""The judge registry: names, command-line specs, stored specs, plugins."""

from __future__ import annotations

import pytest

from llm_connect import ExactMatchJudge
from llm_connect.errors import ConfigurationError
from llm_connect.grading import build_judge, judge_names, parse_judge_spec, register_judge
from llm_connect.grading.judges import JudgeContext, format_judge_spec
from llm_connect.grading.judges._registry import is_llm_grader_id


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("exact", {"name": "exact", "args": {}}),
        ("exact:true", {"name": "exact", "args": {"normalize": True}}),
        ("exact:normalize=true", {"name": "exact", "args": {"normalize": True}}),
        ("llm:openai:gpt-4o-mini,seed=7", {"name": "llm", "args": {"model": "openai:gpt-4o-mini", "seed": 7}}),
        ("format:json", {"name": "format", "args": {"fmt": "json"}}),
        ("length:min_words=5,max_words=200", {"name": "length", "args": {"min_words": 5, "max_words": 200}}),
    ],
)
def test_parse_judge_spec(text: str, expected: dict) -> None:
    assert parse_judge_spec(text) == expected


def test_format_is_the_inverse_of_parse() -> None:
    for text in ["exact", "length:max_words=200,min_words=5", "llm:model=openai:gpt-4o,seed=3"]:
        assert parse_judge_spec(format_judge_spec(parse_judge_spec(text))) == parse_judge_spec(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nosuch", "unknown judge 'nosuch'"),
        ("", "empty judge spec"),
        ("embedding:foo", "takes no positional argument"),
        ("format:json,xml", "more than one positional"),
        ("format:json,fmt=xml", "gives 'fmt' twice"),
    ],
)
def test_bad_specs_raise_configuration_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_judge_spec(text)


def test_unknown_option_is_rejected_when_building() -> None:
    with pytest.raises(ValueError, match="judge 'exact'"):
        build_judge("exact:colour=blue")


def test_every_builtin_name_is_listed() -> None:
    names = judge_names()
    for name in ["exact", "embedding", "llm", "vrty", "format", "schema", "correctness",
                 "length", "relevance", "completeness", "persona", "safety"]:
        assert name in names


def test_register_judge_adds_a_buildable_name() -> None:
    @register_judge("always-one", summary="test judge")
    def make(context: JudgeContext, *, normalize: bool = False) -> ExactMatchJudge:
        return ExactMatchJudge(normalize=normalize)

    assert "always-one" in judge_names()
    judge = build_judge("always-one:normalize=true")
    assert judge.grader_id == "exact:normalized"


def test_is_llm_grader_id() -> None:
    assert is_llm_grader_id("llm:openai:gpt-4o-mini:rubric-v1")
    assert is_llm_grader_id("safety:default+llm:openai:gpt-4o")
    assert not is_llm_grader_id("embedding:all-MiniLM-L6-v2")
    assert not is_llm_grader_id("exact")


def test_third_party_judge_loads_from_the_entry_point_group(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "shoutjudge.py").write_text(
        "from llm_connect import ExactMatchJudge\n"
        "def make(context, *, normalize=True):\n"
        "    judge = ExactMatchJudge(normalize=normalize)\n"
        "    judge.grader_id = 'shout'\n"
        "    return judge\n"
    )
    dist = tmp_path / "shoutjudge-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shoutjudge\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[llm_connect.judges]\nshout = shoutjudge:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "shout" in judge_names()
    judge = build_judge("shout")
    assert judge.grader_id == "shout"
