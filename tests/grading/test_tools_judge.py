"""The ``tools`` judge (contract: baseline-grading invariants 13-13d); ``exact`` with tool calls end to end."""

from __future__ import annotations

import asyncio
import json

import pytest

from llm_connect import ExactMatchJudge, LLMResponse, PairedGrader, RunConfig
from llm_connect.errors import ConfigurationError
from llm_connect.grading import Judge, build_judge, judge_names, parse_judge_spec
from llm_connect.grading.judges import ToolCallJudge, format_judge_spec
from llm_connect.types import ToolCall
from tests.fixtures.openai_server import chat_completion

RC = RunConfig()


def resp(*calls: tuple[str, str], text: str = "") -> LLMResponse:
    """A response holding ``text`` and tool calls given as (name, arguments JSON text)."""
    return LLMResponse(
        text=text, model="m", provider="recorded", tool_calls=tuple(ToolCall(n, a) for n, a in calls)
    )


def grade(baseline: LLMResponse, candidate: LLMResponse, **options: float):  # type: ignore[no-untyped-def]
    return ToolCallJudge(**options).judge(baseline, candidate, prompt="p", run_config=RC)


# -- the tools judge ----------------------------------------------------------------------


def test_right_function_right_arguments_scores_one_whatever_key_order_and_whitespace() -> None:
    result = grade(
        resp(("refund", '{"order_id": 42, "reason": "late", "amount": 1.0}')),
        resp(("refund", '{ "amount":1,\n  "reason" : "late","order_id":42.0 }')),
    )
    assert result.quality_score == 1.0
    assert result.grader_id == "tools" and result.asks_llm is False
    assert result.notes == "refund: same arguments"
    assert [c["status"] for c in result.details["calls"]] == ["match"]


def test_right_function_wrong_arguments_gets_the_argument_credit() -> None:
    result = grade(resp(("refund", '{"order_id": 42}')), resp(("refund", '{"order_id": 43}')))
    assert result.quality_score == 0.5
    assert result.notes == "refund: arguments differ (order_id 42 vs 43)"
    [call] = result.details["calls"]
    assert call == {
        "function": "refund",
        "status": "arguments_differ",
        "credit": 0.5,
        "baseline_arguments": '{"order_id": 42}',
        "candidate_arguments": '{"order_id": 43}',
        "candidate_arguments_invalid": False,
        "differences": ["order_id 42 vs 43"],
    }


def test_argument_credit_is_configurable_and_names_the_grader() -> None:
    judge = build_judge("tools:argument_credit=0.25")
    result = judge.judge(
        resp(("refund", '{"order_id": 42}')), resp(("refund", '{"order_id": 43}')), prompt="p", run_config=RC
    )
    assert result.quality_score == 0.25
    assert result.grader_id == "tools:argument_credit=0.25"


@pytest.mark.parametrize("credit", [-0.1, 1.5, True, "half"])
def test_argument_credit_outside_zero_to_one_is_a_configuration_error(credit: object) -> None:
    with pytest.raises(ConfigurationError, match="argument_credit"):
        ToolCallJudge(argument_credit=credit)  # type: ignore[arg-type]


def test_strings_compare_exactly_and_booleans_are_not_numbers() -> None:
    assert grade(resp(("f", '{"city": "Paris"}')), resp(("f", '{"city": "paris"}'))).quality_score == 0.5
    assert grade(resp(("f", '{"city": "Paris"}')), resp(("f", '{"city": "Paris "}'))).quality_score == 0.5
    assert grade(resp(("f", '{"flag": true}')), resp(("f", '{"flag": 1}'))).quality_score == 0.5
    assert grade(resp(("f", '{"xs": [1, 2]}')), resp(("f", '{"xs": [2, 1]}'))).quality_score == 0.5
    assert grade(resp(("f", "")), resp(("f", "{}"))).quality_score == 1.0  # empty arguments are {}


