"""Payloads logged by a real LiteLLM import to what the tests' HTTP server saw and answered.

The producer (this module run as a script, in a subprocess: LiteLLM reads its settings from the
environment at import and keeps its callbacks process-wide) makes real ``litellm.completion`` and
``litellm.acompletion`` calls (model ``openai/gpt-test``, ``api_base`` = the server) and registers a
``CustomLogger``: the hook LiteLLM's proxy loggers are built on, handed
``kwargs["standard_logging_object"]`` (the ``StandardLoggingPayload``) after every call, success or
failure. It writes each payload as one line with LiteLLM's own serialiser (``safe_dumps``, what
its S3 logger writes), exactly as LiteLLM hands it over. The proxy itself (``litellm[proxy]``) is
not installed: the SDK's callback path is the gateway's logging path.

Request metadata is passed as the proxy passes it on for a client's request: the client's
``metadata`` (``tags`` included) copied under ``requester_metadata`` (the SDK alone keeps only
LiteLLM's own metadata keys in the payload). Nothing reaches the internet: the cost map is
LiteLLM's bundled copy (``LITELLM_LOCAL_MODEL_COST_MAP``) and every call goes to 127.0.0.1.

    python -m tests.traffic.test_litellm_producer BASE_URL LOG_FILE
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from llm_connect.grading import load_suite
from tests.cli._util import invoke
from tests.fixtures.openai_server import OpenAIServer, chat_completion

SERVED = "gpt-test-2025-01-01"
REPO = Path(__file__).resolve().parents[2]
PRICE_IN, PRICE_OUT = 2e-6, 8e-6  # custom pricing passed on each call: LiteLLM computes the cost
KEY = "sk-test-not-a-secret-0000000000"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "refund",
            "description": "Refund an order",
            "parameters": {"type": "object", "properties": {"order": {"type": "integer"}}},
        },
    }
]

CALLS: list[dict[str, Any]] = [
    {
        "messages": [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "What colour is the sky?"},
        ],
        "temperature": 0.2,
        "max_tokens": 50,
        "metadata": {"tags": ["faq", "web"], "feature": "faq", "tenant": "acme"},
    },
    {
        "messages": [{"role": "user", "content": "Refund order 42 please"}],
        "tools": TOOLS,
        "tool_choice": "auto",
        "metadata": {"tags": ["refunds"], "feature": "refunds", "tenant": "acme"},
    },
    {
        "messages": [
            {"role": "user", "content": "Refund order 7"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_7",
                        "type": "function",
                        "function": {"name": "refund", "arguments": '{"order": 7}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_7", "content": "refunded"},
        ],
        "tools": TOOLS,
        "metadata": {"tags": ["refunds"], "feature": "refunds", "tenant": "globex"},
        "unpriced": True,  # no custom pricing: LiteLLM cannot price the model, the cost is unknown
    },
]
"""Calls made with ``litellm.completion``; then one with ``litellm.acompletion`` (:data:`ASYNC_CALL`),
and two that fail (the server answers 500, then 400)."""

ASYNC_CALL: dict[str, Any] = {
    "messages": [{"role": "user", "content": "Is the shop open on Sunday?"}],
    "temperature": 0.0,
    "metadata": {"tags": ["faq"], "feature": "faq", "tenant": "initech"},
}
FAILING = (("fail500", 500), ("fail400", 400))
"""``api_base`` suffixes the server answers with a fault, and the fault's status."""


def _responder(body: dict[str, Any]) -> dict[str, Any]:
    served = {**body, "model": SERVED}
    last = body["messages"][-1]
    if last["role"] == "tool":
        answer = chat_completion(served, "Order 7 is refunded.")
    elif body.get("tools"):
        answer = chat_completion(served, None, tool_calls=[{"name": "refund", "arguments": '{"order": 42}'}])
    else:
        answer = chat_completion(served, "Blue." if "sky" in last["content"] else "Yes, from 10 to 4.")
    answer["id"] = f"chatcmpl-{len(body['messages'])}-{len(last['content'] or '')}"  # unique, as a provider's
    return answer


# -- the producer (a subprocess) ---------------------------------------------------------------


