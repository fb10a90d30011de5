"""The one SDK error boundary: no openai or HTTP-client exception escapes unmapped."""

from __future__ import annotations

import inspect
import json

import httpx2
import openai
import openai._exceptions
import pytest

from llm_connect.adapters._errors import parse_retry_after, sdk_errors, translate_exception
from llm_connect.errors import (
    AdapterConnectionError,
    AdapterError,
    AdapterTimeoutError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    MalformedResponseError,
    RateLimitError,
    ServerError,
)

REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def _response(status: int, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(status, request=REQUEST, headers={"x-request-id": "req_42", **(headers or {})})


def _exception_classes(*modules: object) -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in modules:
        for name in dir(module):
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


OPENAI_CLASSES = [
    c for c in _exception_classes(openai, openai._exceptions) if c.__module__.startswith("openai")
]
HTTPX2_CLASSES = _exception_classes(httpx2)


def _instance(cls: type[BaseException]) -> BaseException:
    """Build an instance of an SDK exception class, whatever its constructor wants."""
    from openai.types.chat import ChatCompletion

    completion = ChatCompletion.construct(id="x", choices=[], created=0, model="m", object="chat.completion")
    attempts = [
        lambda: cls("boom", response=_response(500), body=None),
        lambda: cls(response=_response(401), body=None),
        lambda: cls(request=REQUEST),
        lambda: cls(REQUEST),
        lambda: cls(_response(200), None),
        lambda: cls("boom", REQUEST, body=None),
        lambda: cls(completion=completion),
        lambda: cls("boom", unsent_messages=[]),
        lambda: cls("boom", request=REQUEST, response=_response(502)),
        lambda: cls("boom", request=REQUEST),
        lambda: cls("boom"),
        lambda: cls(),
    ]
    for attempt in attempts:
        try:
            return attempt()
        except TypeError:
            continue
    raise AssertionError(f"cannot construct {cls}")


def test_every_openai_exception_class_is_enumerated():
    names = {c.__name__ for c in OPENAI_CLASSES}
    assert {
        "APIStatusError",
        "APIConnectionError",
        "APITimeoutError",
        "RateLimitError",
        "OpenAIError",
    } <= names
    assert len(OPENAI_CLASSES) >= 18


@pytest.mark.parametrize("cls", OPENAI_CLASSES, ids=lambda c: c.__name__)
def test_no_openai_exception_escapes_unmapped(cls):
    exc = _instance(cls)
    mapped = translate_exception(exc, adapter_id="openai:m")
    assert isinstance(mapped, AdapterError), f"{cls.__name__} -> {type(mapped).__name__}"
    assert mapped.adapter_id == "openai:m"


@pytest.mark.parametrize("cls", HTTPX2_CLASSES, ids=lambda c: c.__name__)
def test_no_http_client_exception_escapes_unmapped(cls):
    exc = _instance(cls)
    assert isinstance(translate_exception(exc, adapter_id="openai:m"), AdapterError)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (403, AuthenticationError),
        (404, BadRequestError),
        (409, BadRequestError),
        (422, BadRequestError),
        (429, RateLimitError),
        (500, ServerError),
        (502, ServerError),
        (503, ServerError),
    ],
)
def test_status_errors_keep_status_code_and_request_id(status, error):
    exc = openai.APIStatusError("boom", response=_response(status), body=None)
    mapped = translate_exception(exc, adapter_id="openai:m")
    assert type(mapped) is error
    assert (mapped.status_code, mapped.request_id) == (status, "req_42")


def test_timeouts_and_connection_errors():
    assert type(translate_exception(openai.APITimeoutError(REQUEST))) is AdapterTimeoutError
    assert type(translate_exception(openai.APIConnectionError(request=REQUEST))) is AdapterConnectionError
    assert type(translate_exception(httpx2.ReadTimeout("slow", request=REQUEST))) is AdapterTimeoutError
    assert (
        type(translate_exception(httpx2.ConnectError("refused", request=REQUEST))) is AdapterConnectionError
    )


def test_rate_limit_retry_after_from_header():
    exc = openai.RateLimitError("slow down", response=_response(429, {"Retry-After": "12"}), body=None)
    mapped = translate_exception(exc)
    assert isinstance(mapped, RateLimitError) and mapped.retry_after == 12.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),  # in the past
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-1"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers, expected):
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after(httpx2.Headers(headers), now=now) == expected


def test_unparseable_bodies_are_malformed():
    assert type(translate_exception(json.JSONDecodeError("x", "{", 0))) is MalformedResponseError


def test_boundary_passes_our_errors_and_programming_errors_through():
    with pytest.raises(ConfigurationError), sdk_errors("openai:m"):
        raise ConfigurationError("ours")
    with pytest.raises(KeyError), sdk_errors("openai:m"):
        raise KeyError("a bug is not an adapter error")


def test_boundary_chains_the_original_and_redacts_secrets():
    exc = openai.AuthenticationError("bad key sk-abcdef123", response=_response(401), body=None)
    with pytest.raises(AuthenticationError) as info, sdk_errors("openai:m", secrets=["sk-abcdef123"]):
        raise exc
    assert info.value.__cause__ is exc
    assert "sk-abcdef123" not in str(info.value) and "***" in str(info.value)
