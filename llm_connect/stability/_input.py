"""Stability inputs: the three Ruvrics formats, validated with errors naming file and field.

* simple: ``{"system_prompt": "...", "user_input": "..."}`` (``system_prompt`` optional);
* messages: ``{"messages": [...]}`` in the OpenAI chat format;
* either may carry ``tools`` (OpenAI function tools) and ``tool_choice``, or the tools
  come from a separate file holding a JSON list of them (``--tools tools.json``); the
  system prompt may come from a text file (``--prompt system.txt``).

Errors: the input file not being JSON is :class:`~llm_connect.errors.InvalidJSONInputError`;
any other problem with it is :class:`~llm_connect.errors.StabilityInputError` reading
``query.json: messages[1].content: ...``; anything wrong with the tools (the tools file,
its JSON included, or an input's ``tools`` / ``tool_choice``) is
:class:`~llm_connect.errors.ToolDefinitionError`. A file that cannot be read is a
:class:`~llm_connect.errors.ConfigurationError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_connect._conversation import Conversation, ConversationError
from llm_connect.errors import (
    ConfigurationError,
    InvalidJSONInputError,
    StabilityInputError,
    ToolDefinitionError,
)

__all__ = ["StabilityQuery", "load_query", "load_tools", "query_from_dict"]

_SIMPLE_KEYS = frozenset({"system_prompt", "user_input", "tools", "tool_choice"})
_MESSAGES_KEYS = frozenset({"messages", "tools", "tool_choice"})


@dataclass(frozen=True)
class StabilityQuery:
    """One request to repeat, loaded from a Ruvrics input: the conversation sent every run."""

    conversation: Conversation
    """Messages (the system prompt included), tools and tool choice, validated."""
    source: str | None = None
    """The input file it came from (``None`` when built from a dict)."""
    prompt_source: str | None = None
    """The system-prompt file, when one was given."""
    tools_source: str | None = None
    """The tools file, when one was given."""

    def to_dict(self) -> dict[str, Any]:
        """``{"conversation", "source", "prompt_source", "tools_source"}``, JSON-serialisable."""
        return {
            "conversation": self.conversation.to_dict(),
            "source": self.source,
            "prompt_source": self.prompt_source,
            "tools_source": self.tools_source,
        }


def _read_text(path: str | Path, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read the {what} {str(path)!r}: {exc}") from exc


def _parse_json(text: str, path: str, error: type[StabilityInputError]) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"not valid JSON: {exc.msg}", path=path, field=f"line {exc.lineno} column {exc.colno}"
        ) from exc


def _tool_field(field: str, *, in_file: bool) -> str:
    """``tools[0].function.name`` as it reads in a tools file (``[0].function.name``)."""
    return field[len("tools") :] if in_file and field.startswith("tools") else field


def _check_tools(tools: Any, path: str | None, *, in_file: bool) -> list[dict[str, Any]]:
    """Validate a list of OpenAI function tools; errors are :class:`ToolDefinitionError`."""
    if not isinstance(tools, list):
        raise ToolDefinitionError(
            f"must be a list of OpenAI function tools, not {type(tools).__name__}",
            path=path,
            field=None if in_file else "tools",
        )
    try:
        conversation = Conversation([{"role": "user", "content": "-"}], tools=tools)
    except ConversationError as exc:
        raise ToolDefinitionError(
            exc.reason, path=path, field=_tool_field(exc.field, in_file=in_file)
        ) from exc
    return conversation.tools


def load_tools(path: str | Path) -> list[dict[str, Any]]:
    """The OpenAI function tools in a JSON file holding a list of them.

    Raises:
        ToolDefinitionError: the file is not JSON, or not a valid list of function tools.
        ConfigurationError: the file cannot be read.
    """
    shown = str(path)
    data = _parse_json(_read_text(path, "tools file"), shown, ToolDefinitionError)
    return _check_tools(data, shown, in_file=True)


def _conversation_error(exc: ConversationError, path: str | None) -> StabilityInputError:
    error = ToolDefinitionError if exc.field.startswith(("tools", "tool_choice")) else StabilityInputError
    return error(exc.reason, path=path, field=exc.field)


def query_from_dict(
    data: Mapping[str, Any],
    *,
    source: str | None = None,
    system_prompt: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    prompt_source: str | None = None,
    tools_source: str | None = None,
) -> StabilityQuery:
    """Validate a Ruvrics input (simple or messages format) into a :class:`StabilityQuery`.

    ``system_prompt`` and ``tools`` come from separate files (``--prompt``,
    ``--tools``); giving either both there and in ``data`` is an error, as is a
    system prompt for a conversation that holds its own system message.

    Raises:
        StabilityInputError: a field is missing, unknown or malformed (names ``source`` and field).
        ToolDefinitionError: the tools or tool choice are malformed.
    """
    if not isinstance(data, Mapping):
        raise StabilityInputError(
            f"must be a JSON object with user_input or messages, not {type(data).__name__}", path=source
        )
    is_messages = "messages" in data
    if is_messages and "user_input" in data:
        raise StabilityInputError("give user_input or messages, not both", path=source, field="messages")
    allowed = _MESSAGES_KEYS if is_messages else _SIMPLE_KEYS
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise StabilityInputError(
            f"unknown field (expected {', '.join(sorted(allowed))})", path=source, field=unknown[0]
        )

    file_tools: list[dict[str, Any]] | None = None
    if tools is not None:
        file_tools = _check_tools(list(tools), tools_source, in_file=tools_source is not None)
        if "tools" in data:
            raise ToolDefinitionError(
                f"tools are given here and in {tools_source or 'the tools argument'}; give them in one place",
                path=source,
                field="tools",
            )
    if "tools" in data:
        _check_tools(data["tools"], source, in_file=False)
    given_tools = file_tools if file_tools is not None else data.get("tools")

    if system_prompt is not None and not isinstance(system_prompt, str):
        raise ConfigurationError(f"system_prompt must be a string, not {type(system_prompt).__name__}")
    if is_messages:
        messages = data["messages"]
        if system_prompt is not None and isinstance(messages, list):
            for i, message in enumerate(messages):
                if isinstance(message, dict) and message.get("role") in ("system", "developer"):
                    raise StabilityInputError(
                        f"a system message is given here and in {prompt_source or 'the system prompt'}; "
                        "give it in one place",
                        path=source,
                        field=f"messages[{i}]",
                    )
        if system_prompt is not None:
            messages = [{"role": "system", "content": system_prompt}, *messages]
    else:
        user_input = data.get("user_input")
        if "user_input" not in data:
            raise StabilityInputError("is required (or give messages)", path=source, field="user_input")
        if not isinstance(user_input, str) or not user_input.strip():
            raise StabilityInputError("must be a non-empty string", path=source, field="user_input")
        inline_system = data.get("system_prompt")
        if inline_system is not None and not isinstance(inline_system, str):
            raise StabilityInputError("must be a string", path=source, field="system_prompt")
        if inline_system is not None and system_prompt is not None:
            raise StabilityInputError(
                f"given here and in {prompt_source or 'the system prompt'}; give it in one place",
                path=source,
                field="system_prompt",
            )
        system = system_prompt if system_prompt is not None else inline_system
        messages = [{"role": "system", "content": system}] if system is not None else []
        messages.append({"role": "user", "content": user_input})
    try:
        conversation = Conversation(messages, tools=given_tools, tool_choice=data.get("tool_choice"))
    except ConversationError as exc:  # the tools were checked above: this is about messages or tool_choice
        raise _conversation_error(exc, source) from exc
    return StabilityQuery(conversation, source=source, prompt_source=prompt_source, tools_source=tools_source)


def load_query(
    input_path: str | Path,
    *,
    prompt_path: str | Path | None = None,
    tools_path: str | Path | None = None,
) -> StabilityQuery:
    """Load a Ruvrics input file, with an optional system-prompt file and tools file.

    Raises:
        InvalidJSONInputError: the input file is not JSON (names file, line and column).
        StabilityInputError: the input is malformed (names file and field).
        ToolDefinitionError: the tools file or the input's tools are malformed.
        ConfigurationError: a file cannot be read.
    """
    shown = str(input_path)
    data = _parse_json(_read_text(input_path, "input file"), shown, InvalidJSONInputError)
    tools = load_tools(tools_path) if tools_path is not None else None
    system_prompt = None
    if prompt_path is not None:
        system_prompt = _read_text(prompt_path, "system prompt file").strip()
        if not system_prompt:
            raise StabilityInputError("the system prompt file is empty", path=str(prompt_path))
    return query_from_dict(
        data,
        source=shown,
        system_prompt=system_prompt,
        tools=tools,
        prompt_source=None if prompt_path is None else str(prompt_path),
        tools_source=None if tools_path is None else str(tools_path),
    )
