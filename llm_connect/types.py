"""Value types shared by adapters, judges and the ledger.

* :class:`LLMResponse` — what one model call returned (text, usage, cost, latency).
* :class:`RunConfig` — how a prompt is run (temperature, max tokens, system prompt,
  extra model parameters, timeout, optional budget).
* :class:`BudgetTracker` — a thread-safe spend limit shared by many calls.

All of them are plain frozen dataclasses with ``to_dict``/``from_dict`` so they
round-trip through JSON (the ledger, the response cache, recorded suites).
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from llm_connect._secrets import SECRET_KEY_MARKERS, is_secret_key, redact_request
from llm_connect.errors import BudgetExceededError, ConfigurationError

__all__ = [
    "SECRET_KEY_MARKERS",
    "BudgetTracker",
    "LLMResponse",
    "RunConfig",
    "ToolCall",
    "Usage",
    "redact_secrets",
]

def _is_secret_key(key: str) -> bool:
    """Whether a request parameter or header ``key`` names a secret (see ``_secrets.is_secret_key``)."""
    return is_secret_key(key)


def redact_secrets(value: Any) -> Any:
    """Return ``value`` without secret-named entries and with credential-looking strings masked.

    For request-side data (model parameters, extra headers and query parameters,
    run options): :func:`llm_connect._secrets.redact_request`. Works recursively
    through mappings and lists. Judge details are not request data: mask them with
    :func:`llm_connect._secrets.mask_value`, which drops no key.
    """
    return redact_request(value)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts reported by the provider for one call."""

    prompt_tokens: int = 0
    """Tokens in the request (system prompt plus user prompt)."""
    completion_tokens: int = 0
    """Tokens the model generated."""

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool (function) call requested by the model."""

    name: str
    """The tool's name."""
    arguments: str
    """The call's arguments as the JSON text the model produced (not parsed)."""


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """What one model call returned. Immutable; judges never modify it."""

    text: str
    """The completion text (empty when the model only called tools)."""
    model: str
    """The model name as the server reported it (e.g. the dated snapshot ``gpt-4o-mini-2024-07-18``)."""
    provider: str
    """The provider or adapter family (``openai``, ``recorded``)."""
    latency_ms: float | None = None
    """Wall time of the call in milliseconds, when measured."""
    usage: Usage | None = None
    """Token counts, when the provider reported them."""
    cost_usd: float | None = None
    """Cost of the call in US dollars, when pricing is known."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls the model requested, in order."""
    finish_reason: str | None = None
    """Why generation stopped (``stop``, ``length``, ``tool_calls``), when reported."""
    requested_model: str | None = None
    """The model name that was asked for (the adapter's model); ``None`` means :attr:`model`.

    Grades, resume, routing and the ledger's summaries key on this name, never on
    the one the server reports."""
    endpoint: str | None = None
    """The server that answered: its base URL without credentials or query (``None`` offline)."""

    @property
    def asked_model(self) -> str:
        """:attr:`requested_model` when known, else :attr:`model`."""
        return self.requested_model or self.model

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict; :meth:`from_dict` reverses it."""
        return {
            "text": self.text,
            "model": self.model,
            "provider": self.provider,
            "latency_ms": self.latency_ms,
            "usage": None
            if self.usage is None
            else {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
            },
            "cost_usd": self.cost_usd,
            "tool_calls": [{"name": t.name, "arguments": t.arguments} for t in self.tool_calls],
            "finish_reason": self.finish_reason,
            "requested_model": self.requested_model,
            "endpoint": self.endpoint,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LLMResponse:
        """Rebuild a response from :meth:`to_dict` output."""
        usage = data.get("usage")
        return cls(
            text=data["text"],
            model=data["model"],
            provider=data["provider"],
            latency_ms=data.get("latency_ms"),
            usage=None
            if usage is None
            else Usage(int(usage["prompt_tokens"]), int(usage["completion_tokens"])),
            cost_usd=data.get("cost_usd"),
            tool_calls=tuple(
                ToolCall(t["name"], t["arguments"]) for t in data.get("tool_calls") or ()
            ),
            finish_reason=data.get("finish_reason"),
            requested_model=data.get("requested_model"),
            endpoint=data.get("endpoint"),
        )


class BudgetTracker:
    """A spend limit shared by many calls, safe across threads and asyncio tasks.

    Adapters call :meth:`check` before a call and :meth:`charge` after it. Once
    the spent dollars reach ``max_usd`` or the spent tokens reach ``max_tokens``,
    :meth:`check` raises :class:`~llm_connect.errors.BudgetExceededError`
    instead of letting another call go out. ``None`` means no limit.
    """

    def __init__(self, max_usd: float | None = None, max_tokens: int | None = None) -> None:
        for name, value in (("max_usd", max_usd), ("max_tokens", max_tokens)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0
            ):
                raise ConfigurationError(f"BudgetTracker {name} must be a number >= 0, not {value!r}")
        self.max_usd = max_usd
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self._spent_usd = 0.0
        self._spent_tokens = 0
        self._calls = 0

    @property
    def spent_usd(self) -> float:
        """Dollars charged so far."""
        with self._lock:
            return self._spent_usd

    @property
    def spent_tokens(self) -> int:
        """Tokens charged so far."""
        with self._lock:
            return self._spent_tokens

    @property
    def calls(self) -> int:
        """Responses charged so far."""
        with self._lock:
            return self._calls

    def _exhausted(self) -> str | None:
        if self.max_usd is not None and self._spent_usd >= self.max_usd:
            return f"spent ${self._spent_usd:.6f} of a ${self.max_usd:.6f} budget"
        if self.max_tokens is not None and self._spent_tokens >= self.max_tokens:
            return f"spent {self._spent_tokens} of a {self.max_tokens}-token budget"
        return None

    def check(self) -> None:
        """Raise :class:`BudgetExceededError` if no budget is left for another call."""
        with self._lock:
            reason = self._exhausted()
        if reason is not None:
            raise BudgetExceededError(f"budget exhausted: {reason}; no further calls are made")

    def charge(self, response: LLMResponse) -> None:
        """Add a response's cost and tokens to the spend."""
        with self._lock:
            self._calls += 1
            if response.cost_usd is not None:
                self._spent_usd += response.cost_usd
            if response.usage is not None:
                self._spent_tokens += response.usage.total_tokens

    def __getstate__(self) -> dict[str, Any]:
        """Pickle/deep-copy state: limits and spend (a copy is an independent tracker)."""
        with self._lock:
            return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"BudgetTracker(max_usd={self.max_usd!r}, max_tokens={self.max_tokens!r}, "
            f"spent_usd={self.spent_usd!r}, spent_tokens={self.spent_tokens!r})"
        )


