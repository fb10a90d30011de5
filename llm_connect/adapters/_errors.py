"""The one boundary where ``openai`` SDK and HTTP-client exceptions become ours.

Every SDK call an adapter makes runs inside :func:`sdk_errors` (sync and async
code alike: a ``with`` block may contain ``await``). Whatever the SDK or its
HTTP client raises leaves the block as a subclass of
:class:`~llm_connect.errors.AdapterError`, with the HTTP status code and the
server's request id when there was a response:

==========================================  =================================
raised inside the block                     leaves as
==========================================  =================================
``openai.APITimeoutError``, httpx timeouts  ``AdapterTimeoutError``
``openai.APIConnectionError``, transport    ``AdapterConnectionError``
status 429 (``openai.RateLimitError``)      ``RateLimitError`` (+ retry_after;
                                            not retryable for ``insufficient_quota``)
status 401, 403                             ``AuthenticationError``
any other 4xx                               ``BadRequestError``
5xx, other statuses, stream error events    ``ServerError``
undecodable body, schema mismatch           ``MalformedResponseError``
``LengthFinishReasonError`` and the like    ``MalformedResponseError``
invalid URL, unsupported protocol           ``AdapterError`` (not retryable)
any other ``openai.OpenAIError``            ``AdapterError``
any other httpx/httpx2/httpcore error       ``AdapterError``
==========================================  =================================

An HTTP error's message keeps the server's whole answer: the SDK puts only a
JSON body's ``error.message`` into its text (and nothing of a plain-text body or
of a FastAPI ``{"detail": [...]}``), so the body's text, bounded at
:data:`~llm_connect.errors.MAX_ERROR_MESSAGE_CHARS`, is appended whenever the
SDK's text does not already hold it. A 5xx whose message names the request's
``response_format`` (llama-cpp-python answers a ``json_schema`` it does not take
with a 500 validation error) is not retryable: the same request fails the same
way; the judge falls back to another format instead (:mod:`llm_connect._structured`).

Errors of our own hierarchy pass through unchanged; any other exception (a
programming error such as ``TypeError``) is not translated. Messages never carry
a credential, in two steps: the boundary replaces the secrets the adapter knows
(its API key, the values of secret-named parameters and headers, see
:func:`llm_connect._secrets.secret_values`) with ``***``, whatever their shape;
then the error class masks every credential-looking value left (a key the server
echoes, another header's token) with ``[REDACTED]``
(:class:`~llm_connect.errors.LLMConnectError` masks its message when built).
"""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from llm_connect._secrets import mask_secrets
from llm_connect._structured import names_response_format
from llm_connect.errors import (
    MAX_ERROR_MESSAGE_CHARS,
    AdapterConnectionError,
    AdapterError,
    AdapterTimeoutError,
    AuthenticationError,
    BadRequestError,
    LLMConnectError,
    MalformedResponseError,
    RateLimitError,
    ServerError,
    whole_message,
)

__all__ = ["ResponseInfo", "parse_retry_after", "sdk_errors", "translate_exception"]


class ResponseInfo:
    """What the boundary knows about the HTTP response, once there is one.

    An adapter calls :meth:`note` with the raw response before parsing it, so a
    body that fails to parse still reports its status code and request id.
    """

    def __init__(self) -> None:
        self.status_code: int | None = None
        self.request_id: str | None = None

    def note(self, raw: Any) -> None:
        """Remember ``raw``'s status code and ``x-request-id`` header."""
        self.status_code = getattr(raw, "status_code", None)
        headers = getattr(raw, "headers", None)
        if headers is not None:
            self.request_id = headers.get("x-request-id")


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``Retry-After`` (seconds or HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        parsed = email.utils.parsedate_tz(raw)
        if parsed is None:
            return None
        value = email.utils.mktime_tz(parsed) - (time.time() if now is None else now)
        return max(0.0, value)
    return value if math.isfinite(value) and value >= 0 else None


def _redact(message: str, secrets: Iterable[str | None]) -> str:
    """``message`` with each known secret (4 characters or more) replaced by ``***``, longest first."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        message = message.replace(secret, "***")
    return mask_secrets(message)


_HTTP_CLIENTS = ("httpx", "httpx2", "httpcore")


def _httpx_names(exc: BaseException) -> set[str] | None:
    """Class names in ``exc``'s MRO when it is an httpx/httpx2/httpcore exception, else ``None``."""
    if type(exc).__module__.split(".")[0] not in _HTTP_CLIENTS:
        return None
    return {cls.__name__ for cls in type(exc).__mro__ if cls.__module__.split(".")[0] in _HTTP_CLIENTS}


def _status_error(
    status: int | None, message: str, headers: Mapping[str, str] | None, **kw: Any
) -> AdapterError:
    if status == 429:
        return RateLimitError(message, retry_after=parse_retry_after(headers), **kw)
    if status in (401, 403):
        return AuthenticationError(message, **kw)
    if status is not None and 400 <= status < 500:
        return BadRequestError(message, **kw)
    return ServerError(message, **kw)


def _status_text(exc: BaseException, adapter_id: str | None) -> str:
    """``"<adapter>: <str(exc)>"`` of an SDK status error, with the response body appended when
    the text lacks it (the whole within :data:`~llm_connect.errors.MAX_ERROR_MESSAGE_CHARS`, or
    the SDK's text when that alone is longer)."""
    text = f"{adapter_id or 'adapter'}: {exc}"
    try:
        raw = exc.response.text.strip()  # type: ignore[attr-defined]
    except Exception:  # no response, or a streamed body never read
        return text
    if not isinstance(raw, str) or not raw or raw in text:
        return text
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, Mapping) else None
    if isinstance(message, str) and message.strip() and message.strip() in text:
        return text  # the SDK kept the JSON body's message, every line of it
    room = MAX_ERROR_MESSAGE_CHARS - len(text) - 3
    return f"{text} - {whole_message(raw, room)}" if room >= 80 else text


