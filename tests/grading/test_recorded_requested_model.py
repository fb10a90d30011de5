"""A recorded response names the model that was asked for apart from the one that answered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_connect.errors import SuiteError
from llm_connect.grading import load_suite


def _suite(tmp_path: Path, response: dict[str, object]) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"id": 1, "prompt": "hi", "responses": {"production": response}}) + "\n")
    return path


def test_requested_model_is_kept_apart_from_the_served_model(tmp_path: Path) -> None:
    suite = load_suite(
        _suite(
            tmp_path,
            {
                "text": "hello",
                "model": "gpt-4o-mini-2024-07-18",
                "requested_model": "gpt-4o-mini",
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                "cost_usd": 0.002,
                "latency_ms": 812.5,
            },
        )
    )
    response = suite.recorded("1", "production")
    assert response.model == "gpt-4o-mini-2024-07-18"
    assert response.requested_model == "gpt-4o-mini"
    assert response.asked_model == "gpt-4o-mini"
    assert response.usage is not None and response.usage.total_tokens == 4


def test_requested_model_defaults_to_the_model(tmp_path: Path) -> None:
    response = load_suite(_suite(tmp_path, {"text": "x", "model": "m"})).recorded("1", "production")
    assert response.requested_model is None and response.asked_model == "m"


def test_an_empty_requested_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="requested_model"):
        load_suite(_suite(tmp_path, {"text": "x", "requested_model": " "}))
