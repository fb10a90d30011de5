"""The ``pairwise`` judge (issue 22, item 1) through the loopback OpenAI-compatible server.

Every judge reply here is scripted by a responder reading the real request the
judge sent over HTTP; sides are recorded in the suite, so the only model calls
are the judge's.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from llm_connect.adapters import OpenAIAdapter
from llm_connect.errors import ConfigurationError, JudgeOutputError
from llm_connect.grading import (
    BatchGrader,
    Case,
    JudgeContext,
    PairedGrader,
    PairwiseJudge,
    Suite,
    build_judge,
)
from llm_connect.grading._batch import RecordedSide
from llm_connect.grading.judges import format_judge_spec, judge_asks_llm, judge_names
from llm_connect.grading.judges._llm import forget_response_formats
from llm_connect.grading.judges._pairwise import (
    PAIRWISE_PROMPT,
    PAIRWISE_REPLY_SCHEMA,
    draw_order,
    pairwise_grade,
    parse_pairwise_reply,
)
from llm_connect.grading.judges._registry import is_llm_grader_id
from llm_connect.types import LLMResponse, RunConfig, ToolCall
from tests.fixtures.loops import run as run_closing
from tests.fixtures.openai_server import OpenAIServer
from tests.fixtures.structured_output import request_mode

BASE_MODEL = "zebra-baseline-model"
CAND_MODEL = "okapi-candidate-model"


@pytest.fixture(autouse=True)
def _fresh_response_format_memory():
    forget_response_formats()
    yield
    forget_response_formats()


def fences(user_message: str) -> dict[str, str]:
    """``{NAME: fenced text}`` for every fence of the judge's user message."""
    pattern = re.compile(r"<<<BEGIN (\w+) (\w+)>>>\n(.*?)\n<<<END \1 \2>>>", re.DOTALL)
    return {m.group(1): m.group(3) for m in pattern.finditer(user_message)}


def shown(body: dict[str, Any]) -> dict[str, str]:
    return fences(body["messages"][-1]["content"])


def always(verdict: str, notes: str = "scripted") -> Any:
    return lambda body: {"notes": notes, "verdict": verdict}


def picks_text_starting(prefix: str) -> Any:
    """A judge that prefers whichever answer starts with ``prefix``, wherever it is shown."""

    def respond(body: dict[str, Any]) -> dict[str, str]:
        answers = shown(body)
        return {"notes": "picked", "verdict": "A" if answers["ANSWER_A"].startswith(prefix) else "B"}

    return respond


def suite_of(n: int) -> Suite:
    cases = [Case(id=f"c{i}", prompt=f"question {i}", task="qa", line=i + 1) for i in range(n)]
    recordings = {
        c.id: {
            "base": LLMResponse(text=f"BASE answer {i}", model=BASE_MODEL, provider="recorded"),
            "cand": LLMResponse(text=f"CAND answer {i}", model=CAND_MODEL, provider="recorded"),
        }
        for i, c in enumerate(cases)
    }
    return Suite(path="mem.jsonl", cases=cases, recordings=recordings)


def judge_of(server: OpenAIServer, **options: Any) -> PairwiseJudge:
    return PairwiseJudge(OpenAIAdapter("judge", base_url=server.base_url, api_key="sk-test"), **options)


def run(judge: PairwiseJudge, suite: Suite) -> Any:
    return BatchGrader(
        baseline=RecordedSide("base", suite), candidates=[RecordedSide("cand", suite)], judges=[judge]
    ).run(suite)


def judged(server: OpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests_to("/chat/completions") if r.status == 200]


def _resp(text: str, model: str = "m", **kw: Any) -> LLMResponse:
    return LLMResponse(text=text, model=model, provider="recorded", **kw)


# -- grades: both orders ------------------------------------------------------------------


def test_a_judge_that_always_says_a_gets_half_and_is_never_position_consistent(
    openai_server: OpenAIServer,
) -> None:
    openai_server.responder = always("A")
    report = run(judge_of(openai_server), suite_of(4))
    assert not report.failures and len(report.results) == 4
    for item in report.results:
        result = item.result
        assert result.quality_score == 0.5
        d = result.details
        assert d["orders"] == "both"
        assert d["shown_first"] == ["baseline", "candidate"]
        assert d["verdicts"] == ["A", "A"]
        assert d["winners"] == ["baseline", "candidate"]
        assert d["first_shown_wins"] == [True, True]
        assert d["position_consistent"] is False
        assert "flips with the order" in result.notes
    assert len(judged(openai_server)) == 8  # two calls per case


