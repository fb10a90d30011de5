"""The error boundary keeps the server's whole message (issue 21, item 3), over loopback HTTP:
every line of a JSON ``error.message``, and the body the SDK itself drops (plain text, FastAPI's
``detail``), bounded, credentials masked; a refused ``response_format`` on a 5xx is not retryable."""

from __future__ import annotations

import pytest

from llm_connect.adapters import OpenAIAdapter
from llm_connect.errors import MAX_ERROR_MESSAGE_CHARS, BadRequestError, ServerError
from llm_connect.types import RunConfig
from tests.fixtures.openai_server import OpenAIServer
from tests.fixtures.structured_output import llama_cpp_validation_error

VALIDATION = (
    "1 validation error for ChatCompletionRequest\n"
    "messages.0.content\n"
    "  Input should be a valid string [type=string_type, input_value=42, input_type=int]"
)


def _fail(server: OpenAIServer) -> BaseException:
    adapter = OpenAIAdapter("gemma", base_url=server.base_url, api_key="test")
    with pytest.raises((ServerError, BadRequestError)) as info:
        adapter.complete("hi", RunConfig())
    return info.value


def test_every_line_of_a_json_error_message_is_kept(openai_server: OpenAIServer) -> None:
    openai_server.queue_fault(status=500, body={"error": {"message": VALIDATION, "type": "server_error"}})
    error = _fail(openai_server)
    assert str(error) == f"openai:gemma: Error code: 500 - {VALIDATION}"
    assert error.retryable is True  # an ordinary 500 is still retried


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, VALIDATION),  # a plain-text body: the SDK's text is "Error code: 500" alone
        (422, {"detail": [{"loc": ["body", "messages"], "msg": "Field required", "type": "missing"}]}),
    ],
)
def test_a_body_the_sdk_drops_is_appended(openai_server: OpenAIServer, status: int, body: object) -> None:
    openai_server.queue_fault(status=status, body=body)
    message = str(_fail(openai_server))
    assert message.startswith(f"openai:gemma: Error code: {status} - ")
    assert ("Input should be a valid string" in message) if status == 500 else ("Field required" in message)
    if status == 500:
        assert message.splitlines()[1:] == VALIDATION.splitlines()[1:]


def test_a_secret_in_the_body_is_masked(openai_server: OpenAIServer) -> None:
    secret = "sk-live-ABCDEFGHIJKLMNOPQRSTUVWX0123456789"
    openai_server.queue_fault(status=500, body=f"upstream refused key {secret}\nsecond line")
    message = str(_fail(openai_server))
    assert secret not in message and "[REDACTED]" in message and "second line" in message


def test_a_huge_plain_body_is_bounded_with_a_marker(openai_server: OpenAIServer) -> None:
    openai_server.queue_fault(status=502, body="x" * 10_000)
    message = str(_fail(openai_server))
    assert len(message) <= MAX_ERROR_MESSAGE_CHARS and message.endswith("more characters]")
    assert "[cut: " in message


def test_a_refused_response_format_on_a_500_is_not_retryable(openai_server: OpenAIServer) -> None:
    openai_server.imitate_llama_cpp()
    adapter = OpenAIAdapter("gemma", base_url=openai_server.base_url, api_key="test")
    config = RunConfig(
        model_params={"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}
    )
    with pytest.raises(ServerError) as info:
        adapter.complete("hi", config)
    assert info.value.retryable is False
    assert llama_cpp_validation_error("json_schema").strip() in str(info.value)
