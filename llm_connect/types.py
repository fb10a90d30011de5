"""Value types shared by adapters, judges and the ledger.

* :class:`LLMResponse` — what one model call returned (text, usage, cost, latency).
* :class:`RunConfig` — how a prompt is run (temperature, max tokens, system prompt,
  extra model parameters, timeout, optional budget).
* :class:`BudgetTracker` — a thread-safe spend limit shared by many calls.
* :class:`Conversation` — a chat history with tools; a :data:`Prompt` is a string or one.

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
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from llm_connect._conversation import Conversation, ConversationError, Prompt, prompt_text
from llm_connect._secrets import SECRET_KEY_MARKERS, is_secret_key, redact_request
from llm_connect.errors import BudgetExceededError, ConfigurationError

__all__ = [
    "SECRET_KEY_MARKERS",
    "BudgetTracker",
    "Conversation",
    "ConversationError",
    "LLMResponse",
    "Prompt",
    "Reservation",
    "RunConfig",
    "ToolCall",
    "Usage",
    "prompt_text",
    "redact_secrets",
    "utcnow",
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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """From ``{"name", "arguments"}`` or the OpenAI form ``{"function": {"name", "arguments"}}``.

        ``arguments`` may be given as a JSON object; it is stored as its JSON text.

        Raises:
            ConfigurationError: no name, or arguments that are neither text nor an object.
        """
        if not isinstance(data, Mapping):
            raise ConfigurationError(f"a tool call must be an object, not {type(data).__name__}")
        body = data.get("function", data)
        if not isinstance(body, Mapping) or not isinstance(body.get("name"), str) or not body["name"]:
            raise ConfigurationError("a tool call needs a non-empty 'name'")
        arguments = body.get("arguments", "")
        if isinstance(arguments, Mapping):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            raise ConfigurationError(
                f"tool call {body['name']!r}: 'arguments' must be JSON text or an object, "
                f"not {type(arguments).__name__}"
            )
        return cls(body["name"], arguments)

    def to_dict(self) -> dict[str, str]:
        """``{"name", "arguments"}`` (the form :meth:`from_dict`, the ledger and reports use)."""
        return {"name": self.name, "arguments": self.arguments}

    def parsed_arguments(self) -> Any:
        """The arguments parsed as JSON (an empty text is ``{}``).

        Raises:
            ValueError: the model's arguments are not valid JSON.
        """
        return json.loads(self.arguments) if self.arguments.strip() else {}


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
    the one the server reports. Kept only when it differs from :attr:`model`
    (equal names are stored as ``None``), so equality does not depend on who filled it."""
    endpoint: str | None = None
    """The server that answered: its base URL without credentials or query (``None`` offline)."""
    system_fingerprint: str | None = None
    """The server's ``system_fingerprint`` (its backend configuration), when it sent one: a
    change under one model name says the model behind the name changed (issue 37)."""

    def __post_init__(self) -> None:
        if self.requested_model is not None and self.requested_model == self.model:
            object.__setattr__(self, "requested_model", None)

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
            "tool_calls": [t.to_dict() for t in self.tool_calls],
            "finish_reason": self.finish_reason,
            "requested_model": self.requested_model,
            "endpoint": self.endpoint,
            "system_fingerprint": self.system_fingerprint,
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
            tool_calls=tuple(ToolCall.from_dict(t) for t in data.get("tool_calls") or ()),
            finish_reason=data.get("finish_reason"),
            requested_model=data.get("requested_model"),
            endpoint=data.get("endpoint"),
            system_fingerprint=data.get("system_fingerprint"),
        )