def test_a_judge_that_always_picks_the_candidate_gives_one_in_both_orders(
    openai_server: OpenAIServer,
) -> None:
    openai_server.responder = picks_text_starting("CAND")
    report = run(judge_of(openai_server), suite_of(3))
    assert not report.failures
    for item in report.results:
        d = item.result.details
        assert item.result.quality_score == 1.0
        assert d["verdicts"] == ["B", "A"] and d["winners"] == ["candidate", "candidate"]
        assert d["first_shown_wins"] == [False, True] and d["position_consistent"] is True
        assert item.result.notes.startswith("candidate preferred in both orders")
    openai_server.reset()
    openai_server.responder = picks_text_starting("BASE")
    assert {i.result.quality_score for i in run(judge_of(openai_server), suite_of(3)).results} == {0.0}


@pytest.mark.parametrize(
    ("winners", "grade"),
    [
        (["candidate", "candidate"], 1.0),
        (["baseline", "baseline"], 0.0),
        (["tie", "tie"], 0.5),
        (["candidate", "baseline"], 0.5),  # a flip is a tie
        (["candidate", "tie"], 0.5),  # a win and a tie: 0.5 too
        (["tie", "baseline"], 0.5),
        (["candidate"], 1.0),
        (["baseline"], 0.0),
        (["tie"], 0.5),
    ],
)
def test_the_grade_rule(winners: list[str], grade: float) -> None:
    assert pairwise_grade(winners) == grade


def test_a_tie_in_one_order_and_a_win_in_the_other_is_half(openai_server: OpenAIServer) -> None:
    def respond(body: dict[str, Any]) -> dict[str, str]:
        first = shown(body)["ANSWER_A"]
        return {"notes": "n", "verdict": "tie" if first.startswith("BASE") else "A"}

    openai_server.responder = respond
    judge = judge_of(openai_server)
    result = judge.judge(_resp("BASE b"), _resp("CAND c"), prompt="p", run_config=RunConfig())
    assert result.quality_score == 0.5
    assert result.details["winners"] == ["tie", "candidate"]
    assert result.details["first_shown_wins"] == [False, True]
    assert result.details["position_consistent"] is False
    assert result.notes.startswith("candidate preferred in one order, tie in the other")


# -- orders=one ------------------------------------------------------------------------------


def test_orders_one_asks_once_in_an_order_drawn_from_the_seed(openai_server: OpenAIServer) -> None:
    openai_server.responder = picks_text_starting("CAND")
    suite = suite_of(16)
    report = run(judge_of(openai_server, orders="one", seed=7), suite)
    assert not report.failures and len(judged(openai_server)) == 16  # one call per case
    firsts = {i.case_id: i.result.details["shown_first"] for i in report.results}
    assert all(len(f) == 1 for f in firsts.values())
    assert {f[0] for f in firsts.values()} == {"baseline", "candidate"}  # varies across cases
    for case in suite.cases:
        assert firsts[case.id] == [draw_order(7, case.prompt)]
    for item in report.results:
        d = item.result.details
        assert item.result.quality_score == 1.0 and d["position_consistent"] is None
        assert d["orders"] == "one" and d["seed"] == 7
    # The same seed draws the same orders again, whatever order the cases are graded in.
    reversed_suite = Suite(path="mem.jsonl", cases=list(reversed(suite.cases)), recordings=suite.recordings)
    again = run(judge_of(openai_server, orders="one", seed=7), reversed_suite)
    assert {i.case_id: i.result.details["shown_first"] for i in again.results} == firsts
    # Another seed draws another order for some cases.
    assert [draw_order(8, c.prompt) for c in suite.cases] != [draw_order(7, c.prompt) for c in suite.cases]


def test_orders_one_grades_a_tie_half(openai_server: OpenAIServer) -> None:
    openai_server.responder = always("tie")
    judge = judge_of(openai_server, orders="one")
    result = judge.judge(_resp("b"), _resp("c"), prompt="p", run_config=RunConfig())
    assert result.quality_score == 0.5 and len(openai_server.requests) == 1
    assert result.details["winners"] == ["tie"] and result.details["first_shown_wins"] == [False]


