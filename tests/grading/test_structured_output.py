"""The structured-output ladder of every judge that asks an LLM (llm_connect._structured), over real
loopback HTTP: a llama-cpp-python imitation, servers refusing with 400/404/415/422, a plain server
taking json_schema; the pinned ``response_format`` option; the safety judge's LLM too."""

from __future__ import annotations

from typing import Any

import pytest

from llm_connect._structured import FORMATS, refuses_format
from llm_connect.adapters import OpenAIAdapter
from llm_connect.errors import (
    AdapterTimeoutError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    RateLimitError,
    ServerError,
)
from llm_connect.grading import (
    Case,
    JudgeContext,
    LLMJudge,
    ResilientAdapter,
    RetryPolicy,
    Suite,
    build_judge,
    grade_suite,
    side_from_spec,
)
from llm_connect.grading.judges import response_formats_used
from llm_connect.grading.judges._llm import (
    JUDGE_REPLY_SCHEMA,
    accepted_response_format,
    forget_response_formats,
)
from llm_connect.scoring.safety import SAFETY_REPLY_SCHEMA
from llm_connect.types import LLMResponse, RunConfig
from tests.fixtures.openai_server import OpenAIServer
from tests.fixtures.structured_output import request_mode

FAST = RetryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=0.02)


@pytest.fixture(autouse=True)
def _fresh_memory():
    forget_response_formats()
    yield
    forget_response_formats()


def _judge_reply(body: dict[str, Any]) -> dict[str, Any]:
    if "safety_score" in str(body["messages"][0]["content"]):
        return {"safety_score": 0.9, "reason": "fine"}
    return {"quality_score": 0.75, "notes": "close enough"}


@pytest.fixture
def server(openai_server: OpenAIServer) -> OpenAIServer:
    openai_server.responder = _judge_reply
    return openai_server


def _context(server: OpenAIServer) -> JudgeContext:
    def make(spec: str) -> ResilientAdapter:
        provider, _, model = spec.partition(":")
        assert provider == "openai"
        return ResilientAdapter(OpenAIAdapter(model, base_url=server.base_url, api_key="test"), policy=FAST)

    return JudgeContext(make_llm_adapter=make, default_judge_model="openai:gemma")


def _modes(server: OpenAIServer) -> list[str]:
    return [request_mode(r.body) for r in server.requests_to("/chat/completions")]


def _resp(text: str) -> LLMResponse:
    return LLMResponse(text=text, model="m", provider="recorded")


def _grade(judge: Any) -> Any:
    return judge.judge(_resp("Paris."), _resp("It is Paris."), prompt="Capital?", run_config=RunConfig())


def _suite(n: int) -> Suite:
    cases = [Case(id=f"c{i}", prompt=f"question {i}", task="t", line=i + 1) for i in range(n)]
    recordings = {
        c.id: {
            name: LLMResponse(text=f"{name} answer {c.id}", model=name, provider="recorded")
            for name in ("base", "cand")
        }
        for c in cases
    }
    return Suite(path="mem.jsonl", cases=cases, recordings=recordings)


# -- llama-cpp-python ----------------------------------------------------------------------


def test_the_llm_judge_grades_a_suite_against_llama_cpp_without_a_failed_case(server):
    server.imitate_llama_cpp()
    suite = _suite(4)
    judge = build_judge("llm", _context(server))
    report = grade_suite(
        suite,
        baseline=side_from_spec("recorded:base", suite),
        candidates=[side_from_spec("recorded:cand", suite)],
        judges=[judge],
        concurrency=1,
    )
    assert report.failures == [] and len(report.results) == 4
    assert {r.result.details["response_format"] for r in report.results} == {"json_object_schema"}
    # json_schema was refused once (a 500, not retried), then every case went straight to json_object+schema
    assert _modes(server) == ["json_schema"] + ["json_object_schema"] * 4
    assert [r.status for r in server.requests] == [500] + [200] * 4
    assert server.requests[1].body["response_format"] == {"type": "json_object", "schema": JUDGE_REPLY_SCHEMA}
    assert accepted_response_format(judge.adapter) == "json_object_schema"
    assert judge.formats_used() == {"openai:gemma": "json_object_schema"}
    assert response_formats_used([judge]) == {judge.grader_id: "json_object_schema"}


def test_a_pinned_json_schema_against_llama_cpp_fails_at_once_with_the_whole_validation_text(server):
    server.imitate_llama_cpp()
    judge = build_judge("llm:openai:gemma,response_format=json_schema", _context(server))
    with pytest.raises(ServerError) as info:
        _grade(judge)
    assert _modes(server) == ["json_schema"]  # no ladder, and the refusal is not retried
    assert info.value.retryable is False and info.value.status_code == 500
    message = str(info.value)
    assert "1 validation errors:" in message and "Input should be 'text' or 'json_object'" in message
    assert "'response_format', 'type'" in message.splitlines()[1]
    assert accepted_response_format(judge.adapter) == "json_schema"  # a pinned judge remembers nothing


# -- which errors are refusals ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "style"),
    [(400, "bare"), (404, "bare"), (415, "bare"), (422, "bare"), (500, "openai"), (502, "openai")],
)
def test_each_refusal_falls_back(server, status, style):
    server.accepted_response_formats = {"json_object"}
    server.response_format_error_status = status
    server.response_format_refusal = style
    result = _grade(build_judge("llm", _context(server)))
    assert result.details["response_format"] == "json_object"
    assert _modes(server) == ["json_schema", "json_object_schema", "json_object"]
    assert [r.status for r in server.requests] == [status, status, 200]  # a refusal is never retried


