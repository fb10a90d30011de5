"""Where a batch run's responses come from: live adapters or a suite's recordings."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llm_connect.errors import ConfigurationError
from llm_connect.grading._protocols import Case
from llm_connect.grading._suite import Suite
from llm_connect.types import LLMResponse

if TYPE_CHECKING:
    from llm_connect.adapters import LLMAdapter

__all__ = ["RECORDED_PREFIX", "LiveSide", "RecordedSide", "Side", "side_from_spec"]

RECORDED_PREFIX = "recorded:"


class Side:
    """Where one side's responses come from (a live adapter or a suite's recordings)."""

    spec: str
    """The spec as the user gave it (``openai:gpt-4o-mini``, ``recorded:gold``)."""
    adapter_id: str
    """Stored with every grade; live sides also key the response cache on it."""
    live: bool = False

    def expected_model(self, case: Case) -> str:  # pragma: no cover - abstract
        """The model name this side's response for ``case`` is expected to carry."""
        raise NotImplementedError


class LiveSide(Side):
    """A side answered by a (usually remote) :class:`~llm_connect.adapters.LLMAdapter`."""

    live = True

    def __init__(self, spec: str, adapter: LLMAdapter) -> None:
        self.spec = spec
        self.adapter = adapter
        self.adapter_id = adapter.adapter_id
        _, _, model = adapter.adapter_id.partition(":")
        self._model = str(getattr(adapter, "model", None) or model or adapter.adapter_id)

    def __repr__(self) -> str:
        return f"LiveSide({self.spec!r})"

    def expected_model(self, case: Case) -> str:
        """The model the adapter asks for (the server may report a more precise name)."""
        return self._model


class RecordedSide(Side):
    """A side whose responses are recorded in the suite (``recorded:NAME``), per case.

    Responses are looked up by case id, never by prompt, so two cases that
    share a prompt keep their own recordings.
    """

    def __init__(self, name: str, suite: Suite) -> None:
        self.spec = RECORDED_PREFIX + name
        self.name = name
        self.adapter_id = self.spec
        self.suite = suite
        suite.check_recorded(name)  # SuiteError naming the first case without it

    def __repr__(self) -> str:
        return f"RecordedSide({self.name!r})"

    def response(self, case: Case) -> LLMResponse:
        """The recorded response of ``case``."""
        return self.suite.recorded(case, self.name)

    def expected_model(self, case: Case) -> str:
        return self.response(case).model


def side_from_spec(
    spec: str, suite: Suite, *, make_adapter: Callable[[str], LLMAdapter] | None = None
) -> Side:
    """The side named by ``spec``: ``recorded:NAME`` reads the suite, anything else is live.

    Live specs go through ``make_adapter`` (default
    :func:`~llm_connect.adapters.adapter_from_spec`). Raises
    :class:`~llm_connect.errors.SuiteError` when a case lacks the recording and
    :class:`~llm_connect.errors.ConfigurationError` for a bad spec.
    """
    if spec.startswith(RECORDED_PREFIX):
        name = spec[len(RECORDED_PREFIX) :]
        if not name:
            raise ConfigurationError(f"adapter spec {spec!r} names no recording (recorded:NAME)")
        return RecordedSide(name, suite)
    if make_adapter is None:
        from llm_connect.adapters import adapter_from_spec

        make_adapter = adapter_from_spec
    return LiveSide(spec, make_adapter(spec))
