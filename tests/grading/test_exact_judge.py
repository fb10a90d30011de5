"""ExactMatchJudge (contract: baseline-grading invariants 5, 5a)."""

from __future__ import annotations

import asyncio

import pytest

from llm_connect import ExactMatchJudge, GradingResult, LLMResponse, RunConfig
from llm_connect.grading import build_judge
from llm_connect.types import ToolCall


def resp(text: str, model: str = "m") -> LLMResponse:
    return LLMResponse(text=text, model=model, provider="recorded")


RC = RunConfig()


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [("Paris", "Paris", 1.0), ("Paris", "paris", 0.0), ("Paris", "Paris ", 0.0), ("", "", 1.0)],
)
def test_exact_match_is_literal_by_default(a: str, b: str, expected: float) -> None:
    result = ExactMatchJudge().judge(resp(a), resp(b), prompt="p", run_config=RC)
    assert result.quality_score == expected
    assert result.grader_id == "exact"


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("Paris  is\nNICE", "paris is nice", 1.0),
        ("  Paris\t", "PARIS", 1.0),
        ("Paris", "Paris.", 0.0),
    ],
)
def test_normalize_folds_case_and_whitespace_runs(a: str, b: str, expected: float) -> None:
    judge = ExactMatchJudge(normalize=True)
    result = judge.judge(resp(a), resp(b), prompt="p", run_config=RC)
    assert result.quality_score == expected
    assert result.grader_id == "exact:normalized"


def test_result_carries_prompt_config_and_rebuildable_spec() -> None:
    rc = RunConfig(temperature=0.2)
    result = ExactMatchJudge(normalize=True).judge(resp("a"), resp("a"), prompt="Q", run_config=rc)
    assert result.prompt == "Q"
    assert result.run_config is rc
    rebuilt = build_judge(dict(result.details["judge_spec"]))
    assert isinstance(rebuilt, ExactMatchJudge)
    assert rebuilt.grader_id == result.grader_id


def test_ajudge_matches_judge() -> None:
    judge = ExactMatchJudge()
    sync = judge.judge(resp("x"), resp("y"), prompt="p", run_config=RC)
    async_ = asyncio.run(judge.ajudge(resp("x"), resp("y"), prompt="p", run_config=RC))
    assert sync == async_


# -- exact takes tool calls into account --------------------------------------------------


def calls(*items: tuple[str, str], text: str = "") -> LLMResponse:
    """A response holding ``text`` and tool calls given as (name, arguments JSON text)."""
    return LLMResponse(
        text=text, model="m", provider="recorded", tool_calls=tuple(ToolCall(n, a) for n, a in items)
    )


def exact(baseline: LLMResponse, candidate: LLMResponse, *, normalize: bool = False) -> GradingResult:
    return ExactMatchJudge(normalize=normalize).judge(baseline, candidate, prompt="p", run_config=RC)


def test_exact_on_two_different_tool_calls_is_zero() -> None:
    result = exact(calls(("refund", '{"order_id": 42}')), calls(("delete_account", '{"order_id": 42}')))
    assert result.quality_score == 0.0
    assert result.notes == "texts match, tool calls differ"
    assert result.details["texts_match"] is True and result.details["tool_calls_match"] is False


def test_exact_on_same_tool_calls_with_different_arguments_is_zero() -> None:
    assert (
        exact(calls(("refund", '{"order_id": 42}')), calls(("refund", '{"order_id": 43}'))).quality_score
        == 0.0
    )


def test_exact_on_identical_tool_calls_and_text_is_one() -> None:
    result = exact(
        calls(("refund", '{"order_id": 42, "reason": "late"}'), ("notify", "{}"), text="Done."),
        calls(("notify", ""), ("refund", '{"reason":"late","order_id":42.0}'), text="Done."),
    )
    assert result.quality_score == 1.0
    assert result.notes == "texts match, tool calls match"


def test_exact_needs_texts_and_tool_calls_to_match() -> None:
    same_calls_other_text = exact(
        calls(("refund", '{"order_id": 42}'), text="Done."), calls(("refund", '{"order_id": 42}'), text="OK.")
    )
    assert same_calls_other_text.quality_score == 0.0
    assert same_calls_other_text.notes == "texts differ, tool calls match"
    assert exact(calls(("refund", "{}")), calls(text="")).quality_score == 0.0  # a call against none
    assert exact(calls(("refund", "{}")), calls(("refund", "{}"), ("refund", "{}"))).quality_score == 0.0


def test_exact_normalize_folds_text_but_not_arguments() -> None:
    folded = exact(
        calls(("f", '{"a": "X"}'), text="Done"), calls(("f", '{"a":"X"}'), text=" done"), normalize=True
    )
    assert folded.quality_score == 1.0
    assert exact(calls(("f", '{"a": "X"}')), calls(("f", '{"a": "x"}')), normalize=True).quality_score == 0.0


def test_exact_without_tool_calls_keeps_its_details() -> None:
    result = exact(calls(text="Paris"), calls(text="Paris"))
    assert list(result.details) == ["match", "normalize", "judge_spec"]
    assert result.notes == "texts match"
