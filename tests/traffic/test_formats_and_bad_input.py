"""LiteLLM's logging payload, Langfuse exports, detection, and bad input skipped by reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_connect.errors import TrafficImportError
from llm_connect.grading import load_suite
from llm_connect.traffic import ImportOptions, detect_format, import_traffic

TOOLS = [{"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}]

# LiteLLM's StandardLoggingPayload (docs.litellm.ai/docs/proxy/logging_spec), as its loggers write it
LITELLM = {
    "id": "chatcmpl-1",
    "trace_id": "t-1",
    "call_type": "acompletion",
    "status": "success",
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "Refund order 42"}],
    "model_parameters": {"temperature": 0.1, "tools": TOOLS, "tool_choice": "auto"},
    "response": {
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "function_call": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "refund", "arguments": '{"order":42}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
    },
    "response_cost": 0.00042,
    "startTime": 1767225600.0,
    "endTime": 1767225601.25,
    "request_tags": ["checkout"],
    "metadata": {"user_api_key_alias": "shop", "user_api_key_hash": "abc"},
    "error_str": None,
}

# Langfuse: a trace with its observations (GET /api/public/traces/{id}), generations among them
LANGFUSE_TRACE = {
    "id": "trace-1",
    "name": "support",
    "tags": ["prod", "support"],
    "userId": "u-9",
    "metadata": {"feature": "returns"},
    "observations": [
        {"id": "span-1", "type": "SPAN", "name": "retrieve"},
        {
            "id": "gen-1",
            "type": "GENERATION",
            "traceId": "trace-1",
            "name": "answer",
            "model": "gpt-4o",
            "modelParameters": {"temperature": "0.3", "max_tokens": 200},
            "input": [
                {"role": "system", "content": "Be kind."},
                {"role": "user", "content": "Where is my parcel?"},
            ],
            "output": {"role": "assistant", "content": "It ships tomorrow."},
            "usageDetails": {"input": 9, "output": 4, "total": 13},
            "costDetails": {"input": 0.0001, "output": 0.0002, "total": 0.0003},
            "startTime": "2026-01-01T10:00:00.000Z",
            "endTime": "2026-01-01T10:00:01.500Z",
            "level": "DEFAULT",
        },
        {
            "id": "gen-2",
            "type": "GENERATION",
            "model": "gpt-4o",
            "input": [{"role": "user", "content": "x"}],
            "output": None,
            "level": "ERROR",
            "statusMessage": "timeout",
        },
    ],
}


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_litellm_logging_payload(tmp_path: Path) -> None:
    path = _write(tmp_path / "litellm.jsonl", [LITELLM])
    assert detect_format(path) == "openai-log"
    out = tmp_path / "s.jsonl"
    import_traffic([path], out)
    suite = load_suite(out)
    case = suite.cases[0]
    assert case.conversation is not None and case.conversation.tool_names == ["refund"]
    assert case.conversation.tool_choice == "auto"
    assert case.tags == ("checkout",)
    assert case.metadata["run_settings"] == {"temperature": 0.1}
    assert case.metadata["trace_id"] == "t-1"
    r = suite.recorded(case, "production")
    assert (r.model, r.asked_model, r.cost_usd, r.latency_ms) == (
        "gpt-4o-mini-2024-07-18",
        "gpt-4o-mini",
        0.00042,
        1250.0,
    )
    assert [t.to_dict() for t in r.tool_calls] == [{"name": "refund", "arguments": '{"order":42}'}]
    assert r.usage is not None and (r.usage.prompt_tokens, r.usage.completion_tokens) == (12, 7)


@pytest.mark.parametrize("shape", ["json", "jsonl", "data"])
def test_langfuse_trace_export(shape: str, tmp_path: Path) -> None:
    path = tmp_path / f"langfuse.{shape}"
    if shape == "json":
        path.write_text(json.dumps([LANGFUSE_TRACE], indent=2))
    elif shape == "data":
        path.write_text(json.dumps({"data": LANGFUSE_TRACE["observations"], "meta": {"page": 1}}))
    else:
        _write(path, [LANGFUSE_TRACE])
    assert detect_format(path) == "langfuse"
    out = tmp_path / "s.jsonl"
    report = import_traffic([path], out, ImportOptions(task_from="feature"))
    assert report.dropped == {"errored call": 1} and report.written == 1
    suite = load_suite(out)
    case = suite.cases[0]
    assert case.id == "gen-1"
    r = suite.recorded(case, "production")
    assert (r.text, r.model, r.cost_usd, r.latency_ms) == ("It ships tomorrow.", "gpt-4o", 0.0003, 1500.0)
    assert r.usage is not None and r.usage.total_tokens == 13
    assert case.metadata["run_settings"] == {"temperature": 0.3, "max_tokens": 200}
    if shape != "data":
        assert case.tags == ("prod", "support") and case.task == "returns"


def test_bad_lines_are_skipped_by_reason_and_the_first_named(tmp_path: Path) -> None:
    good = {
        "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        "response": {"choices": [{"message": {"role": "assistant", "content": "hello"}}]},
    }
    refused = {
        "id": "bad-conv",
        "request": {"model": "m", "messages": [{"role": "assistant", "content": "last word is mine"}]},
        "response": "x",
    }
    path = tmp_path / "l.jsonl"
    path.write_text(
        json.dumps(good)
        + "\n{not json\n"
        + json.dumps({"request": {"model": "m"}})
        + "\n"
        + json.dumps(refused)
        + "\n"
    )
    report = import_traffic([path], tmp_path / "s.jsonl", ImportOptions(format="openai-log"))
    assert report.written == 1
    assert report.skipped == {"not valid JSON": 1, "no input messages": 1, "conversation refused": 1}
    assert report.examples[0].startswith(f"{path}:2: not valid JSON")
    assert report.examples[2].startswith(f"{path}:4 (bad-conv): conversation refused")
    meta = json.loads((tmp_path / "s.meta.json").read_text())
    assert meta["counts"]["skipped"] == report.skipped and meta["sources"][0]["file"] == str(path)

    with pytest.raises(TrafficImportError, match=r"l.jsonl:2: not valid JSON.*--strict: nothing written"):
        import_traffic([path], tmp_path / "strict.jsonl", ImportOptions(strict=True))
    assert not (tmp_path / "strict.jsonl").exists()


def test_an_otlp_span_without_input_messages_is_skipped_naming_its_span(tmp_path: Path) -> None:
    span = {
        "traceId": "aa" * 16,
        "spanId": "bb" * 8,
        "name": "chat m",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
        ],
    }
    http = {"traceId": "aa" * 16, "spanId": "cc" * 8, "name": "GET /", "attributes": []}
    line = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [span, http]}]}]}
    path = _write(tmp_path / "t.jsonl", [line])
    with pytest.raises(TrafficImportError, match=r"read 0 calls in 2 spans \(1 no input messages\)"):
        import_traffic([path], tmp_path / "s.jsonl")


def test_unknown_and_undetectable_formats(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.jsonl", [{"hello": 1}])
    with pytest.raises(TrafficImportError, match="unknown format 'csv'"):
        import_traffic([path], tmp_path / "s.jsonl", ImportOptions(format="csv"))
    with pytest.raises(TrafficImportError, match="cannot tell the format"):
        import_traffic([path], tmp_path / "s.jsonl")
    with pytest.raises(TrafficImportError, match="needs --sample"):
        import_traffic([path], tmp_path / "s.jsonl", ImportOptions(stratify_by="task"))
