"""GradingResult validation (contract: baseline-grading invariants 1-3)."""

from __future__ import annotations

import json
import math
from types import MappingProxyType

import pytest

from llm_connect import GradingResult, LLMResponse, RunConfig
from llm_connect.errors import GradingValidationError

BASE = LLMResponse(text="Paris.", model="gpt-4o", provider="openai", latency_ms=120.0)
CAND = LLMResponse(text="paris", model="gpt-4o-mini", provider="openai")


def make(score: object = 0.5, grader_id: str = "exact", **kw: object) -> GradingResult:
    return GradingResult(score, "n", grader_id, BASE, CAND, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("score", [0.0, 0.25, 1.0, 0, 1])
def test_scores_in_range_are_accepted_as_float(score: float) -> None:
    result = make(score)
    assert result.quality_score == float(score)
    assert isinstance(result.quality_score, float)


@pytest.mark.parametrize(
    "score", [math.nan, math.inf, -math.inf, -0.01, 1.0000001, 2, True, False, "0.5", None, [0.5]]
)
def test_invalid_quality_score_raises_value_error(score: object) -> None:
    with pytest.raises(ValueError):
        make(score)


@pytest.mark.parametrize("grader_id", ["", "   ", "\n\t"])
def test_empty_grader_id_raises_value_error(grader_id: str) -> None:
    with pytest.raises(ValueError, match="grader_id"):
        make(grader_id=grader_id)


def test_validation_errors_belong_to_the_hierarchy() -> None:
    with pytest.raises(GradingValidationError):
        make(-1)


def test_result_keeps_both_responses_unmodified() -> None:
    result = make()
    assert result.baseline_response is BASE
    assert result.candidate_response is CAND
    assert result.baseline_response == LLMResponse(
        text="Paris.", model="gpt-4o", provider="openai", latency_ms=120.0
    )


def test_five_contract_fields_alone_construct_a_result() -> None:
    result = GradingResult(1.0, "", "exact", BASE, CAND)
    assert result.details == {}
    assert result.prompt == ""
    assert result.run_config is None


def test_details_must_be_json_serialisable() -> None:
    with pytest.raises(ValueError, match="JSON"):
        make(details={"x": object()})
    with pytest.raises(ValueError, match="JSON"):
        make(details={"x": math.nan})


def test_details_are_read_only_copies() -> None:
    source = {"a": 1}
    result = make(details=source)
    source["a"] = 2
    assert result.details["a"] == 1
    with pytest.raises(TypeError):
        result.details["a"] = 3  # type: ignore[index]


def test_details_json_is_the_validated_encoding() -> None:
    result = make(details={"judge_spec": {"name": "exact", "args": {}}, "note": "café", "n": [1, 2.5]})
    text = result.details_json()
    assert text == '{"judge_spec":{"name":"exact","args":{}},"note":"café","n":[1,2.5]}'
    assert json.loads(text) == dict(result.details)


def test_nested_read_only_mappings_are_accepted_as_objects() -> None:
    # dataclasses.replace / GradeRow details carry MappingProxyType values; they encode as objects.
    result = make(details={"inner": MappingProxyType({"a": 1})})
    assert json.loads(result.details_json()) == {"inner": {"a": 1}}


def test_self_containing_details_are_rejected() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="JSON"):
        make(details={"loop": loop})


def test_round_trip_through_dict() -> None:
    rc = RunConfig(temperature=0.0, max_tokens=64, model_params={"seed": 7})
    result = make(0.75, details={"judge_spec": {"name": "exact", "args": {}}}, prompt="Q?", run_config=rc)
    again = GradingResult.from_dict(result.to_dict())
    assert again == result


def test_results_survive_pickle_and_deepcopy() -> None:
    import copy
    import pickle

    rc = RunConfig(temperature=0.0, model_params={"seed": 7})
    result = make(
        0.75, details={"judge_spec": {"name": "exact", "args": {}}, "n": [1, 2]}, prompt="Q", run_config=rc
    )
    for copied in (pickle.loads(pickle.dumps(result)), copy.deepcopy(result), copy.copy(result)):
        assert copied == result and copied.details_json() == result.details_json()
        with pytest.raises(TypeError):
            copied.details["n"] = 3  # type: ignore[index]
    deep = copy.deepcopy(result)
    deep.details["n"].append(3)  # nested values are copies: the original is untouched
    assert result.details["n"] == [1, 2]
