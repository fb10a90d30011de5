"""Conversation: a chat history with tools, in the OpenAI chat format.

A prompt is either a string (one user message, after the run config's system
prompt) or a :class:`Conversation`: ``messages`` with the roles ``system``,
``developer``, ``user``, ``assistant`` and ``tool`` (assistant messages may
carry ``tool_calls``; a ``tool`` message answers one by ``tool_call_id``), plus
the ``tools`` (OpenAI function tools) the model may call and ``tool_choice``.

Everything is validated when the conversation is built; a problem raises
:class:`ConversationError` naming the field (``messages[2].tool_calls[0].id``).
The :attr:`Conversation.digest` covers messages, tools and tool choice, so the
ledger's prompt digest and the response cache tell two conversations apart even
when their last user message is the same.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from llm_connect.errors import ConfigurationError

__all__ = ["ROLES", "Conversation", "ConversationError", "Prompt", "prompt_text"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
"""The message roles a conversation may hold."""

_MESSAGE_FIELDS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "refusal"})
_TOOL_CHOICES = frozenset({"auto", "none", "required"})


class ConversationError(ConfigurationError):
    """A conversation, its tools or its tool choice is malformed; ``field`` names where."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


_SCALARS = frozenset({str, int, bool, type(None)})
"""The exact types :func:`_plain_copy` keeps as they are (floats are checked)."""


class _NotPlain(Exception):
    """:func:`_plain_copy` met something only :func:`_slow_copy` decides on."""


def _plain_copy(value: Any) -> Any:
    """:func:`_slow_copy` of a value made of exact ``dict``/``list``/``tuple``/scalar types only.

    No field path is built on the way; anything else (a subclass, a non-string
    key, NaN or infinity, an unknown type) raises :class:`_NotPlain` and the
    slow copy, which names the field, decides. The copies are the same.
    """
    t = type(value)
    if t is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            out[key] = item if type(item) in _SCALARS else _plain_copy(item)
        return out
    if t is list or t is tuple:
        return [item if type(item) in _SCALARS else _plain_copy(item) for item in value]
    if t is str or t is int or t is bool or value is None:
        return value
    if t is float and value - value == 0.0:  # NaN - NaN and inf - inf are NaN
        return value
    raise _NotPlain


def _json_copy(value: Any, where: str) -> Any:
    """A plain-JSON copy of ``value`` (dicts, lists, str, finite numbers, bool, None)."""
    try:
        return _plain_copy(value)
    except (_NotPlain, RecursionError):
        return _slow_copy(value, where)


