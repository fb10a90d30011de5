"""OTLP JSON pieces as a Collector's file exporter writes them (shared by the traffic tests)."""

from __future__ import annotations

import json
from typing import Any


def otlp_attr(key: str, value: Any) -> dict[str, Any]:
    """``{"key": ..., "value": {"doubleValue" | "intValue" | "stringValue": ...}}``."""
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def genai_messages(question: str, answer: str) -> list[dict[str, Any]]:
    """``gen_ai.input.messages`` and ``gen_ai.output.messages`` (JSON strings) for one turn."""
    messages = [{"role": "user", "parts": [{"type": "text", "content": question}]}]
    output = [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
    return [
        otlp_attr("gen_ai.input.messages", json.dumps(messages)),
        otlp_attr("gen_ai.output.messages", json.dumps(output)),
    ]


def chat_span(i: int, attributes: list[dict[str, Any]]) -> dict[str, Any]:
    """Span ``i`` (its trace and span ids and times from ``i``) named ``chat gpt-4o``."""
    return {
        "traceId": f"{i:032x}",
        "spanId": f"{i:016x}",
        "name": "chat gpt-4o",
        "startTimeUnixNano": str(1_000_000_000 + i),
        "endTimeUnixNano": str(1_500_000_000 + i),
        "attributes": attributes,
    }
