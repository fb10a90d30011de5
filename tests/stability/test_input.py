"""The three Ruvrics input formats, and errors that name the file and the field."""

from __future__ import annotations

import pytest

from llm_connect.errors import (
    ConfigurationError,
    InvalidJSONInputError,
    StabilityInputError,
    ToolDefinitionError,
)
from llm_connect.stability import load_query, load_tools
from tests.stability.conftest import ORDER_TOOLS, write_json


def test_simple_format(tmp_path):
    path = write_json(
        tmp_path / "query.json", {"system_prompt": "Be brief.", "user_input": "What is Python?"}
    )
    query = load_query(path)
    assert query.conversation.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is Python?"},
    ]
    assert query.conversation.tools == [] and query.source == str(path)


def test_simple_format_without_a_system_prompt(tmp_path):
    query = load_query(write_json(tmp_path / "q.json", {"user_input": "Find flights to Tokyo"}))
    assert query.conversation.messages == [{"role": "user", "content": "Find flights to Tokyo"}]


def test_messages_format_with_tools_and_tool_choice(tmp_path):
    messages = [{"role": "system", "content": "You track orders."}, {"role": "user", "content": "Order 42?"}]
    data = {"messages": messages, "tools": ORDER_TOOLS, "tool_choice": "auto"}
    query = load_query(write_json(tmp_path / "q.json", data))
    assert query.conversation.messages == messages
    assert query.conversation.tools == ORDER_TOOLS and query.conversation.tool_choice == "auto"


def test_separate_system_prompt_and_tools_files(tmp_path):
    q = write_json(tmp_path / "query.json", {"user_input": "Find flights to Tokyo"})
    tools = write_json(tmp_path / "tools.json", ORDER_TOOLS)
    prompt = tmp_path / "system.txt"
    prompt.write_text("You book travel.\n", encoding="utf-8")
    query = load_query(q, prompt_path=prompt, tools_path=tools)
    assert query.conversation.messages[0] == {"role": "system", "content": "You book travel."}
    assert query.conversation.tools == ORDER_TOOLS
    assert (query.prompt_source, query.tools_source) == (str(prompt), str(tools))


def test_a_malformed_message_names_the_file_and_the_field(tmp_path):
    path = write_json(
        tmp_path / "query.json", {"messages": [{"role": "system", "content": "x"}, {"role": "user"}]}
    )
    with pytest.raises(StabilityInputError) as info:
        load_query(path)
    assert str(info.value).startswith(f"{path}: messages[1].content: ")
    assert info.value.field == "messages[1].content" and info.value.path == str(path)
    assert not isinstance(info.value, ToolDefinitionError)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"system_prompt": "x"}, "user_input"),
        ({"user_input": ""}, "user_input"),
        ({"user_input": 3}, "user_input"),
        ({"user_input": "q", "system_prompt": ["x"]}, "system_prompt"),
        ({"user_input": "q", "temperature": 0}, "temperature"),
        ({"user_input": "q", "messages": []}, "messages"),
        ({"messages": "hello"}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ],
)
def test_each_malformed_field_is_named(tmp_path, data, field):
    with pytest.raises(StabilityInputError) as info:
        load_query(write_json(tmp_path / "query.json", data))
    assert info.value.field == field and f"query.json: {field}: " in str(info.value)


def test_not_an_object(tmp_path):
    with pytest.raises(StabilityInputError, match="must be a JSON object"):
        load_query(write_json(tmp_path / "query.json", ["What is Python?"]))


def test_invalid_json_is_its_own_error(tmp_path):
    path = tmp_path / "query.json"
    path.write_text('{"user_input": "What is Python?",\n}', encoding="utf-8")
    with pytest.raises(InvalidJSONInputError) as info:
        load_query(path)
    assert str(info.value).startswith(f"{path}: line 2 column 1: not valid JSON")


@pytest.mark.parametrize(
    ("tools", "field"),
    [
        ({"name": "x"}, None),
        ([{"type": "retrieval"}], "[0].type"),
        ([{"type": "function", "function": {"description": "no name"}}], "[0].function.name"),
        (
            [{"type": "function", "function": {"name": "a", "parameters": "object"}}],
            "[0].function.parameters",
        ),
        ([ORDER_TOOLS[0], ORDER_TOOLS[0]], "[1].function.name"),
    ],
)
def test_a_bad_tools_file_is_a_tool_error_naming_the_place(tmp_path, tools, field):
    path = write_json(tmp_path / "tools.json", tools)
    with pytest.raises(ToolDefinitionError) as info:
        load_tools(path)
    assert info.value.path == str(path) and info.value.field == field
    assert str(info.value).startswith(f"{path}: ")


def test_a_tools_file_that_is_not_json_is_a_tool_error(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text("[{'type': 'function'}]", encoding="utf-8")
    query = write_json(tmp_path / "query.json", {"user_input": "q"})
    with pytest.raises(ToolDefinitionError, match=r"tools\.json: line 1 column 3: not valid JSON"):
        load_query(query, tools_path=path)


def test_bad_inline_tools_and_tool_choice_are_tool_errors(tmp_path):
    with pytest.raises(ToolDefinitionError, match=r"query.json: tools\[0\].function.name"):
        load_query(write_json(tmp_path / "query.json", {"user_input": "q", "tools": [{"type": "function",
                                                                                       "function": {}}]}))  # fmt: skip
    data = {
        "user_input": "q",
        "tools": ORDER_TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "x"}},
    }
    with pytest.raises(ToolDefinitionError, match=r"tool_choice\.function\.name"):
        load_query(write_json(tmp_path / "query.json", data))


def test_tools_or_a_system_prompt_given_twice_are_refused(tmp_path):
    tools = write_json(tmp_path / "tools.json", ORDER_TOOLS)
    with pytest.raises(ToolDefinitionError, match="one place"):
        load_query(
            write_json(tmp_path / "q.json", {"user_input": "q", "tools": ORDER_TOOLS}), tools_path=tools
        )
    prompt = tmp_path / "system.txt"
    prompt.write_text("Be brief.", encoding="utf-8")
    with pytest.raises(StabilityInputError, match="system_prompt: given here and in"):
        load_query(
            write_json(tmp_path / "q.json", {"user_input": "q", "system_prompt": "x"}), prompt_path=prompt
        )
    messages = {"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "q"}]}
    with pytest.raises(StabilityInputError, match=r"messages\[0\]: a system message is given here"):
        load_query(write_json(tmp_path / "q.json", messages), prompt_path=prompt)


def test_an_unreadable_file_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigurationError, match="cannot read the input file"):
        load_query(tmp_path / "missing.json")
    assert not issubclass(ConfigurationError, StabilityInputError)
