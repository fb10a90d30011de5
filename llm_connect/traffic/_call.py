"""One production call as a reader found it, before it becomes a suite case.

Every reader (OTLP JSON, OpenAI-style logs, Langfuse) turns its records into
:class:`TrafficCall` values, or into :class:`Skip` values for input it cannot
use; :mod:`llm_connect.traffic._importer` does the rest (checking, masking,
sampling, writing). Helpers here convert the message shapes the sources use
into the OpenAI chat format that :class:`~llm_connect.types.Conversation` takes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from llm_connect.traffic._json import canonical

__all__ = [
    "Answer",
    "Deferred",
    "Probe",
    "Ready",
    "Skip",
    "TrafficCall",
    "call_key",
    "content_key",
    "openai_message",
    "openai_tool",
    "parts_messages",
]


@dataclass
class Answer:
    """The answer production got: text and tool calls, with what the source knows about it."""

    text: str = ""
    """The completion text (empty when the model only called tools)."""
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    """``{"name", "arguments"}`` (arguments as JSON text), in order."""
    model: str | None = None
    """The model that answered, as the server reported it."""
    prompt_tokens: int | None = None
    """Tokens in the request, when reported."""
    completion_tokens: int | None = None
    """Tokens generated, when reported."""
    latency_ms: float | None = None
    """Wall time of the call, when the source has its start and end."""
    cost_usd: float | None = None
    """What the call cost, when the source says."""
    finish_reason: str | None = None
    """Why generation stopped, when reported."""

    @property
    def empty(self) -> bool:
        """Neither text nor tool calls."""
        return not self.text.strip() and not self.tool_calls


@dataclass
class TrafficCall:
    """One chat call from production: the request, the answer and where it came from."""

    file: str
    """The file it was read from."""
    line: int
    """The line of that file (1-based; the line of the span or record)."""
    ref: str | None
    """The source's own id (span id, log id, observation id), when it has one."""
    messages: list[dict[str, Any]] | None
    """The request's messages in the OpenAI chat format (``None``: the source held none)."""
    tools: list[dict[str, Any]] | None = None
    """OpenAI function tools, when the source recorded them."""
    tool_choice: Any = None
    """The request's tool choice, when recorded."""
    requested_model: str | None = None
    """The model that was asked for."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Run settings of the request (temperature, max_tokens, top_p, ...)."""
    answer: Answer | None = None
    """What production answered (``None``: no answer recorded)."""
    error: str | None = None
    """Why the call failed, when it did."""
    tags: list[str] = field(default_factory=list)
    """Tags the source gives the call."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Everything else the source says about the call (attributes, trace id, user...)."""
    content_key: bytes | None = None
    """The reader's key of the conversation's source text (see :func:`call_key`), when it has one."""

    @property
    def where(self) -> str:
        """``file:line`` plus the source id, for messages."""
        ref = f" ({self.ref})" if self.ref else ""
        return f"{self.file}:{self.line}{ref}"


@dataclass(frozen=True)
class Skip:
    """Input that could not be used: which reason, and where."""

    reason: str
    """A short, stable reason (``not valid JSON``, ``no input messages``, ...): skips are counted by it."""
    file: str
    """The file."""
    line: int
    """The line."""
    ref: str | None = None
    """The record's own id, when known."""
    detail: str = ""
    """More about this one (the field a conversation was refused for)."""

    @property
    def where(self) -> str:
        """``file:line`` plus the source id."""
        ref = f" ({self.ref})" if self.ref else ""
        return f"{self.file}:{self.line}{ref}"


_BLAKE16 = hashlib.blake2b(digest_size=16)
"""Copied for each key (cheaper than a new hash object)."""


def content_key(*parts: Any) -> bytes:
    """A 16-byte key of a conversation's source: equal texts, equal JSON values, ``None`` for absent."""
    h = _BLAKE16.copy()
    for part in parts:
        if isinstance(part, str):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        elif part is None:
            h.update(b"\x01")
        else:
            h.update(canonical(part))
            h.update(b"\x02")
    return h.digest()


