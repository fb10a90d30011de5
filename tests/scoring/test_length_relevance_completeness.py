"""length, relevance and completeness judges."""

from __future__ import annotations

import pytest

from llm_connect.errors import CaseDataError, ConfigurationError
from llm_connect.grading import Case, build_judge
from llm_connect.scoring.rules import CompletenessScorer, LengthScorer, RelevanceScorer, content_words

# -- length -------------------------------------------------------------------


def test_length_within_all_bounds_scores_one() -> None:
    result = LengthScorer(min_words=2, max_words=5, max_chars=40).score(" three little words\n", prompt="")
    assert result.value == 1.0
    assert result.details["words"] == 3 and result.details["chars"] == len("three little words")


def test_length_outside_any_bound_scores_zero_and_names_it() -> None:
    result = LengthScorer(min_chars=1, max_words=2).score("one two three", prompt="")
    assert result.value == 0.0 and result.details["failed"] == ["max_words"]


def test_length_bounds_are_inclusive() -> None:
    scorer = LengthScorer(min_chars=5, max_chars=5)
    assert scorer.score("abcde", prompt="").value == 1.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "at least one"),
        ({"min_words": 10, "max_words": 2}, r"min_words \(10\) > max_words \(2\)"),
        ({"min_chars": -1}, "integer >= 0"),
        ({"max_chars": 2.5}, "integer >= 0"),
        ({"max_words": True}, "integer >= 0"),
        ({"max_tokens": 3}, "unknown option"),
    ],
)
def test_invalid_length_options_fail_at_build_time(args: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build_judge({"name": "length", "args": args})


def test_length_cli_spec() -> None:
    judge = build_judge("length:min_words=5,max_words=200")
    assert judge.scorer.spec == {"name": "length", "args": {"min_words": 5, "max_words": 200}}


# -- relevance ----------------------------------------------------------------


def test_content_words_drop_stop_words_and_fold_plurals() -> None:
    assert content_words("What are the best Python models for NLP tasks?") == [
        "best",
        "python",
        "model",
        "nlp",
        "task",
    ]


def test_relevance_is_the_fraction_of_prompt_content_words_present() -> None:
    result = RelevanceScorer().score(
        "Python is a popular language for programming.",
        prompt="What is Python programming? Explain closures.",
    )
    assert result.value == pytest.approx(2 / 3)
    assert result.details["found"] == ["python", "programming"]
    assert result.details["missing"] == ["closure"]


@pytest.mark.parametrize("prompt", ["", "   ", "What is it? Tell me about this."])
def test_relevance_of_a_prompt_without_content_words_is_zero(prompt: str) -> None:
    result = RelevanceScorer().score("anything at all", prompt=prompt)
    assert result.value == 0.0 and result.details["prompt_words"] == 0


def test_relevance_judge_takes_no_options() -> None:
    with pytest.raises(ConfigurationError):
        build_judge("relevance:something")
    with pytest.raises(ConfigurationError, match="unknown option"):
        build_judge({"name": "relevance", "args": {"stop_words": []}})


# -- completeness -------------------------------------------------------------

REPORT = """# Introduction
This study examines...

## Methodology
We used a survey approach...

**Results**
The findings show...

Limitations: small sample.
We discuss future work briefly.
"""


def test_completeness_is_the_fraction_of_sections_found() -> None:
    sections = ["introduction", "methodology", "results", "limitations", "conclusion"]
    result = CompletenessScorer(sections=sections).score(REPORT, prompt="")
    assert result.value == pytest.approx(4 / 5)
    assert result.details["missing"] == ["conclusion"]
    assert result.details["found_as"] == {
        "introduction": "heading",
        "methodology": "heading",
        "results": "heading",
        "limitations": "heading",
    }


def test_sections_in_running_text_count_unless_headings_only() -> None:
    assert CompletenessScorer(sections=["future work"]).score(REPORT, prompt="").value == 1.0
    assert (
        CompletenessScorer(sections=["future work"], headings_only=True).score(REPORT, prompt="").value == 0.0
    )


def test_completeness_reads_case_sections() -> None:
    case = Case(id="r1", prompt="p", expected={"sections": ["Introduction", "Summary"]})
    result = CompletenessScorer().score(REPORT, prompt="p", case=case)
    assert result.value == 0.5 and result.details["missing"] == ["Summary"]


def test_completeness_without_sections_is_a_per_case_error() -> None:
    with pytest.raises(CaseDataError) as info:
        build_judge("completeness").scorer.score("x", prompt="p", case=Case(id="r2", prompt="p"))
    assert info.value.case_id == "r2" and info.value.field == "expected.sections"


def test_completeness_invalid_options_fail_at_build_time() -> None:
    with pytest.raises(ConfigurationError, match="'sections'"):
        build_judge({"name": "completeness", "args": {"sections": [""]}})
    with pytest.raises(ConfigurationError, match="'headings_only'"):
        build_judge({"name": "completeness", "args": {"sections": ["a"], "headings_only": "no"}})