def test_notes_name_missing_and_extra_argument_keys() -> None:
    result = grade(
        resp(("refund", '{"order_id": 42, "reason": "late"}')),
        resp(("refund", '{"order_id": 42, "note": "x"}')),
    )
    assert result.notes == "refund: arguments differ (reason missing, note not in the baseline)"


def test_wrong_function_scores_zero() -> None:
    result = grade(resp(("refund", '{"order_id": 42}')), resp(("delete_account", '{"order_id": 42}')))
    assert result.quality_score == 0.0
    assert result.notes == "refund: not called by the candidate; delete_account: not called by the baseline"
    assert [c["status"] for c in result.details["calls"]] == ["missing", "extra"]


def test_an_extra_call_is_penalised() -> None:
    result = grade(
        resp(("refund", '{"order_id": 42}')),
        resp(("refund", '{"order_id": 42}'), ("delete_account", '{"user": 7}')),
    )
    assert result.quality_score == 0.5  # 1.0 credit over max(1, 2) calls
    assert result.notes == "refund: same arguments; delete_account: not called by the baseline"
    assert result.details["baseline_calls"] == 1 and result.details["candidate_calls"] == 2


def test_a_missing_call_is_penalised() -> None:
    result = grade(
        resp(("lookup", '{"id": 1}'), ("refund", '{"order_id": 42}')),
        resp(("refund", '{"order_id": 43}')),
    )
    assert result.quality_score == 0.25  # (0 + 0.5) / 2
    assert result.notes == "lookup: not called by the candidate; refund: arguments differ (order_id 42 vs 43)"


def test_repeated_function_with_swapped_argument_sets_is_matched_optimally() -> None:
    result = grade(
        resp(("refund", '{"order_id": 1}'), ("refund", '{"order_id": 2}'), ("notify", "{}")),
        resp(("notify", "{}"), ("refund", '{"order_id": 2}'), ("refund", '{"order_id": 1}')),
    )
    assert result.quality_score == 1.0


def test_pairing_maximises_total_credit_not_call_order() -> None:
    # In call order: (1 vs 2) + (2 vs 3) = 0.5 + 0.5. Optimal: (2 vs 2) + (1 vs 3) = 1.0 + 0.5.
    result = grade(
        resp(("refund", '{"order_id": 1}'), ("refund", '{"order_id": 2}')),
        resp(("refund", '{"order_id": 2}'), ("refund", '{"order_id": 3}')),
    )
    assert result.quality_score == 0.75
    assert sorted(c["status"] for c in result.details["calls"]) == ["arguments_differ", "match"]


def test_invalid_candidate_json_gets_no_argument_credit_and_says_so() -> None:
    result = grade(resp(("refund", '{"order_id": 42}')), resp(("refund", '{"order_id": 42')))
    assert result.quality_score == 0.5
    assert result.notes == "refund: arguments differ (candidate arguments are not valid JSON)"
    assert result.details["calls"][0]["candidate_arguments_invalid"] is True


def test_invalid_baseline_json_is_compared_as_raw_text() -> None:
    broken = '{"order_id": 42'
    assert grade(resp(("refund", broken)), resp(("refund", broken))).quality_score == 1.0
    differ = grade(resp(("refund", broken)), resp(("refund", '{"order_id": 42}')))
    assert differ.quality_score == 0.5
    assert (
        differ.notes == "refund: arguments differ (baseline arguments are not valid JSON (compared as text))"
    )


def test_no_calls_on_either_side_is_agreement() -> None:
    result = grade(resp(text="Hello"), resp(text="Something else entirely"))
    assert result.quality_score == 1.0
    assert result.notes == "neither side called a tool"
    assert result.details["calls"] == []


@pytest.mark.parametrize("baseline_calls", [True, False])
def test_a_tool_call_against_a_text_answer_scores_zero(baseline_calls: bool) -> None:
    call, text = resp(("refund", '{"order_id": 42}')), resp(text="I have refunded order 42.")
    result = grade(call, text) if baseline_calls else grade(text, call)
    assert result.quality_score == 0.0
    side = "candidate" if baseline_calls else "baseline"
    assert result.notes.startswith(f"the {side} called no tool; refund: not called by the {side}")


