"""A judge option that is misspelt or of the wrong type: the error names the judge, the option,
the closest valid one and every option the judge takes; never a Python signature."""

from __future__ import annotations

from typing import Any

import pytest

from llm_connect.errors import ConfigurationError
from llm_connect.grading import build_judge
from llm_connect.grading.judges import _registry


def refused(spec: str | dict[str, Any]) -> str:
    with pytest.raises(ConfigurationError) as raised:
        build_judge(spec)
    message = str(raised.value)
    assert "make_" not in message and "keyword argument" not in message and "positional" not in message
    return message


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "exact:normalise=true",
            "judge 'exact': unknown option 'normalise'; did you mean 'normalize'? (options of 'exact': normalize)",
        ),
        ("exact:Normalize=true", "did you mean 'normalize'?"),
        (
            "length:min_word=3",
            "unknown option 'min_word'; did you mean 'min_words'? "
            "(options of 'length': max_chars, max_words, min_chars, min_words)",
        ),
        ("tools:credit=0.2", "did you mean 'argument_credit'? (options of 'tools': argument_credit)"),
        ("safety:judge=openai:x", "did you mean 'judge_model'?"),
        (
            "correctness:answer=x,case_sensitive=true",
            "unknown option 'case_sensitive' (options of 'correctness': ",
        ),
        (
            "embedding:threshhold=0.5",
            "unknown option 'threshhold' (options of 'embedding': backend, device, fp16, model)",
        ),
        ("vrty:x=1", "judge 'vrty': unknown option 'x'; judge 'vrty' takes no options"),
        ("relevance:x=1", "judge 'relevance' takes no options"),
    ],
)
def test_an_unknown_option_names_the_closest_and_lists_the_judges_options(spec: str, expected: str) -> None:
    assert expected in refused(spec)


def test_a_stored_spec_gets_the_same_hint() -> None:
    assert "did you mean 'normalize'?" in refused({"name": "exact", "args": {"normalise": True}})


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("exact:normalize=yes", "judge 'exact': option 'normalize' must be true or false, not 'yes'"),
        ("exact:normalize=1", "option 'normalize' must be true or false, not 1"),
        ("exact:yes", "option 'normalize' must be true or false, not 'yes'"),
        ("embedding:model=3", "judge 'embedding': option 'model' must be a string, not 3"),
        ("correctness:answer=[1]", "option 'answer' must be a string, not [1]"),
        ("completeness:headings_only=maybe", "option 'headings_only' must be true or false"),
    ],
)
def test_a_value_of_the_wrong_type_names_the_type_expected(spec: str, expected: str) -> None:
    assert expected in refused(spec)


def test_the_factorys_own_check_wins_when_it_names_the_option() -> None:
    # the annotation says int; the factory says more
    assert "option 'min_words' must be an integer >= 0, not 'x'" in refused('length:min_words="x"')
    assert "argument_credit must be a number in 0..1, not 'abc'" in refused("tools:argument_credit=abc")


def test_valid_options_still_build() -> None:
    assert build_judge("exact:normalize=true").normalize is True
    build_judge("correctness:42")  # the command line parses 42 as a number; the answer is its text
    build_judge('completeness:sections=["Summary"]')
    build_judge("length:min_words=3,max_words=50")


class _Judge:
    asks_llm = False


def test_a_plugin_taking_any_option_is_not_second_guessed(monkeypatch: pytest.MonkeyPatch) -> None:
    def factory(context: Any, **options: Any) -> _Judge:
        return _Judge()

    monkeypatch.setitem(_registry._registered, "anyopts", _registry._Entry(factory, None, ""))
    assert isinstance(build_judge("anyopts:whatever=1"), _Judge)


def test_a_plugin_with_named_options_gets_the_same_hints(monkeypatch: pytest.MonkeyPatch) -> None:
    def factory(context: Any, *, level: int = 1, label: str | None = None) -> _Judge:
        return _Judge()

    monkeypatch.setitem(_registry._registered, "strictopts", _registry._Entry(factory, None, ""))
    assert "did you mean 'level'? (options of 'strictopts': label, level)" in refused("strictopts:levl=2")
    assert "option 'level' must be an integer, not 'high'" in refused("strictopts:level=high")
    assert isinstance(build_judge("strictopts:level=2,label=x"), _Judge)
