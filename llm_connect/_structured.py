"""Structured output: how every judge that asks an LLM requests its JSON reply.

Servers disagree on how to ask for JSON, so a judge walks a ladder of
``response_format`` modes, most structured first (:data:`FORMATS`):

======================  =================================================================
mode                    request parameter
======================  =================================================================
``json_schema``         ``{"type": "json_schema", "json_schema": {"name": NAME,
                        "strict": true, "schema": SCHEMA}}`` (OpenAI, vLLM, llama.cpp's
                        ``llama-server``)
``json_object_schema``  ``{"type": "json_object", "schema": SCHEMA}`` (llama-cpp-python's
                        extension: JSON constrained by the schema)
``json_object``         ``{"type": "json_object"}`` (any JSON object)
``text``                no ``response_format``: the prompt alone asks for the JSON
======================  =================================================================

A server *refuses* a format (:func:`refuses_format`) when it answers 400, 404,
415 or 422, or any other status whose message names ``response_format`` or
carries the format-type validation text (llama-cpp-python answers
``json_schema`` with a 500 whose body is a pydantic validation error,
``Input should be 'text' or 'json_object'``). 401, 403 and 429 are never
refusals, whatever their body says: they keep their normal error and retry path.
On a refusal the same request is sent again in the next mode; the first mode
that succeeds is remembered per endpoint and model, process-wide and
thread-safe, so later calls (from any judge) start there. A downgrade is
remembered only once a lower mode succeeds; when the last mode fails too, the
format was not the problem: that error is raised and nothing is remembered.

A judge may pin one mode instead (its ``response_format`` option): then only
that mode is sent, nothing is read from or written to the memory, and a refusal
is raised as it is. This module sits below ``scoring`` and ``grading`` (it
imports only ``errors`` and ``types``), so both layers share one ladder.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from llm_connect.errors import (
    AdapterError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    RateLimitError,
)
from llm_connect.types import LLMResponse, Prompt, RunConfig

__all__ = [
    "AUTO",
    "FORMATS",
    "REFUSAL_STATUSES",
    "ReplyFormat",
    "accepted_format",
    "check_format_option",
    "forget_formats",
    "names_response_format",
    "refuses_format",
    "response_formats_used",
]


class _Adapter(Protocol):
    """What the ladder asks of an adapter: every :class:`~llm_connect.adapters.LLMAdapter` is one.

    Spelled out here, not imported, so that this module stays below ``adapters`` (whose error
    mapping reads :func:`names_response_format`), not even naming it for the type checker.
    """

    adapter_id: str

    def complete(self, prompt: Prompt, run_config: RunConfig) -> LLMResponse: ...

    async def acomplete(self, prompt: Prompt, run_config: RunConfig) -> LLMResponse: ...


#: The ladder of response-format modes, most structured first.
FORMATS: tuple[str, ...] = ("json_schema", "json_object_schema", "json_object", "text")

#: The option value that asks for the ladder (the default); any mode of :data:`FORMATS` pins it.
AUTO = "auto"

#: Statuses that refuse a format whatever their body says.
REFUSAL_STATUSES = frozenset({400, 404, 415, 422})

_NEVER_REFUSALS = frozenset({401, 403, 429})

# The format named in an error body: the parameter itself, or pydantic's literal error on its type.
_NAMES_FORMAT = re.compile(
    r"response_format|input should be '(?:text|json_object|json_schema)'",
    re.IGNORECASE,
)


def names_response_format(text: str) -> bool:
    """Whether an error message names ``response_format`` or the format-type validation text."""
    return _NAMES_FORMAT.search(text) is not None


def refuses_format(exc: BaseException) -> bool:
    """Whether ``exc`` says the server refused the request's ``response_format``.

    An :class:`~llm_connect.errors.AdapterError` with status 400, 404, 415 or
    422 (or a ``BadRequestError`` without a status), or any other status whose
    message names the format (see :func:`names_response_format`). Never a 401,
    403 or 429, never an error without an answer (timeout, connection).
    """
    if not isinstance(exc, AdapterError) or isinstance(exc, (AuthenticationError, RateLimitError)):
        return False
    status = exc.status_code
    if status in _NEVER_REFUSALS:
        return False
    if status in REFUSAL_STATUSES or (status is None and isinstance(exc, BadRequestError)):
        return True
    return status is not None and names_response_format(str(exc))


def check_format_option(value: object, *, what: str) -> str | None:
    """The pinned mode of a judge's ``response_format`` option; ``None`` for the ladder.

    ``None`` and ``"auto"`` ask for the ladder; a mode of :data:`FORMATS` pins
    it. Anything else is a :class:`~llm_connect.errors.ConfigurationError`
    naming ``what`` (the judge) and the valid values.
    """
    if value is None or value == AUTO:
        return None
    if isinstance(value, str) and value in FORMATS:
        return value
    valid = ", ".join((AUTO, *FORMATS))
    raise ConfigurationError(f"{what}: option 'response_format' must be one of {valid}, not {value!r}")


# -- the memory: what each endpoint and model accepted ------------------------------------

_accepted: dict[tuple[str, str], str] = {}
_accepted_lock = threading.Lock()


def _server_key(adapter: _Adapter) -> tuple[str, str]:
    """``(endpoint, model)`` of the adapter's server; the adapter id for adapters without them."""
    endpoint = getattr(adapter, "endpoint", None)
    model = getattr(adapter, "model", None)
    return (
        endpoint if isinstance(endpoint, str) else "",
        model if isinstance(model, str) and model else adapter.adapter_id,
    )