def _freeze(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class RunConfig:
    """How a prompt is run. Baseline and candidate always get the same one.

    ``model_params`` holds extra request parameters sent as they are (``seed``,
    ``top_p``, ``stop``...). Entries whose names denote secrets (``api_key``,
    ``authorization``...) are sent but never serialised. The budget tracker is
    runtime state: it is excluded from equality and from :meth:`to_dict`.
    """

    temperature: float | None = None
    """Sampling temperature; ``None`` leaves the provider's default."""
    max_tokens: int | None = None
    """Upper bound on generated tokens; ``None`` leaves the provider's default."""
    system_prompt: str | None = None
    """System message sent before the prompt, when given."""
    model_params: Mapping[str, Any] = field(default_factory=dict)
    """Extra request parameters, sent verbatim (read-only after construction)."""
    timeout_s: float | None = None
    """Per-call timeout in seconds; ``None`` uses the adapter's default."""
    budget_tracker: BudgetTracker | None = field(default=None, compare=False, repr=False)
    """Optional shared spend limit charged by every call made with this config."""

    def __post_init__(self) -> None:
        if self.temperature is not None and (
            isinstance(self.temperature, bool)
            or not isinstance(self.temperature, (int, float))
            or not math.isfinite(self.temperature)
            or self.temperature < 0
        ):
            raise ConfigurationError(f"RunConfig temperature must be >= 0, not {self.temperature!r}")
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool)
            or not isinstance(self.max_tokens, int)
            or self.max_tokens < 1
        ):
            raise ConfigurationError(f"RunConfig max_tokens must be an int >= 1, not {self.max_tokens!r}")
        if self.timeout_s is not None and (
            isinstance(self.timeout_s, bool)
            or not isinstance(self.timeout_s, (int, float))
            or not self.timeout_s > 0
        ):
            raise ConfigurationError(f"RunConfig timeout_s must be > 0, not {self.timeout_s!r}")
        if not isinstance(self.model_params, Mapping):
            raise ConfigurationError("RunConfig model_params must be a mapping")
        object.__setattr__(self, "model_params", _freeze(self.model_params))

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt through __init__ (model_params is a read-only view, which pickle and
        # copy.deepcopy cannot copy as it is); a deep copy also copies the budget tracker.
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["model_params"] = dict(self.model_params)
        return (type(self), tuple(values.values()))

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes`` applied (the budget tracker is kept unless replaced)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form without the budget tracker and without secrets."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "system_prompt": self.system_prompt,
            "model_params": redact_secrets(self.model_params),
            "timeout_s": self.timeout_s,
        }

    def to_json(self) -> str:
        """Canonical JSON of :meth:`to_dict` (sorted keys), stable for cache keys."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), default=str)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """Rebuild a config from :meth:`to_dict` output (no tracker)."""
        known = {"temperature", "max_tokens", "system_prompt", "model_params", "timeout_s"}
        unknown = set(data) - known
        if unknown:
            raise ConfigurationError(f"RunConfig has no field(s) {sorted(unknown)}")
        return cls(
            temperature=data.get("temperature"),
            max_tokens=data.get("max_tokens"),
            system_prompt=data.get("system_prompt"),
            model_params=data.get("model_params") or {},
            timeout_s=data.get("timeout_s"),
        )
