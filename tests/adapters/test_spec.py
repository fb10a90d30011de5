"""adapter_from_spec: ``provider:model`` strings to adapters."""

from __future__ import annotations

import pytest

from llm_connect.adapters import OpenAIAdapter, adapter_from_spec
from llm_connect.errors import ConfigurationError
from llm_connect.types import RunConfig


def test_openai_spec_builds_a_working_adapter(openai_server):
    adapter = adapter_from_spec(
        "openai:gpt-test", base_url=openai_server.base_url, pricing={"input": 1, "output": 1}
    )
    assert isinstance(adapter, OpenAIAdapter) and adapter.adapter_id == "openai:gpt-test"
    assert adapter.complete("hi", RunConfig()).cost_usd is not None


def test_model_names_may_contain_colons(openai_server):
    adapter = adapter_from_spec("openai:llama3.1:8b", base_url=openai_server.base_url)
    adapter.complete("hi", RunConfig())
    assert openai_server.requests[0].body["model"] == "llama3.1:8b"


@pytest.mark.parametrize("spec", ["anthropic:claude", "nope:x"])
def test_unknown_provider_is_named(spec):
    with pytest.raises(ConfigurationError, match=spec):
        adapter_from_spec(spec)


@pytest.mark.parametrize("spec", ["", "openai", "openai:", "gpt-4o"])
def test_malformed_spec(spec):
    with pytest.raises(ConfigurationError, match="provider:model"):
        adapter_from_spec(spec)


def test_recorded_is_left_to_the_cli():
    with pytest.raises(ConfigurationError, match="recorded"):
        adapter_from_spec("recorded:baseline")
