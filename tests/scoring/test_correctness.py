"""correctness judge: ground truth with normalisation, or the fraction of keywords found."""

from __future__ import annotations

import pytest

from llm_connect.errors import CaseDataError, ConfigurationError
from llm_connect.grading import Case, build_judge
from llm_connect.scoring.rules import CorrectnessScorer


def test_ground_truth_match_is_normalised_by_default() -> None:
    scorer = CorrectnessScorer(answer="Hello World")
    assert scorer.score("  hello,   WORLD! ", prompt="").value == 1.0
    assert scorer.score("Hello Worlds", prompt="").value == 0.0


def test_normalisation_can_be_turned_off() -> None:
    scorer = CorrectnessScorer(answer="Hello World", normalize=False)
    assert scorer.score("hello world", prompt="").value == 0.0
    assert scorer.score("Hello World", prompt="").value == 1.0


def test_contains_match_finds_the_answer_as_whole_words() -> None:
    scorer = CorrectnessScorer(answer="Paris", match="contains")
    assert scorer.score("The capital of France is Paris.", prompt="").value == 1.0
    assert scorer.score("Parisian cafes", prompt="").value == 0.0


def test_keywords_give_the_fraction_found_with_found_and_missing() -> None:
    result = CorrectnessScorer(keywords=["Python", "machine learning", "AI"]).score(
        "Python is great for AI applications", prompt=""
    )
    assert result.value == pytest.approx(2 / 3)
    assert result.details["found"] == ["Python", "AI"]
    assert result.details["missing"] == ["machine learning"]


def test_keywords_respect_word_boundaries_but_not_case() -> None:
    scorer = CorrectnessScorer(keywords=["cat", "C++", "new york"])
    result = scorer.score("We concatenate strings in c++ while in New\nYork.", prompt="")
    assert result.details["found"] == ["C++", "new york"]
    assert result.details["missing"] == ["cat"]


def test_case_expected_string_is_the_ground_truth() -> None:
    case = Case(id="c1", prompt="Capital of France?", expected="Paris")
    assert CorrectnessScorer().score("paris", prompt=case.prompt, case=case).value == 1.0


def test_case_expected_number_is_the_ground_truth() -> None:
    case = Case(id="c2", prompt="6 x 7?", expected=42)
    assert CorrectnessScorer().score("42", prompt=case.prompt, case=case).value == 1.0


def test_case_mapping_answer_wins_over_keywords_unless_mode_says_otherwise() -> None:
    case = Case(id="c1", prompt="p", expected={"answer": "blue", "keywords": ["sky", "blue"]})
    assert CorrectnessScorer().score("The sky is blue", prompt="p", case=case).details["mode"] == "answer"
    result = CorrectnessScorer(mode="keywords").score("The sky is blue", prompt="p", case=case)
    assert result.value == 1.0 and result.details["mode"] == "keywords"


def test_judge_options_override_case_data() -> None:
    case = Case(id="c1", prompt="p", expected="Rome")
    assert CorrectnessScorer(answer="Paris").score("Paris", prompt="p", case=case).value == 1.0


def test_no_ground_truth_is_a_per_case_error() -> None:
    judge = build_judge("correctness")
    with pytest.raises(CaseDataError) as info:
        judge.scorer.score("x", prompt="p", case=Case(id="q-3", prompt="p"))
    assert info.value.case_id == "q-3" and info.value.field == "expected.answer"


def test_malformed_case_keywords_name_the_field() -> None:
    case = Case(id="q-4", prompt="p", expected={"keywords": [1, 2]})
    with pytest.raises(CaseDataError, match=r"expected\.keywords"):
        CorrectnessScorer().score("x", prompt="p", case=case)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"answer": "a", "keywords": ["b"]}, "not both"),
        ({"keywords": []}, "must not be empty"),
        ({"match": "fuzzy"}, "'match'"),
        ({"normalize": "yes"}, "'normalize'"),
        ({"answr": "typo"}, "unknown option"),
    ],
)
def test_invalid_options_fail_at_build_time(spec: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build_judge({"name": "correctness", "args": spec})


def test_cli_positional_argument_is_the_answer() -> None:
    judge = build_judge("correctness:Paris")
    assert judge.scorer.spec == {"name": "correctness", "args": {"answer": "Paris"}}


def test_json_answer_is_compared_as_json() -> None:
    scorer = CorrectnessScorer(answer='{"name": "Ada", "total": 490.0, "paid": true}')
    assert scorer.score('```json\n{"paid": true, "total": 490, "name": "Ada"}\n```', prompt="").value == 1.0
    result = scorer.score('{"name": "ada", "total": 490, "paid": 1}', prompt="")
    assert result.value == 0.0
    assert result.details["differing_keys"] == ["name", "paid"]
    assert "parse_error" in scorer.score("Ada, 490", prompt="").details
