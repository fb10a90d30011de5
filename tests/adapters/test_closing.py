"""An adapter's connections are closed even when the adapter is dropped without ``close()``.

A socket left open is found only by the garbage collector, as an "unclosed" ResourceWarning raised
in whichever later code happens to trigger a collection (a ``PytestUnraisableExceptionWarning``
in another test, an error under ``warnings.simplefilter("error")``).
"""

from __future__ import annotations

import gc
import warnings
from typing import Any

from llm_connect.adapters import OpenAIAdapter
from llm_connect.adapters import run_in_own_loop as run
from llm_connect.types import RunConfig
from tests.fixtures.openai_server import OpenAIServer


def _unclosed(caught: list[warnings.WarningMessage]) -> list[str]:
    return [
        str(w.message)
        for w in caught
        if issubclass(w.category, ResourceWarning) and "unclosed" in str(w.message)
    ]


def test_an_adapter_dropped_before_the_librarys_loop_ends_has_its_client_closed(
    openai_server: OpenAIServer,
) -> None:
    """An adapter built inside the coroutine (a judge made for one call) is gone before ``run``
    closes the loop's clients: its client is closed all the same."""
    clients: list[Any] = []

    async def main() -> str:
        adapter = OpenAIAdapter("m", base_url=openai_server.base_url, api_key="sk-test")
        text = (await adapter.acomplete("hi", RunConfig())).text
        clients.append(adapter._clients.async_())
        return text  # the adapter is dropped here, before the loop ends

    gc.collect()  # earlier tests' garbage is theirs, not this test's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert run(main()) == "echo: hi"
        assert clients[0].is_closed()
        clients.clear()
        gc.collect()
    assert _unclosed(caught) == []


def test_a_dropped_adapter_closes_its_sync_client(openai_server: OpenAIServer) -> None:
    """Collected without ``close()``, even as garbage in a reference cycle (where the SDK client's
    own ``__del__`` may run after its sockets), the adapter's sync client is closed."""
    adapter = OpenAIAdapter("m", base_url=openai_server.base_url, api_key="sk-test")
    assert adapter.complete("hi", RunConfig()).text == "echo: hi"
    client = adapter._clients.sync()
    adapter.cycle = adapter  # type: ignore[attr-defined]
    gc.collect()  # earlier tests' garbage is theirs, not this test's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        del adapter
        gc.collect()
        assert client.is_closed()
        del client
        gc.collect()
    assert _unclosed(caught) == []


def test_close_closes_the_sync_client_once_and_a_later_call_opens_a_new_one(
    openai_server: OpenAIServer,
) -> None:
    adapter = OpenAIAdapter("m", base_url=openai_server.base_url, api_key="sk-test")
    adapter.complete("hi", RunConfig())
    first = adapter._clients.sync()
    adapter.close()
    adapter.close()
    assert first.is_closed()
    assert adapter.complete("again", RunConfig()).text == "echo: again"
    assert adapter._clients.sync() is not first and not adapter._clients.sync().is_closed()
    adapter.close()
