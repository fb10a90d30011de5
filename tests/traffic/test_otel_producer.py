"""Spans from the real OpenTelemetry SDK and OpenAI instrumentation import to what the server saw.

The producer (``tests/traffic/_produce.py``, a subprocess) makes real ``openai`` SDK calls to the
tests' HTTP server with content capture on, and the SDK's OTLP JSON file exporters write spans and
log records (batched, so a span's records and the span come in separate exports, in either order).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llm_connect.errors import TrafficImportError
from llm_connect.grading import load_suite
from llm_connect.traffic import ImportOptions, import_traffic
from tests.fixtures.openai_server import OpenAIServer, chat_completion
from tests.fixtures.skips import import_or_skip
from tests.traffic._produce import CALLS


@pytest.fixture(autouse=True)
def _producers() -> None:
    for module in ("opentelemetry.instrumentation.openai_v2", "opentelemetry.exporter.otlp.json.file"):
        import_or_skip(module, tests="the OpenTelemetry producer tests")


SERVED = "gpt-test-2025-01-01"
REPO = Path(__file__).resolve().parents[2]


def _responder(body: dict[str, Any]) -> dict[str, Any]:
    served = {**body, "model": SERVED}
    if body.get("tools"):
        return chat_completion(served, None, tool_calls=[{"name": "refund", "arguments": '{"order": 42}'}])
    if body["messages"][-1]["role"] == "tool":
        return chat_completion(served, "Order 7 is refunded.")
    return chat_completion(served, "Blue.")


def _produce(mode: str, server: OpenAIServer, tmp_path: Path) -> tuple[Path, Path]:
    traces, logs = tmp_path / f"{mode}-traces.jsonl", tmp_path / f"{mode}-logs.jsonl"
    subprocess.run(
        [sys.executable, "-m", "tests.traffic._produce", mode, server.base_url, str(traces), str(logs)],
        cwd=REPO,
        check=True,
        timeout=120,
    )
    return traces, logs


def _without_none(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


@pytest.mark.parametrize("mode", ["legacy", "span_only", "event_only"])
def test_instrumented_openai_calls_import_to_what_the_server_saw(
    mode: str, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = _responder
    traces, logs = _produce(mode, openai_server, tmp_path)
    assert traces.read_text().startswith('{"resourceSpans"')
    requests = openai_server.requests
    assert len(requests) == len(CALLS)

    out = tmp_path / "suite.jsonl"
    report = import_traffic([traces, logs], out)
    assert report.format == "otlp-json"
    assert report.calls == len(CALLS) + 1
    assert report.dropped == {"errored call": 1}  # the call to the unreachable server
    assert report.skipped == {}
    assert report.written == len(CALLS)
    # the instrumentation does not record tool definitions; the import says so
    assert report.notes["answers that call tools the trace does not define"] == 1

    suite = load_suite(out)
    by_messages = {json.dumps(c.conversation.messages, sort_keys=True): c for c in suite.cases}
    for request in requests:
        sent = _without_none(request.body["messages"])
        case = by_messages[json.dumps(sent, sort_keys=True)]
        answer = _responder(request.body)
        recorded = suite.recorded(case, "production")
        message = answer["choices"][0]["message"]
        assert recorded.text == (message["content"] or "")
        assert [(t.name, t.arguments) for t in recorded.tool_calls] == [
            (t["function"]["name"], t["function"]["arguments"]) for t in message.get("tool_calls") or ()
        ]
        assert recorded.model == SERVED and recorded.asked_model == "gpt-test"
        assert recorded.usage is not None
        assert (recorded.usage.prompt_tokens, recorded.usage.completion_tokens) == (
            answer["usage"]["prompt_tokens"],
            answer["usage"]["completion_tokens"],
        )
        assert recorded.finish_reason == answer["choices"][0]["finish_reason"]
        assert recorded.latency_ms is not None and recorded.latency_ms > 0
        assert case.task == "gpt-test"
        assert case.metadata["service"] == "shop-assistant"
        if "temperature" in request.body:
            assert case.metadata["run_settings"] == {"temperature": 0.2, "max_tokens": 50}


def test_records_before_and_after_their_span_in_one_file_join(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = _responder
    traces, logs = _produce("legacy", openai_server, tmp_path)
    mixed = tmp_path / "collector.jsonl"  # one file, as a Collector's traces and logs pipelines write it
    lines = traces.read_text().splitlines() + logs.read_text().splitlines()
    mixed.write_text("\n".join(lines[len(lines) // 2 :] + lines[: len(lines) // 2]) + "\n")
    report = import_traffic([mixed], tmp_path / "suite.jsonl")
    assert report.written == len(CALLS) and report.skipped == {}


def test_a_small_join_window_takes_a_waiting_span_with_what_it_has(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = _responder
    traces, logs = _produce("legacy", openai_server, tmp_path)
    # the traces file comes whole before the logs file: with a window of one span, every span
    # is taken before its records arrive, so none has input messages, and nothing is written
    with pytest.raises(TrafficImportError, match=r"no case left to write.*no input messages"):
        import_traffic([traces, logs], tmp_path / "suite.jsonl", ImportOptions(join_window=1))
    assert not (tmp_path / "suite.jsonl").exists()