def translate_exception(
    exc: BaseException,
    *,
    adapter_id: str | None = None,
    info: ResponseInfo | None = None,
    secrets: Iterable[str | None] = (),
) -> BaseException:
    """The project error for ``exc`` (``exc`` itself when it is ours or not an SDK/HTTP error)."""
    if isinstance(exc, LLMConnectError):
        return exc
    status = info.status_code if info else None
    request_id = info.request_id if info else None
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if response is not None:
        status = getattr(response, "status_code", status)
        if headers is not None:
            request_id = headers.get("x-request-id") or request_id
    request_id = getattr(exc, "request_id", None) or request_id
    secrets = list(secrets)
    message = _redact(f"{adapter_id or 'adapter'}: {exc}", secrets)
    kw: dict[str, Any] = {"adapter_id": adapter_id, "status_code": status, "request_id": request_id}

    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a core dependency
        openai = None  # type: ignore[assignment]

    if openai is not None:
        if isinstance(exc, openai.APITimeoutError):
            return AdapterTimeoutError(f"{adapter_id}: request timed out", **kw)
        if isinstance(exc, openai.APIConnectionError):
            return AdapterConnectionError(message, **kw)
        if isinstance(exc, openai.APIResponseValidationError):
            return MalformedResponseError(message, **kw)
        if isinstance(exc, openai.APIStatusError):
            message = _redact(_status_text(exc, adapter_id), secrets)
            mapped = _status_error(exc.status_code, message, headers, **kw)
            if exc.code == "insufficient_quota":  # a 429 that waiting will not cure
                mapped.retryable = False
            if isinstance(mapped, ServerError) and names_response_format(message):
                mapped.retryable = False  # a refused response_format: the same request fails the same way
            return mapped
        if isinstance(exc, openai.APIError):  # e.g. an error event inside a stream
            return ServerError(message, **kw)
        if isinstance(exc, (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError)):
            return MalformedResponseError(message, **kw)
        if isinstance(exc, openai.OpenAIError):
            return AdapterError(message, **kw)
        if isinstance(exc, openai.InvalidWebhookSignatureError):
            return AdapterError(message, **kw)

    names = _httpx_names(exc)
    if names is not None:
        if names & {
            "UnsupportedProtocol",
            "InvalidURL",
            "CookieConflict",
            "TooManyRedirects",
            "LocalProtocolError",
        }:
            return AdapterError(message, **kw)  # a configuration problem: retrying cannot help
        if names & {"TimeoutException", "TimeoutError"}:
            return AdapterTimeoutError(f"{adapter_id}: request timed out", **kw)
        if "HTTPStatusError" in names:
            message = _redact(_status_text(exc, adapter_id), secrets)
            return _status_error(status, message, headers, **kw)
        if "DecodingError" in names:
            return MalformedResponseError(message, **kw)
        if names & {"TransportError", "RequestError", "NetworkError", "ConnectionNotAvailable"}:
            return AdapterConnectionError(message, **kw)
        return AdapterError(message, **kw)  # stream-state and other client errors
    if isinstance(exc, TimeoutError):
        return AdapterTimeoutError(f"{adapter_id}: request timed out", **kw)
    if isinstance(exc, ConnectionError):
        return AdapterConnectionError(message, **kw)
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return MalformedResponseError(
            _redact(f"{adapter_id}: response body is not valid JSON: {exc}", secrets), **kw
        )
    if type(exc).__name__ == "ValidationError" and type(exc).__module__.startswith("pydantic"):
        return MalformedResponseError(message, **kw)
    return exc


@contextmanager
def sdk_errors(
    adapter_id: str, *, info: ResponseInfo | None = None, secrets: Iterable[str | None] = ()
) -> Iterator[ResponseInfo]:
    """Run SDK calls inside; SDK/HTTP exceptions leave translated (see module docstring).

    Yields a :class:`ResponseInfo` the caller fills with :meth:`ResponseInfo.note`.
    """
    info = info or ResponseInfo()
    secrets = list(secrets)
    try:
        yield info
    except Exception as exc:
        mapped = translate_exception(exc, adapter_id=adapter_id, info=info, secrets=secrets)
        if mapped is exc:
            raise
        raise mapped from exc