class Reservation:
    """Budget held for one call in flight, from :meth:`BudgetTracker.reserve` until the
    call is over.

    Close it exactly once: :meth:`BudgetTracker.settle` when the call answered (its
    real cost replaces the estimate), :meth:`BudgetTracker.release` when it failed
    or was cancelled (nothing is spent). As a context manager it is released on
    leaving the block unless it was settled inside it.
    """

    __slots__ = ("_open", "_tracker", "tokens", "usd")

    def __init__(self, tracker: BudgetTracker, usd: float, tokens: int) -> None:
        self._tracker = tracker
        self._open = True
        self.usd = usd
        """Dollars held (the call's estimated cost)."""
        self.tokens = tokens
        """Tokens held (the call's estimated prompt plus completion tokens)."""

    @property
    def open(self) -> bool:
        """Whether the budget is still held (neither settled nor released)."""
        return self._open

    def settle(self, response: LLMResponse) -> None:
        """:meth:`BudgetTracker.settle` this reservation with ``response``."""
        self._tracker.settle(self, response)

    def release(self) -> None:
        """:meth:`BudgetTracker.release` this reservation (a no-op once closed)."""
        self._tracker.release(self)

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._tracker.release(self)

    def __repr__(self) -> str:
        state = "open" if self._open else "closed"
        return f"Reservation(usd={self.usd!r}, tokens={self.tokens!r}, {state})"


