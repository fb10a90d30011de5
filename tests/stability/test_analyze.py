"""analyze/aanalyze against the real loopback server and the real MiniLM weights."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llm_connect.errors import (
    ConfigurationError,
    InsufficientRunsError,
    StabilityEmbeddingError,
    ToolDefinitionError,
)
from llm_connect.stability import StabilityConfig, StabilityReport, aanalyze, analyze, query_from_dict
from llm_connect.types import Conversation, LLMResponse, RunConfig
from tests.fixtures.loops import run as run_closing
from tests.stability.conftest import (
    ANSWER,
    ORDER_TOOLS,
    identical,
    json_or_prose,
    script,
    short_or_long,
    tool_or_prose,
)

pytestmark = pytest.mark.embeddings

T0 = RunConfig(temperature=0.0)


def test_a_model_that_always_answers_identically_is_safe(openai_server, model, minilm):
    script(openai_server, identical)
    report = analyze(model, "Where is my order 42?", runs=20, run_config=T0, embedder=minilm)
    assert report.verdict == "SAFE"
    assert report.score == pytest.approx(1.0)
    assert all(m.score == pytest.approx(1.0) and m.variance == "LOW" for m in report.metrics)
    assert report.fingerprints == () and report.recommendations == ()
    assert report.agreement.raw_text == 1.0 and report.agreement.parsed_answer == 1.0
    assert report.runs_succeeded == 20 and len(openai_server.requests) == 20


def test_alternating_tool_use_is_nondeterministic_tool_routing(openai_server, model, minilm):
    script(openai_server, tool_or_prose)
    report = analyze(
        model, "Where is my order 42?", runs=20, run_config=T0, tools=ORDER_TOOLS, embedder=minilm
    )
    assert report.tool.score == pytest.approx(0.5) and report.tool.variance == "HIGH"
    assert report.tool.details["tool_usage_rate"] == pytest.approx(0.5)
    assert report.fingerprint_names[0] == "NONDETERMINISTIC_TOOL_ROUTING"
    assert "TOOL_CONFUSION" not in report.fingerprint_names  # the calls themselves agree
    assert report.verdict != "SAFE"
    fix = report.fingerprints[0].recommendations
    assert fix and any("lookup_order" in r.action or "lookup_order" in r.example for r in fix)


def test_different_calls_among_tool_callers_are_tool_confusion(openai_server, model, minilm):
    from tests.fixtures.openai_server import chat_completion

    script(
        openai_server,
        lambda i, body: chat_completion(
            body,
            None,
            tool_calls=[{"name": "lookup_order", "arguments": json.dumps({"order_id": str(i % 3)})}],
        ),
    )
    report = analyze(model, "Where is my order?", runs=12, run_config=T0, tools=ORDER_TOOLS, embedder=minilm)
    assert report.tool.details["tool_usage_rate"] == 1.0
    assert "TOOL_CONFUSION" in report.fingerprint_names
    assert "NONDETERMINISTIC_TOOL_ROUTING" not in report.fingerprint_names


def test_alternating_json_and_prose_is_format_inconsistency(openai_server, model, minilm):
    script(openai_server, json_or_prose)
    report = analyze(model, "Where is my order 42?", runs=20, run_config=T0, embedder=minilm)
    assert report.structural.score == pytest.approx(0.5) and report.structural.variance == "HIGH"
    assert report.structural.details["counts"] == {"json": 10, "text": 10}
    assert "FORMAT_INCONSISTENCY" in report.fingerprint_names
    assert {r.structure for r in report.runs} == {"json", "text"}


def test_lengths_varying_tenfold_are_verbosity_drift(openai_server, model, minilm):
    script(openai_server, short_or_long)
    report = analyze(model, "Where is my order 42?", runs=20, run_config=T0, embedder=minilm)
    assert report.length.variance == "HIGH" and report.length.score == 0.0
    assert report.length.details["max_words"] == 10 * report.length.details["min_words"]
    assert report.fingerprint_names == ("VERBOSITY_DRIFT",)
    assert report.verdict == "RISKY"


def test_a_config_override_changes_the_verdict(openai_server, model, minilm):
    script(openai_server, short_or_long)
    default = analyze(model, "q", runs=10, run_config=T0, embedder=minilm)
    lenient = StabilityConfig(safe_threshold=0.80)
    no_length = StabilityConfig().replace(semantic_weight=0.55, length_weight=0.0)
    assert default.verdict == "RISKY"
    assert analyze(model, "q", runs=10, run_config=T0, embedder=minilm, config=lenient).verdict == "SAFE"
    reweighted = analyze(model, "q", runs=10, run_config=T0, embedder=minilm, config=no_length)
    assert reweighted.verdict == "SAFE" and reweighted.config == no_length


def test_every_request_carries_the_messages_and_tools_given(openai_server, model, minilm):
    script(openai_server, identical)
    query = query_from_dict(
        {
            "messages": [
                {"role": "system", "content": "You track orders."},
                {"role": "user", "content": "Order 42?"},
            ]
        },
        tools=ORDER_TOOLS,
    )
    run_config = RunConfig(temperature=0.3, max_tokens=50)
    analyze(model, query, runs=6, run_config=run_config, embedder=minilm)
    bodies = [r.body for r in openai_server.requests]
    assert len(bodies) == 6
    for body in bodies:
        assert body["messages"] == [
            {"role": "system", "content": "You track orders."},
            {"role": "user", "content": "Order 42?"},
        ]
        assert body["tools"] == ORDER_TOOLS
        assert body["temperature"] == 0.3 and body["max_tokens"] == 50


def test_a_prompt_string_with_tools_sends_the_system_prompt_and_tools(openai_server, model, minilm):
    script(openai_server, identical)
    analyze(model, "Order 42?", runs=2, run_config=RunConfig(system_prompt="Be brief."), tools=ORDER_TOOLS,
            embedder=minilm)  # fmt: skip
    for request in openai_server.requests:
        assert request.body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert request.body["messages"][1] == {"role": "user", "content": "Order 42?"}
        assert request.body["tools"] == ORDER_TOOLS


def _peak_overlap(requests: list[Any]) -> int:
    """The most requests the server held at once (from its start/finish stamps)."""
    events = sorted([(r.started, 1) for r in requests] + [(r.finished, -1) for r in requests])
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def test_runs_are_concurrent_and_bounded(openai_server, model, minilm):
    script(openai_server, identical)
    openai_server.delay_s = 0.2
    analyze(model, "q", runs=20, run_config=T0, embedder=minilm, concurrency=10)
    requests = openai_server.requests
    assert len(requests) == 20 and all(r.finished is not None for r in requests)
    peak = _peak_overlap(requests)
    assert 5 <= peak <= 10, peak  # overlapping (one at a time would be 1), never above the bound


def test_concurrency_one_makes_one_call_at_a_time(openai_server, model, minilm):
    script(openai_server, identical)
    openai_server.delay_s = 0.05
    analyze(model, "q", runs=4, run_config=T0, embedder=minilm, concurrency=1)
    assert _peak_overlap(openai_server.requests) == 1


def test_every_run_makes_a_real_call(openai_server, model, minilm):
    script(openai_server, identical)
    analyze(model, "q", runs=5, run_config=T0, embedder=minilm)
    analyze(model, "q", runs=5, run_config=T0, embedder=minilm)
    assert len(openai_server.requests) == 10


def test_failed_runs_are_counted_not_fatal(openai_server, model, minilm):
    script(openai_server, identical)
    for _ in range(3):
        openai_server.queue_fault(status=500)
    report = analyze(model, "q", runs=20, run_config=T0, embedder=minilm)
    assert (report.runs_succeeded, report.runs_failed) == (17, 3)
    failed = [r for r in report.runs if not r.ok]
    assert all(r.error and r.error.startswith("ServerError") for r in failed)
    assert report.verdict == "SAFE" and report.min_successful_runs == 15


def test_fewer_than_the_minimum_successful_runs_raises(openai_server, model, minilm):
    for _ in range(6):
        openai_server.queue_fault(status=500)
    with pytest.raises(InsufficientRunsError) as info:
        analyze(model, "q", runs=20, run_config=T0, embedder=minilm)
    assert (info.value.succeeded, info.value.failed, info.value.minimum) == (14, 6, 15)
    assert len(info.value.errors) == 6 and "ServerError" in str(info.value)


def test_the_minimum_is_three_quarters_of_the_runs_and_at_least_two():
    config = StabilityConfig()
    assert [config.min_successful_runs(n) for n in (2, 3, 4, 20, 200)] == [2, 3, 3, 15, 150]


def test_the_report_keeps_each_run_and_round_trips_through_json(openai_server, model, minilm):
    openai_server.served_models = {"gpt-test": "gpt-test-2026-01-01"}
    script(openai_server, tool_or_prose)
    report = analyze(model, "Order 42?", runs=6, run_config=T0, tools=ORDER_TOOLS, embedder=minilm)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["version"] == 1 and data["verdict"] == report.verdict
    assert StabilityReport.from_dict(data) == report
    # Runs are concurrent: which run index got which scripted answer depends on arrival order.
    prose = next(r for r in report.runs if r.response is not None and not r.response.tool_calls)
    call = next(r for r in report.runs if r.response is not None and r.response.tool_calls)
    assert prose.response is not None and prose.response.model == "gpt-test-2026-01-01"  # the model served
    assert prose.text.startswith("I cannot look that up") and prose.response.latency_ms is not None
    assert call.tool_calls[0].name == "lookup_order" and call.tool_calls[0].parsed_arguments() == {
        "order_id": "42"
    }
    assert [r.index for r in report.runs] == list(range(6))
    assert report.query["tools"] == ORDER_TOOLS and report.embedder_id.endswith("all-MiniLM-L6-v2")


def test_claims_are_counted_per_run(openai_server, model, minilm):
    risky = "We guarantee delivery by March 3, 2025. I have verified it: 99% of orders arrive. Definitely."
    script(openai_server, lambda i, body: risky if i % 2 else ANSWER)
    report = analyze(model, "q", runs=10, run_config=T0, embedder=minilm)
    with_claims = [r.claims for r in report.runs if r.claims and any(r.claims.values())]
    assert len(with_claims) == 5
    assert with_claims[0] == {
        "guarantees": 1,
        "false_authority": 1,
        "specific_claims": 2,
        "overconfidence": 1,
    }
    assert report.claims.share == 0.5 and report.claims.variance == "HIGH"
    assert report.claims.totals["guarantees"] == 5
    assert report.fingerprint_names[0] == "UNCONSTRAINED_ASSERTIONS"


def test_an_embedder_failure_is_a_stability_embedding_error(openai_server, model):
    class Broken:
        adapter_id = "broken"

        def embed(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0]]  # one vector, whatever the texts

    script(openai_server, json_or_prose)
    with pytest.raises(StabilityEmbeddingError, match="1 vectors for 4 responses"):
        analyze(model, "q", runs=4, run_config=T0, embedder=Broken())


def test_the_responses_are_embedded_in_one_batched_call(openai_server, model):
    class Counting:
        adapter_id = "counting"

        def __init__(self) -> None:
            self.calls: list[list[str]] = []

        def embed(self, texts: list[str]) -> list[list[float]]:
            self.calls.append(list(texts))
            return [[1.0, float(len(t))] for t in texts]

    script(openai_server, json_or_prose)
    embedder = Counting()
    analyze(model, "q", runs=8, run_config=T0, embedder=embedder)
    assert len(embedder.calls) == 1 and len(embedder.calls[0]) == 8


def test_invalid_arguments_are_configuration_errors(model):
    with pytest.raises(ConfigurationError, match="runs"):
        analyze(model, "q", runs=1, run_config=T0)
    with pytest.raises(ConfigurationError, match="runs"):
        analyze(model, "q", runs=201, run_config=T0)
    with pytest.raises(ConfigurationError, match="concurrency"):
        analyze(model, "q", runs=2, run_config=T0, concurrency=0)
    with pytest.raises(ConfigurationError, match="cache"):
        analyze(model, "q", runs=2, run_config=T0, use_cache=True)
    with pytest.raises(ToolDefinitionError, match=r"tools\[0\]\.type"):
        analyze(model, "q", runs=2, run_config=T0, tools=[{"type": "retrieval"}])
    conversation = Conversation([{"role": "user", "content": "q"}], tools=ORDER_TOOLS)
    with pytest.raises(ToolDefinitionError, match="one place"):
        analyze(model, conversation, runs=2, run_config=T0, tools=ORDER_TOOLS)


def test_a_cache_is_used_only_when_asked(openai_server, model, minilm):
    class DictCache:
        def __init__(self) -> None:
            self.entries: dict[str, LLMResponse] = {}

        def cache_key(self, adapter_id, prompt, run_config, *, endpoint=None, sample=0):  # type: ignore[no-untyped-def]
            return f"{adapter_id}|{prompt.digest}|{endpoint}|{sample}"

        def cache_get(self, key: str) -> LLMResponse | None:
            return self.entries.get(key)

        def cache_put(self, key: str, adapter_id: str, response: LLMResponse) -> None:
            self.entries[key] = response

    script(openai_server, identical)
    cache = DictCache()
    analyze(model, "q", runs=4, run_config=T0, embedder=minilm, cache=cache)  # not asked: no cache
    assert cache.entries == {} and len(openai_server.requests) == 4
    analyze(model, "q", runs=4, run_config=T0, embedder=minilm, cache=cache, use_cache=True)
    assert len(cache.entries) == 4 and len(openai_server.requests) == 8  # one entry per run index
    again = analyze(model, "q", runs=4, run_config=T0, embedder=minilm, cache=cache, use_cache=True)
    assert len(openai_server.requests) == 8 and again.runs_succeeded == 4


def test_aanalyze_and_analyze_inside_a_running_loop(openai_server, model, minilm):
    script(openai_server, identical)
    progress: list[tuple[int, int]] = []

    async def main() -> tuple[StabilityReport, StabilityReport]:
        first = await aanalyze(
            model, "q", runs=3, run_config=T0, embedder=minilm, progress=lambda d, t: progress.append((d, t))
        )
        second = analyze(model, "q", runs=3, run_config=T0, embedder=minilm)  # runs on a worker thread
        return first, second

    first, second = run_closing(main())
    assert first.verdict == second.verdict == "SAFE"
    assert progress == [(1, 3), (2, 3), (3, 3)]


def test_the_ledger_serves_as_the_cache(openai_server, model, minilm, tmp_path):
    from llm_connect.ledger import QualityLedger

    script(openai_server, json_or_prose)
    ledger = QualityLedger(f"sqlite:///{tmp_path / 'ledger.db'}")
    first = analyze(model, "q", runs=4, run_config=T0, embedder=minilm, cache=ledger, use_cache=True)
    second = analyze(model, "q", runs=4, run_config=T0, embedder=minilm, cache=ledger, use_cache=True)
    assert len(openai_server.requests) == 4  # the second analysis was answered from the ledger
    assert [r.text for r in second.runs] == [r.text for r in first.runs]  # run i gets run i's answer