def call_key(call: TrafficCall) -> bytes:
    """The key sampling gives a call: the reader's :attr:`~TrafficCall.content_key`, else its conversation's.

    A sample is drawn by this key (and duplicates found by it) before any case is
    built; exact duplicates are still removed afterwards by the conversation's digest.
    """
    if call.content_key is not None:
        return call.content_key
    return content_key([call.messages, call.tools, call.tool_choice])


@dataclass(slots=True)
class Probe:
    """What sampling needs of a call before its case is built."""

    key: bytes
    """:func:`call_key`."""
    error: bool
    """The call failed (it will be dropped)."""
    empty: bool
    """The answer is missing or empty (it will be dropped)."""
    requested_model: str | None
    """The model asked for."""
    answer_model: str | None
    """The model that answered."""
    stratum: str | None = None
    """The call's stratum, when worked out already (by a worker of :mod:`llm_connect.traffic._parallel`)."""


class Deferred(Protocol):
    """A call whose content is decoded only if sampling draws it."""

    file: str
    line: int

    def probe(self) -> Probe | Skip:
        """What sampling needs (cheap), or the skip found on the way."""

    def build(self) -> TrafficCall | Skip:
        """The call, decoded in full."""

    def metadata(self) -> Mapping[str, Any]:
        """The call's metadata (for ``--task-from`` and ``--stratify-by KEY``)."""

    def tags(self) -> list[str]:
        """The call's tags."""


class Ready:
    """A :class:`TrafficCall` already decoded, as a :class:`Deferred`."""

    __slots__ = ("call", "file", "line")

    def __init__(self, call: TrafficCall) -> None:
        self.call, self.file, self.line = call, call.file, call.line

    def probe(self) -> Probe:
        """The probe of the decoded call."""
        call = self.call
        answer = call.answer
        return Probe(
            call_key(call),
            call.error is not None,
            answer is None or answer.empty,
            call.requested_model,
            answer.model if answer is not None else None,
        )

    def build(self) -> TrafficCall:
        """The call."""
        return self.call

    def metadata(self) -> Mapping[str, Any]:
        """The call's metadata."""
        return self.call.metadata

    def tags(self) -> list[str]:
        """The call's tags."""
        return self.call.tags