# -- what is sent ----------------------------------------------------------------------------


def test_both_answers_are_fenced_under_the_versioned_prompt_without_model_names(
    openai_server: OpenAIServer,
) -> None:
    openai_server.responder = always("tie")
    report = run(judge_of(openai_server, seed=3), suite_of(1))
    assert not report.failures
    bodies = judged(openai_server)
    assert len(bodies) == 2
    for body in bodies:
        assert body["model"] == "judge" and body["temperature"] == 0.0 and body["seed"] == 3
        assert body["messages"][0] == {"role": "system", "content": PAIRWISE_PROMPT}
        text = json.dumps(body)
        assert BASE_MODEL not in text and CAND_MODEL not in text
        assert "baseline" not in body["messages"][-1]["content"].lower()
        assert "candidate" not in body["messages"][-1]["content"].lower()
    # The grader puts both orders in flight together, so they may reach the server in either order.
    assert sorted((shown(body) for body in bodies), key=lambda answers: answers["ANSWER_A"]) == [
        {"PROMPT": "question 0", "ANSWER_A": "BASE answer 0", "ANSWER_B": "CAND answer 0"},
        {"PROMPT": "question 0", "ANSWER_A": "CAND answer 0", "ANSWER_B": "BASE answer 0"},
    ]


def test_no_seed_is_sent_unless_configured_and_the_system_prompt_is_shown(
    openai_server: OpenAIServer,
) -> None:
    openai_server.responder = always("tie")
    judge_of(openai_server).judge(
        _resp("b"), _resp("c"), prompt="p", run_config=RunConfig(system_prompt="Answer in French.")
    )
    body = openai_server.requests[0].body
    assert "seed" not in body
    assert shown(body)["SYSTEM_PROMPT"] == "Answer in French."


def test_a_conversation_with_tool_calls_is_shown(openai_server: OpenAIServer) -> None:
    openai_server.responder = always("B")
    transcript = 'user: Where is order 42?\nassistant calls lookup({"id": 42})\ntool: lost\nuser: Refund it.'
    baseline = _resp("", tool_calls=(ToolCall("refund", '{"order_id": 42}'),))
    candidate = _resp("", tool_calls=(ToolCall("delete_account", "{}"),))
    result = judge_of(openai_server).judge(baseline, candidate, prompt=transcript, run_config=RunConfig())
    first, second = (r.body for r in openai_server.requests)
    assert shown(first) == {
        "PROMPT": transcript,
        "ANSWER_A": '[tool call] refund({"order_id": 42})',
        "ANSWER_B": "[tool call] delete_account({})",
    }
    assert shown(second)["ANSWER_A"] == "[tool call] delete_account({})"
    assert "tools" not in first  # the judge is not offered the graded model's tools
    assert result.details["winners"] == ["candidate", "baseline"]


def test_the_judge_asks_for_a_strict_schema_and_walks_the_ladder_against_llama_cpp(
    openai_server: OpenAIServer,
) -> None:
    openai_server.imitate_llama_cpp()
    openai_server.responder = picks_text_starting("CAND")
    report = run(judge_of(openai_server), suite_of(3))
    assert not report.failures
    requests = openai_server.requests_to("/chat/completions")
    # Both orders' first calls are in flight together: each is refused once (500, not retried).
    refused = [request_mode(r.body) for r in requests if r.status != 200]
    assert refused and set(refused) == {"json_schema"} and {r.status for r in requests} == {200, 500}
    assert [request_mode(r.body) for r in requests if r.status == 200] == ["json_object_schema"] * 6
    openai_server.reset()
    openai_server.imitate_llama_cpp()
    openai_server.responder = picks_text_starting("CAND")
    assert not run(judge_of(openai_server), suite_of(2)).failures  # remembered: no refusal any more
    assert {request_mode(r.body) for r in openai_server.requests} == {"json_object_schema"}
    assert {r.status for r in openai_server.requests} == {200}
    assert requests[0].body["response_format"]["json_schema"] == {
        "name": "pairwise_verdict",
        "strict": True,
        "schema": PAIRWISE_REPLY_SCHEMA,
    }
    assert requests[-1].body["response_format"] == {"type": "json_object", "schema": PAIRWISE_REPLY_SCHEMA}
    for item in report.results:
        assert item.result.quality_score == 1.0
        assert item.result.details["response_format"] == "json_object_schema"
        assert item.result.details["response_formats"] == ["json_object_schema"] * 2


