"""``llm-connect suite import`` then ``grade --baseline recorded:production``: only candidate calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli._util import invoke
from tests.fixtures.openai_server import OpenAIServer

KEY = "sk-test-SECRETSECRETSECRET0123456789"


def _litellm_log(path: Path, n: int) -> Path:
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"call-{i}",
                "status": "success",
                "model": "big",
                "messages": [{"role": "user", "content": f"question {i}"}],
                "model_parameters": {"temperature": 0},
                "response": {
                    "model": "big-2025-01-01",
                    "choices": [{"message": {"role": "assistant", "content": f"echo: question {i}"}}],
                    "usage": {"prompt_tokens": 2, "completion_tokens": 3},
                },
                "response_cost": 0.01,
                "startTime": 100.0,
                "endTime": 100.9,
                "request_tags": ["faq"],
            }
        )
    rows.append({**rows[0], "id": "dup"})  # an exact duplicate conversation
    rows.append({**rows[1], "id": "failed", "status": "failure", "error_str": "429"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    return path


def test_import_then_grade_calls_only_the_candidate(tmp_path: Path, openai_server: OpenAIServer) -> None:
    log = _litellm_log(tmp_path / "litellm.jsonl", 6)
    suite = tmp_path / "suite.jsonl"
    result = invoke("suite", "import", str(log), "-o", str(suite), "--task", "faq", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["written"] == 6 and report["duplicates"] == 1
    assert report["dropped"] == {"errored call": 1} and report["skipped"] == {"not valid JSON": 1}
    assert json.loads((tmp_path / "suite.meta.json").read_text())["counts"]["written"] == 6
    assert openai_server.requests == []  # nothing is sent anywhere during import

    graded = invoke(
        "grade", str(suite), "--baseline", "recorded:production", "--candidate", "openai:small",
        "--price", "small=1000,1000", "--base-url", openai_server.base_url, "--api-key", KEY,
        "--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--json",
    )  # fmt: skip
    assert graded.exit_code == 0, graded.output
    assert len(openai_server.requests) == 6  # one call per case, all to the candidate
    assert {r.body["model"] for r in openai_server.requests} == {"small"}
    (stats,) = json.loads(graded.stdout)["stats"]
    assert stats["n"] == 6 and stats["mean"] == 1.0  # the server echoes what production answered
    # the baseline's cost and latency come from the log: $0.01 and 900 ms per call
    # the candidate: "question i" + "echo: question i" = 2 + 3 words at $1000/M tokens = $0.005
    assert stats["cost_ratio"] == pytest.approx(0.5)
    assert stats["latency_ratio"] is not None and 0 < stats["latency_ratio"] < 1


def test_strict_and_bad_options_exit_2_with_nothing_written(tmp_path: Path) -> None:
    log = _litellm_log(tmp_path / "litellm.jsonl", 2)
    suite = tmp_path / "suite.jsonl"
    strict = invoke("suite", "import", str(log), "-o", str(suite), "--strict")
    assert strict.exit_code == 2 and "not valid JSON" in strict.stderr and "--strict" in strict.stderr
    assert not suite.exists()
    unknown = invoke("suite", "import", str(log), "-o", str(suite), "--format", "csv")
    assert unknown.exit_code == 2 and "unknown format 'csv'" in unknown.stderr


def test_plain_output_names_counts_strata_and_warnings(tmp_path: Path) -> None:
    log = _litellm_log(tmp_path / "litellm.jsonl", 4)
    result = invoke(
        "suite", "import", str(log), "-o", str(tmp_path / "s.jsonl"), "--sample", "3",
        "--stratify-by", "tag", "--per-stratum", "--seed", "3",
    )  # fmt: skip
    assert result.exit_code == 0
    assert "3 cases written" in result.stdout and "stratum faq: 3 of 4" in result.stdout
    assert "skipped: 1 not valid JSON" in result.stdout and "left out: 1 errored call" in result.stdout


def _rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_format_that_reads_nothing_says_what_the_file_holds(tmp_path: Path) -> None:
    openai = _litellm_log(tmp_path / "openai.jsonl", 2)
    langfuse = _rows(
        tmp_path / "langfuse.jsonl",
        [{"id": "o1", "type": "GENERATION", "input": "hi", "output": "hello", "model": "m"}],
    )
    otlp = _rows(tmp_path / "otlp.jsonl", [_spans_line([_chat_span(1)])])
    suite = tmp_path / "suite.jsonl"
    for path, fmt, holds, use in [
        (openai, "langfuse", "OpenAI-style log lines", "openai-log"),
        (openai, "otlp-json", "OpenAI-style log lines", "openai-log"),
        (langfuse, "openai-log", "Langfuse observations", "langfuse"),
        (otlp, "langfuse", "OpenTelemetry exports (OTLP JSON)", "otlp-json"),
    ]:
        result = invoke("suite", "import", str(path), "-o", str(suite), "--format", fmt)
        assert result.exit_code == 2, result.output
        assert f"{path} holds {holds}, not " in result.stderr and f"use --format {use}; " in result.stderr
        assert "nothing written" in result.stderr and not suite.exists()
    unknown = _rows(tmp_path / "other.jsonl", [{"hello": 1}])
    result = invoke("suite", "import", str(unknown), "-o", str(suite), "--format", "langfuse")
    assert result.exit_code == 2 and "no line of the files reads as Langfuse observations" in result.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    result = invoke("suite", "import", str(empty), "-o", str(suite), "--format", "langfuse")
    assert result.exit_code == 2 and f"{empty}: the file is empty; nothing written" in result.stderr


def _chat_span(i: int, *, messages: bool = False) -> dict[str, Any]:
    attributes = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
        {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
    ]
    if messages:
        attributes += [
            {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps([
                {"role": "user", "parts": [{"type": "text", "content": f"question {i}"}]}
            ])}},
            {"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps([
                {"role": "assistant", "parts": [{"type": "text", "content": "answer"}]}
            ])}},
        ]  # fmt: skip
    return {"traceId": f"{i:032x}", "spanId": f"{i:016x}", "name": "chat m", "attributes": attributes}


def _spans_line(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}


def _records_line(ids: range) -> dict[str, Any]:
    def record(i: int, name: str, body: dict[str, Any]) -> dict[str, Any]:
        values = [{"key": k, "value": {"stringValue": v}} for k, v in body.items()]
        return {"eventName": name, "spanId": f"{i:016x}", "body": {"kvlistValue": {"values": values}}}

    records = []
    for i in ids:
        records.append(record(i, "gen_ai.user.message", {"content": f"question {i}"}))
        records.append({**record(i, "gen_ai.choice", {}), "body": {"kvlistValue": {"values": [
            {"key": "index", "value": {"intValue": "0"}},
            {"key": "message", "value": {"kvlistValue": {"values": [
                {"key": "role", "value": {"stringValue": "assistant"}},
                {"key": "content", "value": {"stringValue": f"answer {i}"}},
            ]}}},
        ]}}})  # fmt: skip
    return {"resourceLogs": [{"resource": {}, "scopeLogs": [{"logRecords": records}]}]}


def test_spans_whose_messages_are_in_a_logs_file_name_the_logs_file(tmp_path: Path) -> None:
    spans = _rows(tmp_path / "spans.jsonl", [_spans_line([_chat_span(i) for i in range(1, 9)])])
    logs = _rows(tmp_path / "logs.jsonl", [_records_line(range(1, 9))])
    suite = tmp_path / "suite.jsonl"
    alone = invoke("suite", "import", str(spans), "-o", str(suite))
    assert alone.exit_code == 2, alone.output
    assert "(8 no input messages)" in alone.stderr and "The files hold no GenAI log record" in alone.stderr
    assert "give the logs file too: llm-connect suite import SPANS LOGS -o SUITE" in alone.stderr
    both = invoke("suite", "import", str(spans), str(logs), "-o", str(suite))
    assert both.exit_code == 0 and "8 cases written" in both.stdout, both.output
    # the records came, but after their spans had stopped waiting: the join window is named
    logs = _rows(tmp_path / "logs.jsonl", [_records_line(range(1, 8))])  # none for the last span
    late = invoke("suite", "import", str(spans), str(logs), "-o", str(suite), "--join-window", "1")
    assert late.exit_code == 2 and "The files hold GenAI log records" in late.stderr, late.output
    assert "raise --join-window" in late.stderr
    # some spans carry their messages: the suite is written, and a note says where the rest are
    mixed = _rows(tmp_path / "mixed.jsonl", [_spans_line([_chat_span(1, messages=True), _chat_span(2)])])
    some = invoke("suite", "import", str(mixed), "-o", str(suite))
    assert some.exit_code == 0 and "1 cases written" in some.stdout, some.output
    assert (
        "note: 1 no input messages (the files hold no GenAI log record; if the instrumentation" in some.stdout
    )