def accepted_format(adapter: _Adapter) -> str:
    """The first mode of :data:`FORMATS` the ladder tries with ``adapter``'s server.

    ``"json_schema"`` until a call to that endpoint and model has had to fall back.
    """
    with _accepted_lock:
        return _accepted.get(_server_key(adapter), FORMATS[0])


def _remember(adapter: _Adapter, mode: str) -> None:
    with _accepted_lock:
        _accepted[_server_key(adapter)] = mode


def forget_formats() -> None:
    """Forget every remembered format (the next calls start at ``json_schema`` again)."""
    with _accepted_lock:
        _accepted.clear()


# -- one judge's requests --------------------------------------------------------------------


@dataclass
class ReplyFormat:
    """How one judge asks for its reply: the reply's JSON schema, and a pinned mode or the ladder.

    :meth:`complete` / :meth:`acomplete` send a request down the ladder (or in
    the pinned mode) and count the modes that succeeded, per adapter id
    (:meth:`formats_used`).
    """

    name: str
    """The schema's name in the ``json_schema`` mode (``judge_grade``)."""
    schema: Mapping[str, Any]
    """The JSON schema of the reply."""
    pinned: str | None = None
    """A mode of :data:`FORMATS` to send always (no ladder); ``None``: the ladder."""
    _used: Counter[tuple[str, str]] = field(default_factory=Counter, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    requests: int = field(default=0, init=False, repr=False, compare=False)
    """Requests sent so far (each rung of the ladder a server refused counts too): the judge's
    model calls, which ``grade``'s header counts beside the sides' own."""

    def _sent(self) -> None:
        with self._lock:
            self.requests += 1

    def __post_init__(self) -> None:
        if self.pinned is not None and self.pinned not in FORMATS:
            raise ConfigurationError(f"unknown response format {self.pinned!r} (known: {', '.join(FORMATS)})")

    def param(self, mode: str) -> dict[str, Any] | None:
        """The ``response_format`` request parameter for ``mode`` (``None`` for ``"text"``)."""
        if mode == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {"name": self.name, "strict": True, "schema": dict(self.schema)},
            }
        if mode == "json_object_schema":
            return {"type": "json_object", "schema": dict(self.schema)}
        if mode == "json_object":
            return {"type": "json_object"}
        if mode == "text":
            return None
        raise ConfigurationError(f"unknown response format {mode!r} (known: {', '.join(FORMATS)})")

    def config(self, base: RunConfig, mode: str) -> RunConfig:
        """``base`` with ``response_format`` for ``mode`` added to its ``model_params``."""
        params = dict(base.model_params)
        params.pop("response_format", None)
        response_format = self.param(mode)
        if response_format is not None:
            params["response_format"] = response_format
        return base.replace(model_params=params)

    def first_mode(self, adapter: _Adapter) -> str:
        """The mode the next request to ``adapter`` is sent in (the pinned one, or the remembered one)."""
        return self.pinned or accepted_format(adapter)

    def _modes(self, adapter: _Adapter) -> tuple[str, ...]:
        if self.pinned is not None:
            return (self.pinned,)
        first = accepted_format(adapter)
        return FORMATS[FORMATS.index(first) :]

    def _succeeded(self, adapter: _Adapter, mode: str, modes: tuple[str, ...]) -> None:
        if self.pinned is None and mode != modes[0]:
            _remember(adapter, mode)
        with self._lock:
            self._used[(adapter.adapter_id, mode)] += 1

    def complete(self, adapter: _Adapter, message: str, base: RunConfig) -> tuple[LLMResponse, str]:
        """``adapter.complete`` down the ladder: ``(reply, mode that succeeded)``."""
        modes = self._modes(adapter)
        for mode in modes:
            try:
                self._sent()
                reply = adapter.complete(message, self.config(base, mode))
            except AdapterError as exc:
                if mode == modes[-1] or not refuses_format(exc):
                    raise
                continue
            self._succeeded(adapter, mode, modes)
            return reply, mode
        raise AssertionError("unreachable: the last mode returns or raises")  # pragma: no cover

    async def acomplete(self, adapter: _Adapter, message: str, base: RunConfig) -> tuple[LLMResponse, str]:
        """Async form of :meth:`complete` (``adapter.acomplete``)."""
        modes = self._modes(adapter)
        for mode in modes:
            try:
                self._sent()
                reply = await adapter.acomplete(message, self.config(base, mode))
            except AdapterError as exc:
                if mode == modes[-1] or not refuses_format(exc):
                    raise
                continue
            self._succeeded(adapter, mode, modes)
            return reply, mode
        raise AssertionError("unreachable: the last mode returns or raises")  # pragma: no cover

    def formats_used(self) -> dict[str, str]:
        """``{adapter id: mode}`` of every successful request so far; several modes used with
        one adapter are listed in ladder order, comma-separated."""
        with self._lock:
            used = list(self._used)
        out: dict[str, list[str]] = {}
        for adapter_id, mode in sorted(used, key=lambda key: (key[0], FORMATS.index(key[1]))):
            out.setdefault(adapter_id, []).append(mode)
        return {adapter_id: ", ".join(modes) for adapter_id, modes in out.items()}