class BudgetTracker:
    """A spend limit shared by many calls, safe across threads and asyncio tasks.

    Adapters :meth:`reserve` a call's estimated cost before sending it and
    :meth:`settle` the reservation with the response (or :meth:`release` it when
    the call fails). A reservation is granted while the dollars spent plus the
    dollars held by calls in flight are below ``max_usd``, and likewise for
    tokens and ``max_tokens``; otherwise :meth:`reserve` raises
    :class:`~llm_connect.errors.BudgetExceededError` and no call goes out.

    So the last call granted may pass the limit, but only by its own estimate:
    *spend never exceeds the limit by more than one call's estimate*, however
    many calls are in flight at once (as long as each call's cost is within its
    estimate). A single call whose estimate alone exceeds the limit is granted
    when nothing has been spent or held yet, so a small budget still lets one
    call through, as :meth:`check` always did. ``None`` means no limit.

    Third-party adapters may still call :meth:`check` before a call and
    :meth:`charge` after it; :meth:`check` counts reservations in flight too, but
    calls made that way hold nothing while in flight, so each of them can add
    to the overshoot.
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
        self._reserved_usd = 0.0
        self._reserved_tokens = 0
        self._in_flight = 0

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
        """Responses charged (or settled) so far."""
        with self._lock:
            return self._calls

    @property
    def reserved_usd(self) -> float:
        """Dollars held by open reservations (calls in flight)."""
        with self._lock:
            return self._reserved_usd

    @property
    def reserved_tokens(self) -> int:
        """Tokens held by open reservations (calls in flight)."""
        with self._lock:
            return self._reserved_tokens

    @property
    def in_flight(self) -> int:
        """Open reservations."""
        with self._lock:
            return self._in_flight

    def _exhausted(self) -> str | None:
        held = f" held by {self._in_flight} call(s) in flight" if self._in_flight else ""
        if self.max_usd is not None and self._spent_usd + self._reserved_usd >= self.max_usd:
            extra = f" + ${self._reserved_usd:.6f}{held}" if held else ""
            return f"spent ${self._spent_usd:.6f}{extra} of a ${self.max_usd:.6f} budget"
        if self.max_tokens is not None and self._spent_tokens + self._reserved_tokens >= self.max_tokens:
            extra = f" + {self._reserved_tokens}{held}" if held else ""
            return f"spent {self._spent_tokens}{extra} of a {self.max_tokens}-token budget"
        return None

    @staticmethod
    def _refusal(reason: str) -> BudgetExceededError:
        return BudgetExceededError(f"budget exhausted: {reason}; no further calls are made")

    def check(self) -> None:
        """Raise :class:`BudgetExceededError` if no budget is left for another call
        (spend plus what calls in flight hold has reached a limit)."""
        with self._lock:
            reason = self._exhausted()
        if reason is not None:
            raise self._refusal(reason)

    def charge(self, response: LLMResponse) -> None:
        """Add a response's cost and tokens to the spend (the :meth:`check` protocol)."""
        with self._lock:
            self._calls += 1
            if response.cost_usd is not None:
                self._spent_usd += response.cost_usd
            if response.usage is not None:
                self._spent_tokens += response.usage.total_tokens

    def reserve(self, *, usd: float = 0.0, tokens: int = 0) -> Reservation:
        """Hold ``usd`` dollars and ``tokens`` tokens for a call about to be sent.

        Granted while spend plus the holdings of calls in flight are below each
        limit (this call's own estimate is not counted: see the class docstring).

        Raises:
            BudgetExceededError: no budget left; the call must not be made.
            ConfigurationError: a negative or non-finite estimate.
        """
        if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not 0 <= usd < math.inf:
            raise ConfigurationError(f"reserve usd must be a finite number >= 0, not {usd!r}")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise ConfigurationError(f"reserve tokens must be an integer >= 0, not {tokens!r}")
        with self._lock:
            reason = self._exhausted()
            if reason is None:
                self._reserved_usd += float(usd)
                self._reserved_tokens += tokens
                self._in_flight += 1
                return Reservation(self, float(usd), tokens)
        raise self._refusal(reason)

    def _close(self, reservation: Reservation) -> None:
        """Drop an open reservation's holdings (under the lock)."""
        self._in_flight -= 1
        if self._in_flight == 0:  # no float residue once nothing is in flight
            self._reserved_usd, self._reserved_tokens = 0.0, 0
        else:
            self._reserved_usd -= reservation.usd
            self._reserved_tokens -= reservation.tokens
        reservation._open = False

    def _own(self, reservation: Reservation) -> None:
        if not isinstance(reservation, Reservation) or reservation._tracker is not self:
            raise ConfigurationError(f"{reservation!r} was not made by this budget tracker")

    def settle(self, reservation: Reservation, response: LLMResponse) -> None:
        """The call answered: its cost and tokens replace the reservation's estimate.

        What the response does not report (no usage, or no cost) is charged at the
        estimate instead, so a server that omits usage cannot spend for free.

        Raises:
            ConfigurationError: the reservation is closed already or not this tracker's.
        """
        self._own(reservation)
        with self._lock:
            if not reservation._open:
                raise ConfigurationError(f"{reservation!r} is already settled or released")
            self._close(reservation)
            self._calls += 1
            self._spent_usd += reservation.usd if response.cost_usd is None else response.cost_usd
            self._spent_tokens += (
                reservation.tokens if response.usage is None else response.usage.total_tokens
            )

    def release(self, reservation: Reservation) -> None:
        """The call failed or was cancelled: nothing is spent, the holding is freed.

        Releasing a reservation that is already closed does nothing.

        Raises:
            ConfigurationError: the reservation is not this tracker's.
        """
        self._own(reservation)
        with self._lock:
            if reservation._open:
                self._close(reservation)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle/deep-copy state: limits and spend (a copy is an independent tracker).

        Reservations of calls in flight stay with the original: a copy holds none.
        """
        with self._lock:
            state = {k: v for k, v in self.__dict__.items() if k != "_lock"}
        state.update(_reserved_usd=0.0, _reserved_tokens=0, _in_flight=0)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(_reserved_usd=0.0, _reserved_tokens=0, _in_flight=0)  # older pickles
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        with self._lock:
            held = (
                f", reserved_usd={self._reserved_usd!r}, reserved_tokens={self._reserved_tokens!r}"
                if self._in_flight
                else ""
            )
            return (
                f"BudgetTracker(max_usd={self.max_usd!r}, max_tokens={self.max_tokens!r}, "
                f"spent_usd={self._spent_usd!r}, spent_tokens={self._spent_tokens!r}{held})"
            )


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


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
            isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1
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