def _slow_copy(value: Any, where: str) -> Any:
    """:func:`_json_copy`, naming the field of the first value that is not JSON."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConversationError(f"keys must be strings, not {key!r}", field=where)
            out[key] = _slow_copy(item, f"{where}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [_slow_copy(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise ConversationError("NaN and infinity are not JSON", field=where)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise ConversationError(f"{type(value).__name__} is not a JSON value", field=where)


def _content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _check_content(content: Any, where: str, *, required: bool) -> None:
    if content is None:
        if required:
            raise ConversationError("is required", field=where)
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list) or not content:
        raise ConversationError(
            f"must be a string or a non-empty list of content parts, not {type(content).__name__}",
            field=where,
        )
    for i, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise ConversationError("a content part must be an object with a 'type'", field=f"{where}[{i}]")
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise ConversationError("must be a string", field=f"{where}[{i}].text")


def _check_tool_calls(calls: Any, where: str) -> list[str]:
    if not isinstance(calls, list) or not calls:
        raise ConversationError("must be a non-empty list of tool calls", field=where)
    ids: list[str] = []
    for i, call in enumerate(calls):
        at = f"{where}[{i}]"
        if not isinstance(call, dict):
            raise ConversationError("a tool call must be an object", field=at)
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise ConversationError("must be a non-empty string", field=f"{at}.id")
        if call.get("type", "function") != "function":
            raise ConversationError("only 'function' tool calls are supported", field=f"{at}.type")
        function = call.get("function")
        if not isinstance(function, dict):
            raise ConversationError("is required (an object with name and arguments)", field=f"{at}.function")
        if not isinstance(function.get("name"), str) or not function["name"]:
            raise ConversationError("must be a non-empty string", field=f"{at}.function.name")
        if not isinstance(function.get("arguments"), str):
            raise ConversationError(
                "must be a string (the JSON text of the arguments)", field=f"{at}.function.arguments"
            )
        ids.append(call["id"])
    return ids


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise ConversationError("must be a non-empty list of messages", field="messages")
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        at = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ConversationError(f"a message must be an object, not {type(message).__name__}", field=at)
        if not _MESSAGE_FIELDS.issuperset(message):
            unknown = sorted(set(message) - _MESSAGE_FIELDS)
            raise ConversationError("unknown message field", field=f"{at}.{unknown[0]}")
        role = message.get("role")
        if role not in ROLES:
            raise ConversationError(
                f"must be one of {', '.join(sorted(ROLES))}, not {role!r}", field=f"{at}.role"
            )
        if "name" in message and not isinstance(message["name"], str):
            raise ConversationError("must be a string", field=f"{at}.name")
        content = message.get("content")
        if role == "assistant":
            has_calls = message.get("tool_calls") is not None
            if type(content) is not str:  # a string is always fine
                _check_content(content, f"{at}.content", required=not has_calls)
            if has_calls:
                open_calls.update(_check_tool_calls(message["tool_calls"], f"{at}.tool_calls"))
        else:
            if "tool_calls" in message:
                raise ConversationError("only assistant messages carry tool calls", field=f"{at}.tool_calls")
            if type(content) is not str:
                _check_content(content, f"{at}.content", required=True)
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise ConversationError("is required for a tool message", field=f"{at}.tool_call_id")
            if call_id not in open_calls:
                raise ConversationError(
                    f"{call_id!r} answers no earlier assistant tool call", field=f"{at}.tool_call_id"
                )
        elif "tool_call_id" in message:
            raise ConversationError("only tool messages carry tool_call_id", field=f"{at}.tool_call_id")
    if messages[-1]["role"] not in ("user", "tool"):
        raise ConversationError(
            "the last message must be from the user or a tool (it is what the model answers)",
            field=f"messages[{len(messages) - 1}].role",
        )


def _check_tools(tools: Any) -> list[str]:
    if not isinstance(tools, list):
        raise ConversationError("must be a list of function tools", field="tools")
    names: list[str] = []
    for i, tool in enumerate(tools):
        at = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise ConversationError("a tool must be an object", field=at)
        if tool.get("type") != "function":
            raise ConversationError("must be 'function'", field=f"{at}.type")
        function = tool.get("function")
        if not isinstance(function, dict):
            raise ConversationError(
                "is required (an object with name and parameters)", field=f"{at}.function"
            )
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ConversationError("must be a non-empty string", field=f"{at}.function.name")
        if name in names:
            raise ConversationError(f"duplicate tool name {name!r}", field=f"{at}.function.name")
        params = function.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise ConversationError("must be a JSON Schema object", field=f"{at}.function.parameters")
        names.append(name)
    return names


def _check_tool_choice(choice: Any, names: Sequence[str]) -> None:
    if choice is None:
        return
    if isinstance(choice, str):
        if choice not in _TOOL_CHOICES:
            raise ConversationError(
                f"must be one of auto, none, required or a function, not {choice!r}", field="tool_choice"
            )
        if choice == "required" and not names:
            raise ConversationError("'required' needs tools", field="tool_choice")
        return
    if (
        not isinstance(choice, dict)
        or choice.get("type") != "function"
        or not isinstance(choice.get("function"), dict)
    ):
        raise ConversationError(
            "must be a string or {'type': 'function', 'function': {'name': ...}}", field="tool_choice"
        )
    name = choice["function"].get("name")
    if name not in names:
        raise ConversationError(
            f"names a function that is not among the tools: {name!r}", field="tool_choice.function.name"
        )


class Conversation:
    """A validated chat history, the tools the model may call and the tool choice.

    Immutable: the accessors return copies. Equal when the digests are equal.

    Example::

        Conversation(
            [{"role": "user", "content": "Refund order 42"}],
            tools=[{"type": "function", "function": {"name": "refund", "parameters": {...}}}],
        )

    Raises:
        ConversationError: a field is malformed (the error names it).
    """

    __slots__ = ("_data", "_digest", "_json")

    def __init__(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
    ) -> None:
        data = {
            "messages": _json_copy(
                list(messages) if isinstance(messages, (list, tuple)) else messages, "messages"
            ),
            "tools": _json_copy(list(tools or ()), "tools"),
            "tool_choice": _json_copy(tool_choice, "tool_choice"),
        }
        _check_messages(data["messages"])
        _check_tool_choice(data["tool_choice"], _check_tools(data["tools"]))
        self._data = data
        self._json = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        self._digest = hashlib.sha256(self._json.encode("utf-8")).hexdigest()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Conversation:
        """Build from ``{"messages": [...], "tools": [...], "tool_choice": ...}`` (:meth:`to_dict`'s form)."""
        if not isinstance(data, Mapping):
            raise ConversationError(f"must be an object, not {type(data).__name__}", field="conversation")
        unknown = sorted(set(data) - {"messages", "tools", "tool_choice"})
        if unknown:
            raise ConversationError("unknown field", field=unknown[0])
        if "messages" not in data:
            raise ConversationError("is required", field="messages")
        return cls(data["messages"], tools=data.get("tools"), tool_choice=data.get("tool_choice"))

    # -- accessors ----------------------------------------------------------------

    @property
    def messages(self) -> list[dict[str, Any]]:
        """A copy of the messages, as sent to the model."""
        return json.loads(json.dumps(self._data["messages"]))  # type: ignore[no-any-return]

    @property
    def tools(self) -> list[dict[str, Any]]:
        """A copy of the tools (empty when none)."""
        return json.loads(json.dumps(self._data["tools"]))  # type: ignore[no-any-return]

    @property
    def tool_choice(self) -> str | dict[str, Any] | None:
        """The tool choice (``None``: the server's default)."""
        choice: str | dict[str, Any] | None = self._data["tool_choice"]
        return dict(json.loads(json.dumps(choice))) if isinstance(choice, dict) else choice

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools, in order."""
        return [t["function"]["name"] for t in self._data["tools"]]

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of messages, tools and tool choice."""
        return self._digest

    @property
    def has_system(self) -> bool:
        """Whether the conversation holds its own system (or developer) message."""
        return any(m["role"] in ("system", "developer") for m in self._data["messages"])

    @property
    def last_user_text(self) -> str:
        """The text of the last user message ("" when there is none)."""
        for message in reversed(self._data["messages"]):
            if message["role"] == "user":
                return _content_text(message.get("content"))
        return ""

    def to_dict(self) -> dict[str, Any]:
        """``{"messages", "tools", "tool_choice"}``, JSON-serialisable."""
        return json.loads(self._json)  # type: ignore[no-any-return]

    def to_json(self) -> str:
        """The canonical JSON (sorted keys) the digest is computed from."""
        return self._json

    def openai_messages(self, system_prompt: str | None = None) -> list[dict[str, Any]]:
        """The messages for a chat-completion request.

        ``system_prompt`` (the run config's) goes first unless the conversation
        holds its own system or developer message, which wins. An assistant message with
        tool calls and no content is sent with an empty string as its content (every
        OpenAI-compatible server we know takes that; some refuse ``null``).
        """
        messages = self.messages
        for message in messages:
            # An assistant turn that only calls tools carries ``"content": ""``, not ``null``:
            # OpenAI takes either, while llama-cpp-python's server refuses ``null`` (HTTP 500,
            # "content: Input should be a valid string") and rejects a missing key too.
            if (
                message.get("role") == "assistant"
                and message.get("content") is None
                and message.get("tool_calls")
            ):
                message["content"] = ""
        if system_prompt is not None and not self.has_system:
            messages.insert(0, {"role": "system", "content": system_prompt})
        return messages

    def render(self) -> str:
        """A readable transcript: one block per message, tool calls spelled out.

        Judges that read text (the LLM judge, VRTY) and the ledger's ``prompt``
        column get this form; tools are listed by name at the top.
        """
        lines: list[str] = []
        if self._data["tools"]:
            lines.append("[tools: " + ", ".join(self.tool_names) + "]")
        for message in self._data["messages"]:
            role = message["role"]
            text = _content_text(message.get("content"))
            if role == "tool":
                lines.append(f"tool ({message['tool_call_id']}): {text}")
                continue
            if text:
                lines.append(f"{role}: {text}")
            for call in message.get("tool_calls") or ():
                fn = call["function"]
                lines.append(f"{role} calls {fn['name']}({fn['arguments']}) [{call['id']}]")
        return "\n".join(lines)

    # -- value semantics -------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Conversation) and other._digest == self._digest

    def __hash__(self) -> int:
        return hash(self._digest)

    def __repr__(self) -> str:
        n = len(self._data["messages"])
        tools = f", tools={self.tool_names}" if self._data["tools"] else ""
        return f"Conversation({n} messages{tools})"

    def __reduce__(self) -> tuple[Any, ...]:
        data = self._data
        return (_rebuild, (data["messages"], data["tools"], data["tool_choice"]))


def _rebuild(messages: Any, tools: Any, tool_choice: Any) -> Conversation:
    return Conversation(messages, tools=tools, tool_choice=tool_choice)


Prompt = str | Conversation
"""What a model answers: a user prompt string, or a :class:`Conversation`."""


def prompt_text(prompt: Prompt) -> str:
    """The text form of a prompt: the string itself, or the conversation's transcript."""
    return prompt if isinstance(prompt, str) else prompt.render()