def response_formats_used(judges: Iterable[object]) -> dict[str, str]:
    """``{grader id: response format(s)}`` of every judge that asked an LLM in this process.

    Reads each judge's ``formats_used()`` (an :class:`~llm_connect.grading.LLMJudge`,
    or the scorer inside a judge, such as the ``safety`` judge with a
    ``judge_model``); a judge that asked no LLM yet, or asks none, is left out.
    The value is the mode of :data:`FORMATS` its requests succeeded in (several,
    comma-separated, when it used more than one; with more than one adapter,
    each prefixed by its adapter id). Meant for the grade report: "which format
    each LLM judge used".
    """
    out: dict[str, str] = {}
    for judge in judges:
        method = getattr(judge, "formats_used", None)
        if method is None:
            method = getattr(getattr(judge, "scorer", None), "formats_used", None)
        if not callable(method):
            continue
        used = method()
        if not isinstance(used, Mapping) or not used:
            continue
        grader_id = str(
            getattr(judge, "grader_id", None) or getattr(judge, "name", None) or type(judge).__name__
        )
        if len(used) == 1:
            out[grader_id] = str(next(iter(used.values())))
        else:
            out[grader_id] = "; ".join(f"{adapter_id}: {mode}" for adapter_id, mode in used.items())
    return out
