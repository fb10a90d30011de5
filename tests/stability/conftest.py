"""Shared pieces of the stability tests: the real MiniLM embedder, scripted servers, inputs."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llm_connect.adapters import OpenAIAdapter, SentenceTransformerEmbeddingAdapter
from tests.fixtures.openai_server import OpenAIServer, chat_completion

ORDER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up an order by its id.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]
"""One OpenAI function tool, as a Ruvrics tools file holds it."""

ANSWER = "Your order 42 has shipped and should arrive on Friday."
"""A plain-prose answer used by the scripted models."""


@pytest.fixture(autouse=True)
def ledger_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every CLI run of these tests stores its analysis in a ledger of its own."""
    url = f"sqlite:///{tmp_path / 'stability-ledger.db'}"
    monkeypatch.setenv("LLM_CONNECT_DATABASE_URL", url)
    return url


@pytest.fixture(scope="session")
def minilm() -> SentenceTransformerEmbeddingAdapter:
    """The real all-MiniLM-L6-v2 (offline), loaded once for every stability test."""
    embedder = SentenceTransformerEmbeddingAdapter()
    embedder.load()
    return embedder


def script(server: OpenAIServer, answer: Callable[[int, dict[str, Any]], str | dict[str, Any]]) -> None:
    """Make the server answer request number ``i`` (0-based, in arrival order) with ``answer(i, body)``."""
    counter = itertools.count()
    lock = threading.Lock()

    def responder(body: dict[str, Any]) -> str | dict[str, Any]:
        with lock:
            i = next(counter)
        return answer(i, body)

    server.responder = responder


def identical(i: int, body: dict[str, Any]) -> str:
    """Always the same answer."""
    return ANSWER


def tool_or_prose(i: int, body: dict[str, Any]) -> str | dict[str, Any]:
    """Odd requests call lookup_order, even ones answer in prose."""
    if i % 2:
        return chat_completion(
            body, None, tool_calls=[{"name": "lookup_order", "arguments": '{"order_id": "42"}'}]
        )
    return "I cannot look that up right now, but orders usually ship within two days."


def json_or_prose(i: int, body: dict[str, Any]) -> str:
    """Odd requests answer JSON, even ones prose."""
    return '{"status": "shipped", "order_id": 42, "eta": "Friday"}' if i % 2 else ANSWER


def short_or_long(i: int, body: dict[str, Any]) -> str:
    """The same sentence, once or ten times over (lengths varying 10x)."""
    return " ".join([ANSWER] * 10) if i % 2 else ANSWER


@pytest.fixture
def model(openai_server: OpenAIServer) -> OpenAIAdapter:
    """An OpenAI adapter pointed at the loopback server."""
    return OpenAIAdapter("gpt-test", base_url=openai_server.base_url)


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