def test_a_pinned_response_format_is_sent_and_kept_in_the_spec(openai_server: OpenAIServer) -> None:
    openai_server.responder = always("tie")
    judge = judge_of(openai_server, response_format="text")
    judge.judge(_resp("b"), _resp("c"), prompt="p", run_config=RunConfig())
    assert all("response_format" not in r.body for r in openai_server.requests)
    assert judge.formats_used() == {"openai:judge": "text"}
    assert judge.grader_id == "pairwise:openai:judge:pairwise-v1"


def test_ajudge_puts_both_orders_in_flight_together(openai_server: OpenAIServer) -> None:
    openai_server.responder = always("B")
    openai_server.delay_s = 0.3
    result = run_closing(
        judge_of(openai_server).ajudge(_resp("b"), _resp("c"), prompt="p", run_config=RunConfig())
    )
    first, second = openai_server.requests
    assert first.finished is not None and second.started < first.finished  # overlapping
    assert result.details["winners"] == ["candidate", "baseline"] and result.quality_score == 0.5


# -- unusable replies: the case fails, never a guessed tie --------------------------------------


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ({"notes": "unsure", "verdict": "maybe"}, "must be one of 'A', 'B', 'tie', not 'maybe'"),
        ("Answer A is clearly better.", "no JSON object"),
        ({"notes": "n", "verdict": "Tie"}, "not 'Tie'"),
        ({"notes": "n", "verdict": "C"}, "not 'C'"),
        ({"notes": "n", "verdict": None}, "not None"),
        ({"notes": "n", "verdict": "A", "confidence": 0.9}, "keys the schema forbids: 'confidence'"),
        ('{"verdict": "A", "verdict": "B"}', "repeats the key 'verdict'"),
        ('{"verdict": "A", "notes": "unfinished', "malformed JSON"),
        (
            {"notes": "<your comparison in one or two sentences>", "verdict": "A"},
            "copied the answer template's placeholder",
        ),
    ],
)
def test_an_unusable_reply_fails_the_case(openai_server: OpenAIServer, reply: Any, problem: str) -> None:
    openai_server.responder = lambda body: reply
    report = run(judge_of(openai_server), suite_of(2))
    assert report.results == []
    assert len(report.failures) == 2
    for failure in report.failures:
        assert failure.stage == "judge" and failure.error_type == "JudgeOutputError"
        assert problem in failure.message
        assert "pairwise:openai:judge:pairwise-v1 (baseline shown first)" in failure.message


def test_one_bad_order_fails_the_case_through_paired_grading(openai_server: OpenAIServer) -> None:
    def respond(body: dict[str, Any]) -> Any:
        if body["model"] != "judge":
            return f"{body['model']} answers"
        return {"notes": "n", "verdict": "A"} if shown(body)["ANSWER_A"].startswith("base") else "no idea"

    openai_server.responder = respond
    grader = PairedGrader(judge_of(openai_server))
    base = OpenAIAdapter("base", base_url=openai_server.base_url, api_key="sk-test")
    cand = OpenAIAdapter("cand", base_url=openai_server.base_url, api_key="sk-test")
    with pytest.raises(JudgeOutputError, match=r"\(candidate shown first\).*no JSON object") as info:
        grader.grade(base, cand, "Q?", RunConfig())
    assert info.value.raw_reply == "no idea"
    with pytest.raises(JudgeOutputError, match=r"\(candidate shown first\)"):
        run_closing(grader.agrade(base, cand, "Q?", RunConfig()))


@pytest.mark.parametrize(
    ("reply", "strict", "expected"),
    [
        ('{"notes": "close", "verdict": "A"}', True, ("A", "close")),
        ('{"verdict": "tie"}', True, ("tie", "")),
        ('Here:\n```json\n{"notes": "b wins", "verdict": "B"}\n```', False, ("B", "b wins")),
        ('{"verdict": "B", "notes": "x", "reasoning": "long"}', False, ("B", "x")),  # extra key: not strict
        ('{"verdict": "A", "notes": ["a", "b"]}', True, ("A", '["a", "b"]')),
    ],
)
def test_parseable_replies(reply: str, strict: bool, expected: tuple[str, str]) -> None:
    assert parse_pairwise_reply(reply, strict=strict) == expected


