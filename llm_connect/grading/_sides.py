"""Where a batch run's responses come from: live adapters or a suite's recordings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
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
    model: str
    """The model as it is asked for (``gpt-4o-mini`` for ``openai:gpt-4o-mini``, the name of a
    recording): grades, resume and routing key on it, whatever name the server reports."""
    endpoint: str | None = None
    """The server this side calls (base URL without credentials); ``None`` for recordings."""
    live: bool = False

    def expected_model(self, case: Case) -> str:
        """The model name this side's grades are stored under (:attr:`model`)."""
        return self.model

    def as_asked(self, response: LLMResponse) -> LLMResponse:
        """``response`` naming this side's requested model and endpoint (kept when already set)."""
        if response.asked_model == self.model and (response.endpoint or None) == self.endpoint:
            return response
        return replace(response, requested_model=self.model, endpoint=response.endpoint or self.endpoint)


class LiveSide(Side):
    """A side answered by a (usually remote) :class:`~llm_connect.adapters.LLMAdapter`."""

    live = True

    def __init__(self, spec: str, adapter: LLMAdapter) -> None:
        self.spec = spec
        self.adapter = adapter
        self.adapter_id = adapter.adapter_id
        _, _, model = adapter.adapter_id.partition(":")
        self.model = str(getattr(adapter, "model", None) or model or adapter.adapter_id)
        endpoint = getattr(adapter, "endpoint", None)
        self.endpoint = endpoint if isinstance(endpoint, str) and endpoint else None

    def __repr__(self) -> str:
        return f"LiveSide({self.spec!r})"


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
        # A recording names the model that answered (``"model"``, else the recording's name):
        # grades are stored under it, case by case; ``model`` is the usual one.
        models = Counter(suite.recorded(case, name).model for case in suite.cases)
        self.model = models.most_common(1)[0][0] if models else name

    def __repr__(self) -> str:
        return f"RecordedSide({self.name!r})"

    def response(self, case: Case) -> LLMResponse:
        """The recorded response of ``case``."""
        return self.suite.recorded(case, self.name)

    def expected_model(self, case: Case) -> str:
        """The model the recording of ``case`` names."""
        return self.response(case).asked_model


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