def _litellm_kwargs(call: dict[str, Any], base_url: str) -> dict[str, Any]:
    metadata = call["metadata"]
    pricing = (
        {} if call.get("unpriced") else {"input_cost_per_token": PRICE_IN, "output_cost_per_token": PRICE_OUT}
    )
    return {
        **{k: v for k, v in call.items() if k not in ("metadata", "unpriced")},
        **pricing,
        "model": "openai/gpt-test",
        "api_base": base_url,
        "api_key": KEY,
        "max_retries": 0,
        # what the proxy hands LiteLLM for a client request carrying `metadata`
        "metadata": {"tags": metadata["tags"], "requester_metadata": dict(metadata)},
    }


def produce(base_url: str, log_file: str) -> None:
    """Make the calls through LiteLLM; its logging callback writes one payload per line."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # the bundled cost map: no download
    import litellm
    from litellm.integrations.custom_logger import CustomLogger
    from litellm.litellm_core_utils.safe_json_dumps import safe_dumps

    class FileLogger(CustomLogger):
        """One ``StandardLoggingPayload`` per line, as LiteLLM hands it to its loggers."""

        lock = threading.Lock()  # sync hooks run on LiteLLM's thread pool

        def _write(self, kwargs: dict[str, Any]) -> None:
            with self.lock, open(log_file, "a", encoding="utf-8") as f:
                f.write(safe_dumps(kwargs["standard_logging_object"]) + "\n")

        def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            self._write(kwargs)

        def log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            self._write(kwargs)

        async def async_log_success_event(
            self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            self._write(kwargs)

        async def async_log_failure_event(
            self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            self._write(kwargs)

    litellm.callbacks = [FileLogger()]
    for call in CALLS:
        litellm.completion(**_litellm_kwargs(call, base_url))

    async def acompletion() -> None:
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

        await litellm.acompletion(**_litellm_kwargs(ASYNC_CALL, base_url))
        await GLOBAL_LOGGING_WORKER.flush()  # async loggers run on LiteLLM's queue: wait for them

    asyncio.run(acompletion())
    for suffix, _ in FAILING:
        call = {
            "messages": [{"role": "user", "content": f"this one fails ({suffix})"}],
            "metadata": {"tags": []},
        }
        try:
            litellm.completion(**_litellm_kwargs(call, f"{base_url}/{suffix}"))
        except (litellm.exceptions.InternalServerError, litellm.exceptions.BadRequestError) as exc:
            print(f"failed as expected: {type(exc).__name__}", file=sys.stderr)
        else:
            raise AssertionError(f"the {suffix} call did not fail")


# -- the test ----------------------------------------------------------------------------------


def _produce(server: OpenAIServer, tmp_path: Path) -> Path:
    log = tmp_path / "litellm.jsonl"
    for suffix, status in FAILING:
        server.queue_fault(status, path=f"/{suffix}/chat/completions")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_PROXY": "*", "no_proxy": "*"}
    subprocess.run(
        [sys.executable, "-m", "tests.traffic.test_litellm_producer", server.base_url, str(log)],
        cwd=REPO,
        env=env,
        check=True,
        timeout=180,
    )
    return log


def _without_none(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


def _no_empty_content(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in m.items() if not (k == "content" and v == "" and m.get("tool_calls"))}
        for m in messages
    ]


def _key(messages: list[dict[str, Any]]) -> str:
    return json.dumps(_without_none(messages), sort_keys=True)


def test_litellm_logged_calls_import_to_what_the_server_saw_and_grade_only_the_candidate(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = _responder
    log = _produce(openai_server, tmp_path)
    requests = openai_server.requests_to("/chat/completions")
    assert len(requests) == len(CALLS) + 1 + len(FAILING)  # no retries, no other traffic
    served_ok = [r for r in requests if r.status == 200]
    assert len(served_ok) == len(CALLS) + 1
    payloads = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(p["status"] for p in payloads) == ["failure"] * len(FAILING) + ["success"] * len(served_ok)

    out = tmp_path / "suite.jsonl"
    result = invoke("suite", "import", str(log), "-o", str(out), "--task-from", "feature", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["format"] == "openai-log"
    assert report["calls"] == len(payloads)
    assert report["dropped"] == {"errored call": len(FAILING)}
    assert report["skipped"] == {} and report["duplicates"] == 0
    assert report["written"] == len(served_ok)
    assert openai_server.requests_to("/chat/completions") == requests  # the import sent nothing

    suite = load_suite(out)
    by_messages = {_key(c.conversation.messages): c for c in suite.cases if c.conversation is not None}
    assert len(by_messages) == len(served_ok)
    sent_calls = {_key(c["messages"]): c for c in [*CALLS, ASYNC_CALL]}
    for request in served_ok:
        body = request.body
        case = by_messages[_key(body["messages"])]
        call = sent_calls[_key(body["messages"])]
        conversation = case.conversation
        assert conversation is not None
        # the conversation the server received
        assert conversation.tools == body.get("tools", [])
        assert conversation.tool_choice == body.get("tool_choice")
        # the production answer as the server sent it
        answer = _responder(body)
        message = answer["choices"][0]["message"]
        recorded = suite.recorded(case, "production")
        assert case.id == answer["id"]
        assert recorded.text == (message["content"] or "")
        assert [(t.name, t.arguments) for t in recorded.tool_calls] == [
            (t["function"]["name"], t["function"]["arguments"]) for t in message.get("tool_calls") or ()
        ]
        assert recorded.finish_reason == answer["choices"][0]["finish_reason"]
        assert recorded.model == SERVED and recorded.asked_model == "gpt-test"
        usage = answer["usage"]
        assert recorded.usage is not None
        assert (recorded.usage.prompt_tokens, recorded.usage.completion_tokens) == (
            usage["prompt_tokens"],
            usage["completion_tokens"],
        )
        if call.get("unpriced"):  # LiteLLM logged 0.0 and why it could not price: not a cost of 0
            assert recorded.cost_usd is None
        else:
            expected_cost = usage["prompt_tokens"] * PRICE_IN + usage["completion_tokens"] * PRICE_OUT
            assert recorded.cost_usd == pytest.approx(expected_cost)
        assert recorded.latency_ms is not None and recorded.latency_ms > 0
        # tags, request metadata, the task from a metadata key, the run settings
        assert list(case.tags) == call["metadata"]["tags"]
        assert case.task == call["metadata"]["feature"]
        assert case.metadata["tenant"] == call["metadata"]["tenant"]
        assert case.metadata["call_type"] in ("completion", "acompletion")
        assert case.metadata["trace_id"]
        settings = {k: body[k] for k in ("temperature", "max_tokens") if k in body}
        assert case.metadata.get("run_settings", {}) == settings
        # LiteLLM's empty slots (user_api_key_* and the like, all null here) are not carried
        assert all(v is not None for v in case.metadata.values())
        assert "requester_metadata" not in case.metadata and "usage_object" not in case.metadata
    assert {c.metadata["call_type"] for c in suite.cases} == {"completion", "acompletion"}

    # grade against what production answered: only the candidate is called
    before = len(openai_server.requests)
    graded = invoke(
        "grade", str(out), "--baseline", "recorded:production", "--candidate", "openai:small",
        "--judge", "exact", "--price", "small=1000,1000", "--base-url", openai_server.base_url,
        "--api-key", KEY, "--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--json",
    )  # fmt: skip
    assert graded.exit_code == 0, graded.output
    candidate_calls = openai_server.requests[before:]
    assert len(candidate_calls) == len(served_ok)
    assert {r.body["model"] for r in candidate_calls} == {"small"}
    # each candidate call carries the conversation production saw (an assistant turn that only
    # calls tools goes out with "content": "", which LiteLLM leaves out and llama.cpp requires)
    assert sorted(_key(_no_empty_content(r.body["messages"])) for r in candidate_calls) == sorted(
        _key(r.body["messages"]) for r in served_ok
    )
    stats = json.loads(graded.stdout)["stats"]
    assert sum(s["n"] for s in stats) == len(served_ok)


if __name__ == "__main__":
    produce(sys.argv[1], sys.argv[2])