def test_extra_keys_are_refused_only_when_the_schema_was_sent(openai_server: OpenAIServer) -> None:
    openai_server.responder = lambda body: {"notes": "n", "verdict": "A", "reasoning": "r"}
    result = judge_of(openai_server, response_format="json_object").judge(
        _resp("b"), _resp("c"), prompt="p", run_config=RunConfig()
    )
    assert result.details["verdicts"] == ["A", "A"]
    with pytest.raises(JudgeOutputError, match="schema forbids"):
        judge_of(openai_server).judge(_resp("b"), _resp("c"), prompt="p", run_config=RunConfig())


# -- registry, spec, identity ------------------------------------------------------------------


def _context(server: OpenAIServer, **kw: Any) -> JudgeContext:
    return JudgeContext(
        make_llm_adapter=lambda spec: OpenAIAdapter(spec.partition(":")[2], base_url=server.base_url),
        **kw,
    )


def test_the_registry_builds_it_and_its_stored_spec_rebuilds_it(openai_server: OpenAIServer) -> None:
    openai_server.responder = always("tie")
    assert "pairwise" in judge_names()
    judge = build_judge("pairwise:openai:judge,orders=one,seed=11", _context(openai_server))
    assert isinstance(judge, PairwiseJudge)
    assert (judge.grader_id, judge.orders, judge.seed) == ("pairwise:openai:judge:pairwise-v1", "one", 11)
    assert judge.asks_llm is True and judge_asks_llm(judge) and is_llm_grader_id(judge.grader_id)
    result = judge.judge(_resp("b"), _resp("c"), prompt="p", run_config=RunConfig())
    assert result.asks_llm is True
    spec = dict(result.details["judge_spec"])
    assert spec == {
        "name": "pairwise",
        "args": {"model": "openai:judge", "orders": "one", "seed": 11},
        "asks_llm": True,
    }
    rebuilt = build_judge(spec, _context(openai_server))
    assert isinstance(rebuilt, PairwiseJudge)
    assert (rebuilt.grader_id, rebuilt.orders, rebuilt.seed) == (judge.grader_id, "one", 11)
    assert format_judge_spec(spec) == "pairwise:model=openai:judge,orders=one,seed=11"
    json.dumps(dict(result.details))


def test_without_a_model_it_uses_the_judge_model_option(openai_server: OpenAIServer) -> None:
    judge = build_judge("pairwise", _context(openai_server, default_judge_model="openai:house-judge"))
    assert judge.grader_id == "pairwise:openai:house-judge:pairwise-v1"
    with pytest.raises(ConfigurationError, match="needs a judge model"):
        build_judge("pairwise", JudgeContext())


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("pairwise:openai:judge,orders=three", "'orders' must be both or one"),
        ("pairwise:openai:judge,response_format=yaml", "response_format"),
        ("pairwise:openai:judge,order=one", "did you mean 'orders'"),
        ('pairwise:openai:judge,seed="7"', "seed"),
    ],
)
def test_bad_options_are_refused_when_built(openai_server: OpenAIServer, spec: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(problem)):
        build_judge(spec, _context(openai_server))


def test_details_keep_cost_usage_and_answer_lengths(openai_server: OpenAIServer) -> None:
    openai_server.responder = always("A", notes="first is fine")
    result = judge_of(openai_server).judge(_resp("bb"), _resp("cccc"), prompt="p", run_config=RunConfig())
    d = result.details
    assert d["answer_chars"] == {"baseline": 2, "candidate": 4}
    assert d["judge_notes"] == ["first is fine", "first is fine"]
    assert [json.loads(r) for r in d["raw_replies"]] == [{"notes": "first is fine", "verdict": "A"}] * 2
    assert len(d["judge_usage"]) == 2 and d["judge_model"] == "judge"
    assert d["prompt_version"] == "pairwise-v1" and d["response_format"] == "json_schema"
    assert "baseline first: A (baseline) first is fine" in result.notes