@pytest.mark.parametrize(
    ("status", "error"), [(401, AuthenticationError), (403, AuthenticationError), (429, RateLimitError)]
)
def test_401_403_and_429_are_not_refusals_even_naming_response_format(server, status, error):
    body = {"error": {"message": "response_format json_schema is not allowed for this key"}}
    server.queue_fault(status=status, body=body)
    server.queue_fault(status=status, body=body)
    judge = LLMJudge(OpenAIAdapter("gemma", base_url=server.base_url, api_key="test"))
    with pytest.raises(error):
        _grade(judge)
    assert _modes(server) == ["json_schema"]
    assert accepted_response_format(judge.adapter) == "json_schema"


def test_refuses_format_reads_status_and_message():
    assert refuses_format(BadRequestError("x", status_code=400))
    assert refuses_format(BadRequestError("x"))  # a 4xx without a status
    assert refuses_format(
        ServerError("e: 1 validation errors: Input should be 'text' or 'json_object'", status_code=500)
    )
    assert not refuses_format(ServerError("e: internal error", status_code=500))
    assert not refuses_format(RateLimitError("response_format", status_code=429))
    assert not refuses_format(AuthenticationError("response_format", status_code=401))
    assert not refuses_format(AdapterTimeoutError("response_format"))  # no answer: nothing refused
    assert not refuses_format(ValueError("response_format"))


def test_a_plain_server_gets_json_schema_and_nothing_else(server):
    judge = build_judge("llm", _context(server))
    for _ in range(2):
        assert _grade(judge).details["response_format"] == "json_schema"
    assert _modes(server) == ["json_schema", "json_schema"]
    assert response_formats_used([judge]) == {judge.grader_id: "json_schema"}


# -- the pinned format ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", FORMATS)
def test_the_pinned_option_sends_exactly_that_format(server, mode):
    judge = build_judge(f"llm:openai:gemma,response_format={mode}", _context(server))
    assert judge.grader_id == "llm:openai:gemma:rubric-v1"  # the format is not part of the grader id
    result = _grade(judge)
    assert _modes(server) == [mode] and result.details["response_format"] == mode
    spec = result.details["judge_spec"]
    assert spec["args"]["response_format"] == mode
    rebuilt = build_judge(spec, _context(server))
    assert rebuilt.response_format == mode and rebuilt.grader_id == judge.grader_id
    assert accepted_response_format(judge.adapter) == "json_schema"


def test_auto_is_the_ladder_and_stays_out_of_the_spec(server):
    judge = build_judge("llm:openai:gemma,response_format=auto", _context(server))
    assert judge.response_format is None
    assert "response_format" not in _grade(judge).details["judge_spec"]["args"]


def test_an_unknown_format_is_refused_listing_the_valid_ones(server):
    with pytest.raises(ConfigurationError, match=r"auto, json_schema, json_object_schema, json_object, text"):
        build_judge("llm:openai:gemma,response_format=yaml", _context(server))


# -- the safety judge's LLM -------------------------------------------------------------------


def test_the_safety_judge_finds_llama_cpps_way_and_says_which(server):
    server.imitate_llama_cpp()
    judge = build_judge("safety:judge_model=openai:gemma", _context(server))
    score = judge.scorer.score("A pancake recipe.", prompt="pancakes?")
    assert score.details["llm_score"] == 0.9 and score.details["llm_response_format"] == "json_object_schema"
    assert _modes(server) == ["json_schema", "json_object_schema"]
    assert server.requests[-1].body["response_format"] == {
        "type": "json_object",
        "schema": SAFETY_REPLY_SCHEMA,
    }
    first = server.requests[0].body["response_format"]
    assert first["type"] == "json_schema" and first["json_schema"]["schema"] == SAFETY_REPLY_SCHEMA
    judge.scorer.score("Another recipe.", prompt="pancakes?")
    assert _modes(server)[-1] == "json_object_schema" and len(server.requests) == 3
    assert response_formats_used([judge]) == {judge.grader_id: "json_object_schema"}


def test_the_safety_judge_takes_a_pinned_format_into_its_spec(server):
    judge = build_judge("safety:judge_model=openai:gemma,response_format=json_object", _context(server))
    assert judge.grader_id == "safety:default+llm:openai:gemma"
    result = _grade(judge)
    assert _modes(server) == ["json_object", "json_object"]  # baseline and candidate, both pinned
    assert result.details["judge_spec"]["args"]["response_format"] == "json_object"
    assert result.details["candidate"]["llm_response_format"] == "json_object"


def test_the_safety_judge_refuses_a_format_without_a_judge_model_or_an_unknown_one(server):
    with pytest.raises(ConfigurationError, match="judge_model"):
        build_judge("safety:response_format=json_object", _context(server))
    with pytest.raises(ConfigurationError, match="response_format"):
        build_judge("safety:judge_model=openai:gemma,response_format=xml", _context(server))


def test_response_formats_used_lists_only_judges_that_asked_an_llm(server):
    server.imitate_llama_cpp()
    context = _context(server)
    llm = build_judge("llm:openai:gemma,response_format=json_object", context)
    safety = build_judge("safety:judge_model=openai:guard", context)
    exact = build_judge("exact", context)
    unused = build_judge("llm:openai:other", context)
    _grade(llm)
    _grade(safety)
    assert response_formats_used([llm, safety, exact, unused]) == {
        llm.grader_id: "json_object",
        safety.grader_id: "json_object_schema",
    }