def _json_text(value: Any) -> str:
    """Arguments or a tool result as text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def openai_tool(tool: Any) -> Any:
    """An OpenAI function tool from the OpenAI form or the flat form (``{"type", "name", "parameters"}``)."""
    if (
        (type(tool) is dict or isinstance(tool, Mapping))
        and "function" not in tool
        and isinstance(tool.get("name"), str)
    ):
        function = {k: v for k, v in tool.items() if k in ("name", "description", "parameters", "strict")}
        return {"type": "function", "function": function}
    return tool


def openai_message(message: Any) -> Any:
    """A chat message with only the fields the OpenAI format (and :class:`Conversation`) knows.

    Gateways log extra keys (``function_call: null``, ``audio``, provider fields):
    ``None`` values are dropped, other unknown keys are kept so the conversation
    check names them.
    """
    if not (type(message) is dict or isinstance(message, Mapping)):
        return message
    return {k: v for k, v in message.items() if v is not None and k not in ("function_call", "audio")}


def parts_messages(messages: Any, system: Any = None) -> list[dict[str, Any]]:
    """OpenAI messages from the GenAI semantic conventions' ``parts`` form.

    ``messages`` is ``gen_ai.input.messages`` (a list of ``{"role", "parts": [...]}``;
    parts ``text`` ``{"content"}``, ``tool_call`` ``{"id", "name", "arguments"}``,
    ``tool_call_response`` ``{"id", "response"}``); ``system`` is
    ``gen_ai.system_instructions`` (a list of text parts), sent first.

    Raises:
        ValueError: a message or part this importer cannot represent (an image,
            a part of an unknown type); the message names it.
    """
    out: list[dict[str, Any]] = []
    if system:
        text = _parts_text(system if isinstance(system, list) else [system], "system_instructions")
        out.append({"role": "system", "content": text})
    if not isinstance(messages, list):
        raise ValueError("gen_ai.input.messages is not a list")
    for i, message in enumerate(messages):
        if not (type(message) is dict or isinstance(message, Mapping)) or "parts" not in message:
            if (type(message) is dict or isinstance(message, Mapping)) and (
                "content" in message or "tool_calls" in message
            ):
                out.append(openai_message(message))  # already the OpenAI form
                continue
            raise ValueError(f"message {i} has no parts")
        out.extend(_parts_message(message, i))
    return out


def _parts_text(parts: list[Any], where: str) -> str:
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif (
            (type(part) is dict or isinstance(part, Mapping))
            and part.get("type") == "text"
            and isinstance(part.get("content"), str)
        ):
            texts.append(part["content"])
        else:
            kind = (
                part.get("type") if (type(part) is dict or isinstance(part, Mapping)) else type(part).__name__
            )
            raise ValueError(f"{where}: unsupported part type {kind!r}")
    return "".join(texts)


def _parts_message(message: Mapping[str, Any], index: int) -> list[dict[str, Any]]:
    role = message.get("role")
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise ValueError(f"message {index}: parts is not a list")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type") if (type(part) is dict or isinstance(part, Mapping)) else None
        if kind == "text" and isinstance(part.get("content"), str):
            texts.append(part["content"])
        elif kind == "tool_call":
            calls.append(
                {
                    "id": str(part.get("id") or f"call_{index}_{len(calls)}"),
                    "type": "function",
                    "function": {
                        "name": part.get("name"),
                        "arguments": _json_text(part.get("arguments") or {}),
                    },
                }
            )
        elif kind == "tool_call_response":
            results.append(
                {"role": "tool", "tool_call_id": part.get("id"), "content": _json_text(part.get("response"))}
            )
        else:
            raise ValueError(f"message {index}: unsupported part type {kind!r}")
    if role == "tool" or results:
        return results or [{"role": "tool", "content": "".join(texts)}]
    out: dict[str, Any] = {"role": role, "content": "".join(texts) if texts or not calls else None}
    if calls:
        out["tool_calls"] = calls
    if out["content"] is None:
        del out["content"]
    return [out]


def parts_answer(messages: Any) -> tuple[str, list[dict[str, str]], str | None]:
    """Text, tool calls and finish reason of ``gen_ai.output.messages`` (the first choice)."""
    if not isinstance(messages, list) or not messages:
        return "", [], None
    first = messages[0]
    if not (type(first) is dict or isinstance(first, Mapping)):
        return "", [], None
    texts, calls = [], []
    for part in first.get("parts") or ():
        if not (type(part) is dict or isinstance(part, Mapping)):
            continue
        if part.get("type") == "text" and isinstance(part.get("content"), str):
            texts.append(part["content"])
        elif part.get("type") == "tool_call" and isinstance(part.get("name"), str):
            calls.append({"name": part["name"], "arguments": _json_text(part.get("arguments") or {})})
    finish = first.get("finish_reason")
    return "".join(texts), calls, finish if isinstance(finish, str) else None


def choice_answer(message: Any) -> tuple[str, list[dict[str, str]]]:
    """Text and tool calls of an OpenAI assistant message (a choice's ``message``)."""
    if not (type(message) is dict or isinstance(message, Mapping)):
        return "", []
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if (type(p) is dict or isinstance(p, Mapping)))
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if (type(call) is dict or isinstance(call, Mapping)) else None
        if (type(function) is dict or isinstance(function, Mapping)) and isinstance(
            function.get("name"), str
        ):
            calls.append({"name": function["name"], "arguments": _json_text(function.get("arguments") or "")})
    return content if isinstance(content, str) else "", calls