def test_details_are_json_and_the_spec_rebuilds_the_judge() -> None:
    result = grade(resp(("refund", '{"order_id": 42}')), resp(("refund", "{}")), argument_credit=0.3)
    json.loads(result.details_json())
    spec = dict(result.details["judge_spec"])
    assert spec == {"name": "tools", "args": {"argument_credit": 0.3}, "asks_llm": False}
    rebuilt = build_judge(spec)
    assert isinstance(rebuilt, ToolCallJudge) and rebuilt.grader_id == result.grader_id
    assert rebuilt.argument_credit == 0.3
    text = format_judge_spec(spec)
    assert text == "tools:argument_credit=0.3"
    assert parse_judge_spec(text) == {"name": "tools", "args": {"argument_credit": 0.3}}
    assert build_judge(text).grader_id == result.grader_id


def test_tools_is_a_listed_deterministic_judge() -> None:
    assert "tools" in judge_names()
    judge = build_judge("tools")
    assert isinstance(judge, ToolCallJudge) and judge.asks_llm is False and judge.grader_id == "tools"
    with pytest.raises(ConfigurationError, match="takes no positional argument"):
        parse_judge_spec("tools:0.5")


def test_ajudge_matches_judge() -> None:
    judge = ToolCallJudge()
    a, b = resp(("refund", '{"order_id": 42}')), resp(("refund", '{"order_id": 43}'))
    assert asyncio.run(judge.ajudge(a, b, prompt="p", run_config=RC)) == judge.judge(
        a, b, prompt="p", run_config=RC
    )


# -- end to end: PairedGrader against the loopback server --------------------------------


def test_paired_grading_of_tool_calls_over_http(openai_server) -> None:  # type: ignore[no-untyped-def]
    from llm_connect.adapters import OpenAIAdapter

    calls = {
        "base": [{"name": "refund", "arguments": '{"order_id": 42}'}],
        "same": [{"name": "refund", "arguments": '{ "order_id" : 42.0 }'}],
        "other-args": [{"name": "refund", "arguments": '{"order_id": 43}'}],
        "wrong": [{"name": "delete_account", "arguments": '{"order_id": 42}'}],
    }
    openai_server.responder = lambda body: chat_completion(body, None, tool_calls=calls[body["model"]])
    baseline = OpenAIAdapter("base", base_url=openai_server.base_url)
    judges: list[Judge] = [ToolCallJudge(), ExactMatchJudge()]
    expected = {"same": (1.0, 1.0), "other-args": (0.5, 0.0), "wrong": (0.0, 0.0)}
    for model, scores in expected.items():
        candidate = OpenAIAdapter(model, base_url=openai_server.base_url)
        tools, exact_ = PairedGrader(judges[0]).grade_with(
            judges, baseline, candidate, "Refund order 42", RunConfig(temperature=0.0)
        )
        assert (tools.quality_score, exact_.quality_score) == scores, model
        assert tools.candidate_response.tool_calls[0].name == calls[model][0]["name"]


def test_a_case_offering_no_tools_with_no_calls_is_not_applicable() -> None:
    from llm_connect.errors import CaseDataError
    from llm_connect.grading import Case
    from llm_connect.grading._report import lacks_case_data
    from llm_connect.types import Conversation, LLMResponse, RunConfig

    judge = ToolCallJudge()
    text = LLMResponse("hello", "m", "p")
    case = Case(id="c", prompt="hi")
    with pytest.raises(CaseDataError) as info:
        judge.judge(text, text, prompt="hi", run_config=RunConfig(), case=case)
    assert info.value.field == "tools" and lacks_case_data(case, info.value)
    offered = Case(
        id="c",
        prompt="hi",
        conversation=Conversation(
            [{"role": "user", "content": "hi"}], tools=[{"type": "function", "function": {"name": "f"}}]
        ),
    )
    # Offered tools and both declined: agreement.
    assert judge.judge(text, text, prompt="hi", run_config=RunConfig(), case=offered).quality_score == 1.0
