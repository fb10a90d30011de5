"""ExactMatchJudge (contract: baseline-grading invariant 5)."""

from __future__ import annotations

import asyncio

import pytest

from llm_connect import ExactMatchJudge, LLMResponse, RunConfig
from llm_connect.grading import build_judge


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
