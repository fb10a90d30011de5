"""An OTLP JSON attribute as a Collector's file exporter writes it (shared by the traffic tests)."""

from __future__ import annotations

from typing import Any


def otlp_attr(key: str, value: Any) -> dict[str, Any]:
    """``{"key": ..., "value": {"doubleValue" | "intValue" | "stringValue": ...}}``."""
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}
