"""Every rule, persona and safety judge: built by name, graded as a pair, rebuilt from its stored spec."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from llm_connect.adapters import OpenAIAdapter
from llm_connect.errors import CaseDataError
from llm_connect.grading import Case, GradingResult, JudgeContext, build_judge
from llm_connect.grading.judges._registry import format_judge_spec, parse_judge_spec
from llm_connect.types import LLMResponse, RunConfig

PERSONA = """\
name: support
examples: ["Thanks for reaching out! Happy to help you reset your password."]
traits: {formality: business_casual, tone: friendly, verbosity: concise}
lexicon: {preferred: [happy to help], avoided: [unfortunately]}
"""
SCHEMA = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}

CASE = Case(
    id="case-1",
    prompt="Return the capital of France as JSON and explain the history briefly.",
    expected={"answer": "Paris", "keywords": ["Paris", "capital"], "sections": ["answer"], "schema": SCHEMA},
)
BASELINE = '{"answer": "Paris"}'
CANDIDATE = '```json\n{"answer": "Paris, the capital"}\n```'


def _resp(text: str, model: str) -> LLMResponse:
    return LLMResponse(text=text, model=model, provider="test")


def _grade(judge: Any, baseline: str = BASELINE, candidate: str = CANDIDATE) -> GradingResult:
    result: GradingResult = judge.judge(
        _resp(baseline, "base"),
        _resp(candidate, "cand"),
        prompt=CASE.prompt,
        run_config=RunConfig(),
        case=CASE,
    )
    return result


def _round_trip(spec_text: str, context: JudgeContext) -> GradingResult:
    judge = build_judge(spec_text, context)
    first = _grade(judge)
    stored = json.loads(json.dumps(dict(first.details)))  # what the ledger keeps
    rebuilt = build_judge(stored["judge_spec"], context)
    second = _grade(rebuilt)
    assert rebuilt.grader_id == judge.grader_id == first.grader_id
    assert first.asks_llm is judge.asks_llm is rebuilt.asks_llm is stored["judge_spec"]["asks_llm"]
    assert second.quality_score == first.quality_score
    assert dict(second.details) == dict(first.details)
    # The command-line form of the stored spec builds the same judge too.
    assert build_judge(format_judge_spec(stored["judge_spec"]), context).grader_id == judge.grader_id
    return first


RULE_SPECS = [
    "format:json",
    "format:fmt=markdown",
    "schema",
    "schema:schema.json",
    "schema:schema.json,draft=2019-09,check_formats=true",
    "correctness",
    "correctness:Paris,match=contains",
    'correctness:keywords=["paris","capital","france"]',
    "correctness:normalize=false,mode=keywords",
    "length:min_words=1,max_chars=100",
    "relevance",
    "completeness",
    'completeness:sections=["answer","history"],headings_only=true',
    "safety",
    "safety:patterns.yaml",
]


@pytest.fixture
def context(tmp_path: Path) -> JudgeContext:
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "patterns.yaml").write_text(
        "name: mine\ncategories:\n  x:\n    rules:\n      - {severity: low, words: [capital]}\n"
    )
    (tmp_path / "support.yaml").write_text(PERSONA)
    return JudgeContext(base_dir=tmp_path)


@pytest.mark.parametrize("spec", RULE_SPECS)
def test_stored_spec_rebuilds_an_equivalent_judge(spec: str, context: JudgeContext) -> None:
    result = _round_trip(spec, context)
    assert 0.0 <= result.quality_score <= 1.0
    assert result.asks_llm is False  # rules, schema, safety patterns: no LLM is asked
    assert result.details["judge_spec"]["name"] == parse_judge_spec(spec)["name"]


@pytest.mark.embeddings
def test_persona_spec_round_trip(context: JudgeContext) -> None:
    result = _round_trip("persona:support.yaml", context)
    assert result.grader_id == "persona:support"


def test_safety_with_llm_judge_spec_round_trip(context: JudgeContext, openai_server) -> None:  # type: ignore[no-untyped-def]
    openai_server.responder = lambda body: {"safety_score": 0.8, "reason": "ok"}
    context.make_llm_adapter = lambda spec: OpenAIAdapter(
        spec.partition(":")[2], base_url=openai_server.base_url, api_key="test"
    )
    result = _round_trip("safety:judge_model=openai:guard", context)
    assert result.grader_id == "safety:default+llm:openai:guard"
    assert result.asks_llm is True and result.details["judge_spec"]["asks_llm"] is True
    assert result.details["candidate"]["llm_score"] == 0.8


def test_relative_quality_is_candidate_over_baseline() -> None:
    judge = build_judge('correctness:keywords=["paris","capital","france","history"]')
    result = _grade(judge, baseline="Paris is the capital of France. History...", candidate="Paris")
    assert result.details["baseline_score"] == 1.0 and result.details["candidate_score"] == 0.25
    assert result.quality_score == 0.25
    better = _grade(judge, baseline="Paris", candidate="Paris is the capital of France. History...")
    assert better.quality_score == 1.0


def test_both_zero_is_quality_one() -> None:
    result = _grade(build_judge("format:xml"), baseline="nope", candidate="also nope")
    assert result.quality_score == 1.0


def test_missing_case_data_surfaces_from_the_judge_per_case() -> None:
    judge = build_judge("completeness")
    with pytest.raises(CaseDataError, match="case-2"):
        judge.judge(
            _resp("a", "b"),
            _resp("c", "d"),
            prompt="p",
            run_config=RunConfig(),
            case=Case(id="case-2", prompt="p"),
        )


def test_grader_ids() -> None:
    ids = {spec: build_judge(spec).grader_id for spec in ("format:csv", "schema", "length:max_words=3")}
    assert ids == {"format:csv": "format:csv", "schema": "schema", "length:max_words=3": "length"}


def test_ajudge_matches_judge() -> None:
    judge = build_judge("relevance")
    sync = _grade(judge)
    result = asyncio.run(
        judge.ajudge(
            _resp(BASELINE, "base"),
            _resp(CANDIDATE, "cand"),
            prompt=CASE.prompt,
            run_config=RunConfig(),
            case=CASE,
        )
    )
    assert result.quality_score == sync.quality_score


def test_list_options_survive_the_command_line_form() -> None:
    spec = {"name": "correctness", "args": {"keywords": ["Paris, France", "capital"]}}
    assert parse_judge_spec(format_judge_spec(spec)) == spec
    judge = build_judge('correctness:keywords=["Paris, France","capital"],normalize=false')
    assert judge.scorer.spec == {
        "name": "correctness",
        "args": {"keywords": ["Paris, France", "capital"], "normalize": False},
    }
