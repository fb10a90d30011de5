"""Secrets over real HTTP: SDK request options go out as the SDK means them, and no
credential survives in an error message or in what the CLI prints."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from llm_connect._secrets import REDACTED
from llm_connect.adapters import OpenAIAdapter
from llm_connect.errors import AuthenticationError, BadRequestError, ConfigurationError
from llm_connect.types import RunConfig
from tests.cli._util import invoke, write_suite
from tests.fixtures.loops import run as run_closing
from tests.fixtures.openai_server import OpenAIServer
from tests.test_secrets import CREDENTIALS

KEY = "sk-test-key-123"


@pytest.fixture
def adapter(openai_server: OpenAIServer) -> OpenAIAdapter:
    return OpenAIAdapter("gpt-test", base_url=openai_server.base_url, api_key=KEY)


OPTIONS = RunConfig(
    model_params={
        "seed": 1,
        "extra_headers": {"Ocp-Apim-Subscription-Key": "sub-0123abcd", "X-Trace-Id": "t-1"},
        "extra_query": {"api-version": "2024-06-01"},
        "extra_body": {"top_k": 3, "seed": 2},
    }
)


def _check_options_sent_as_the_sdk_means_them(server: OpenAIServer) -> None:
    (req,) = server.requests
    assert req.headers["ocp-apim-subscription-key"] == "sub-0123abcd"
    assert req.headers["x-trace-id"] == "t-1"
    assert req.path.endswith("/chat/completions?api-version=2024-06-01")
    assert {k: req.body[k] for k in ("seed", "top_k")} == {"seed": 2, "top_k": 3}  # extra_body wins
    assert not {"extra_headers", "extra_query", "extra_body"} & set(req.body)
    assert b"sub-0123abcd" not in req.raw_body and b"Ocp-Apim" not in req.raw_body


def test_extra_headers_and_query_go_out_as_headers_and_url_parameters(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    assert (
        adapter.complete("hi", OPTIONS).text == "echo: hi"
    )  # answered normally: the server routes on the path, not the query
    _check_options_sent_as_the_sdk_means_them(openai_server)


def test_async_calls_send_them_the_same_way(adapter: OpenAIAdapter, openai_server: OpenAIServer) -> None:
    async def call() -> str:
        try:
            return (await adapter.acomplete("hi", OPTIONS)).text
        finally:
            await adapter.aclose()  # the loop's client, closed before the loop ends

    assert asyncio.run(call()) == "echo: hi"
    assert not adapter._clients._async
    _check_options_sent_as_the_sdk_means_them(openai_server)


@pytest.mark.parametrize(
    "params",
    [
        {"extra_headers": ["X-Api-Key", "v"]},
        {"extra_headers": {"X-Retry": 3}},
        {"extra_query": "api-version=1"},
        {"extra_body": [1, 2]},
    ],
)
def test_malformed_request_options_are_configuration_errors(
    adapter: OpenAIAdapter, openai_server: OpenAIServer, params: dict[str, object]
) -> None:
    with pytest.raises(ConfigurationError, match="extra_"):
        adapter.complete("hi", RunConfig(model_params=params))
    assert openai_server.requests == []


@pytest.mark.parametrize("kind", sorted(CREDENTIALS))
def test_a_credential_echoed_by_the_server_is_masked_in_the_error(
    adapter: OpenAIAdapter, openai_server: OpenAIServer, kind: str
) -> None:
    secret = CREDENTIALS[kind]
    openai_server.queue_fault(401, body={"error": {"message": f"Incorrect API key provided: {secret}."}})
    with pytest.raises(AuthenticationError) as info:
        adapter.complete("hi", RunConfig())
    message = str(info.value)
    assert secret not in message and secret[-10:] not in message
    assert REDACTED in message and info.value.status_code == 401


def test_async_errors_are_masked_too(adapter: OpenAIAdapter, openai_server: OpenAIServer) -> None:
    secret = CREDENTIALS["anthropic"]
    openai_server.queue_fault(400, body={"error": {"message": f"bad header x-api-key: {secret}"}})
    with pytest.raises(BadRequestError) as info:
        run_closing(adapter.acomplete("hi", RunConfig()))
    assert secret not in str(info.value)


def test_a_secret_header_value_of_any_shape_is_masked_when_echoed(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    plain = "plain0123subscription"  # no credential shape: known only as a secret header's value
    token = "opaque-token-7"
    config = RunConfig(
        model_params={
            "extra_headers": {"Ocp-Apim-Subscription-Key": plain, "Authorization": f"Bearer {token}"}
        }
    )
    openai_server.queue_fault(
        401, body={"error": {"message": f"subscription {plain} / token {token} denied"}}
    )
    with pytest.raises(AuthenticationError) as info:
        adapter.complete("hi", config)
    assert plain not in str(info.value) and token not in str(info.value)


def test_the_cli_prints_no_credential(tmp_path: Path, openai_server: OpenAIServer) -> None:
    suite = write_suite(tmp_path / "s.jsonl", [{"id": "c0", "prompt": "q", "baseline_response": "x"}])
    echoed = " ".join(f"{kind}={secret}" for kind, secret in CREDENTIALS.items())
    openai_server.queue_fault(401, body={"error": {"message": f"rejected: {echoed}"}})
    result = invoke(
        "grade",
        str(suite),
        "-c",
        "openai:cand",
        "--db",
        f"sqlite:///{tmp_path}/l.db",
        "--base-url",
        openai_server.base_url,
        "--api-key",
        KEY,
    )
    assert result.exit_code == 3 and "AuthenticationError" in result.stderr
    printed = result.stdout + result.stderr
    for kind, secret in CREDENTIALS.items():
        assert secret not in printed and secret[-10:] not in printed, kind
    assert REDACTED in result.stderr


def test_secret_params_are_sent_but_absent_from_the_stored_config(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    config = RunConfig(
        model_params={"extra_headers": {"api-key": "azure-key-1", "Accept": "application/json"}, "seed": 3}
    )
    adapter.complete("hi", config)
    (req,) = openai_server.requests
    assert req.headers["api-key"] == "azure-key-1"
    stored = json.loads(config.to_json())
    assert stored["model_params"] == {"extra_headers": {"Accept": "application/json"}, "seed": 3}
