"""The loopback OpenAI-compatible server other tests rely on (tests/fixtures/openai_server.py)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.fixtures.openai_server import chat_completion


def _chat(client: httpx.Client, base_url: str, content: str, **extra: object) -> httpx.Response:
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": content}], **extra}
    return client.post(f"{base_url}/chat/completions", json=body, headers={"Authorization": "Bearer sk-t"})


def test_default_reply_echoes_and_records(openai_server):
    with httpx.Client() as client:
        resp = _chat(client, openai_server.base_url, "hello there", temperature=0.0)
    data = resp.json()
    assert data["choices"][0]["message"]["content"] == "echo: hello there"
    assert data["model"] == "gpt-test"
    assert data["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    assert resp.headers["x-request-id"] == openai_server.requests[0].request_id
    rec = openai_server.requests[0]
    assert rec.body["temperature"] == 0.0
    assert rec.headers["authorization"] == "Bearer sk-t"
    assert rec.status == 200 and rec.started <= rec.finished


def test_responder_dict_becomes_json_text_and_full_bodies_pass_through(openai_server):
    openai_server.responder = lambda body: {"quality_score": 0.25}
    with httpx.Client() as client:
        text = _chat(client, openai_server.base_url, "x").json()["choices"][0]["message"]["content"]
        assert json.loads(text) == {"quality_score": 0.25}
        openai_server.responder = lambda body: chat_completion(
            body, None, tool_calls=[{"name": "f", "arguments": "{}"}]
        )
        choice = _chat(client, openai_server.base_url, "x").json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "f"


def test_faults_are_one_shot_and_fifo(openai_server):
    openai_server.queue_fault(429, headers={"Retry-After": "3"})
    openai_server.queue_fault(kind="malformed")
    with httpx.Client() as client:
        first = _chat(client, openai_server.base_url, "a")
        second = _chat(client, openai_server.base_url, "b")
        third = _chat(client, openai_server.base_url, "c")
    assert first.status_code == 429 and first.headers["retry-after"] == "3"
    assert second.status_code == 200 and second.text.startswith("{this is not json")
    assert third.json()["choices"][0]["message"]["content"] == "echo: c"


def test_state_is_fresh_for_each_test(openai_server):
    assert openai_server.requests == []
    assert openai_server.responder is None and openai_server.delay_s == 0.0


def test_concurrent_delayed_requests_overlap(openai_server):
    openai_server.delay_s = 1.0  # generous: 64 connections are opened while the first request waits
    with httpx.Client(limits=httpx.Limits(max_connections=64)) as client, ThreadPoolExecutor(64) as pool:
        codes = list(pool.map(lambda i: _chat(client, openai_server.base_url, str(i)).status_code, range(64)))
    assert codes == [200] * 64
    recs = openai_server.requests
    # every request started before the first one finished: the delays did not serialise
    assert max(r.started for r in recs) < min(r.finished for r in recs)


def test_embeddings_one_vector_per_input(openai_server):
    with httpx.Client() as client:
        resp = client.post(
            f"{openai_server.base_url}/embeddings", json={"model": "e", "input": ["a", "b", "a"]}
        )
    vectors = [d["embedding"] for d in resp.json()["data"]]
    assert len(vectors) == 3 and vectors[0] == vectors[2] != vectors[1]


def test_standalone_process_prints_base_url(openai_server_process):
    with httpx.Client() as client:
        resp = _chat(client, openai_server_process, "from a child")
    assert resp.json()["choices"][0]["message"]["content"] == "echo: from a child"
