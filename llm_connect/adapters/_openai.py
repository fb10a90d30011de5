"""OpenAI adapters: chat completions and embeddings through the official ``openai`` SDK.

Any OpenAI-compatible server works (vLLM, llama.cpp, Ollama, LiteLLM proxy...):
give its ``base_url``. The SDK is imported when an adapter is built, never when
:mod:`llm_connect` is imported.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from llm_connect._conversation import Conversation, Prompt
from llm_connect._secrets import get_logger, secret_values
from llm_connect.adapters._activity import model_call
from llm_connect.adapters._errors import ResponseInfo, sdk_errors
from llm_connect.adapters._loop import register
from llm_connect.errors import ConfigurationError, MalformedResponseError
from llm_connect.types import LLMResponse, RunConfig, ToolCall, Usage

if TYPE_CHECKING:
    import openai

    from llm_connect.types import Reservation

__all__ = ["PLACEHOLDER_API_KEY", "OpenAIAdapter", "OpenAIEmbeddingAdapter", "cost_usd", "resolve_pricing"]

_log = get_logger("llm_connect.adapters.openai")  # masks credentials in every record

#: Sent as the API key to loopback servers when no key is configured anywhere.
PLACEHOLDER_API_KEY = "sk-no-key-required"


#: The SDK's server when no ``base_url`` is given.
DEFAULT_BASE_URL = "https://api.openai.com/v1"


def public_endpoint(base_url: str | None) -> str:
    """``base_url`` as it may be stored and shown: scheme, host, port and path only.

    User info (``https://user:key@host``), the query string (``?api-key=...``) and
    the fragment are dropped; a trailing slash is removed. ``None`` is the SDK's
    default server.
    """
    parts = urlsplit(base_url or DEFAULT_BASE_URL)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return f"{parts.scheme}://{netloc}{parts.path}".rstrip("/")


def _is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1", "0.0.0.0") or host.startswith("127.")


def _resolve_endpoint(base_url: str | None, api_key: str | None, what: str) -> tuple[str | None, str]:
    """``(base_url, api_key)`` from the arguments, else ``OPENAI_BASE_URL``/``OPENAI_API_KEY``."""
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if api_key is None:
        if base_url is not None and _is_loopback(base_url):
            api_key = PLACEHOLDER_API_KEY
        else:
            raise ConfigurationError(
                f"{what}: no API key; pass api_key=... or set OPENAI_API_KEY "
                "(a loopback base_url such as http://127.0.0.1:8000/v1 needs none)"
            )
    return base_url, api_key


def _price(value: Any, where: str) -> tuple[float, float]:
    if not isinstance(value, Mapping) or set(value) != {"input", "output"}:
        raise ConfigurationError(
            f"pricing for {where} must be a mapping with exactly the keys 'input' and 'output' "
            f"(USD per 1M tokens), not {value!r}"
        )
    prices = []
    for key in ("input", "output"):
        price = value[key]
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not price >= 0:
            raise ConfigurationError(f"pricing[{where!r}][{key!r}] must be a number >= 0, not {price!r}")
        prices.append(float(price))
    return prices[0], prices[1]


def resolve_pricing(pricing: Mapping[str, Any] | None, model: str) -> dict[str, tuple[float, float]]:
    """Validate ``pricing`` and return ``{model: (input, output)}`` in USD per 1M tokens.

    ``pricing`` is either ``{"input": X, "output": Y}`` (prices of ``model``) or a
    mapping ``model -> {"input": X, "output": Y}``.
    """
    if pricing is None:
        return {}
    if not isinstance(pricing, Mapping):
        raise ConfigurationError(f"pricing must be a mapping, not {type(pricing).__name__}")
    if "input" in pricing or "output" in pricing:
        return {model: _price(pricing, model)}
    return {str(name): _price(value, str(name)) for name, value in pricing.items()}


def cost_usd(
    prices: Mapping[str, tuple[float, float]], models: Sequence[str], usage: Usage | None
) -> float | None:
    """Cost of ``usage`` at the first of ``models`` that has a price, else ``None``."""
    if usage is None:
        return None
    for model in models:
        if model in prices:
            per_in, per_out = prices[model]
            return (usage.prompt_tokens * per_in + usage.completion_tokens * per_out) / 1_000_000
    return None


_SDK_OPTIONS = ("extra_headers", "extra_query", "extra_body")
"""``model_params`` entries passed to the SDK as its own request options, not as body fields."""


def _request_option(value: Any, name: str, adapter_id: str) -> dict[str, Any]:
    """``model_params[name]`` for an SDK request option: a mapping with string keys (``{}`` if unset)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{adapter_id}: model_params[{name!r}] must be a mapping, not {type(value).__name__}"
        )
    return {str(k): v for k, v in value.items()}


def _malformed(message: str, adapter_id: str, info: ResponseInfo) -> MalformedResponseError:
    return MalformedResponseError(
        message, adapter_id=adapter_id, status_code=info.status_code, request_id=info.request_id
    )


def _parse(raw: Any, adapter_id: str, info: ResponseInfo) -> Any:
    """``raw.parse()``; a body the SDK cannot parse is a :class:`MalformedResponseError`."""
    try:
        return raw.parse()
    except (ValueError, TypeError, AttributeError) as exc:
        raise MalformedResponseError(
            f"{adapter_id}: the response body could not be parsed: {exc}",
            adapter_id=adapter_id,
            status_code=info.status_code,
            request_id=info.request_id,
        ) from exc


class _Clients:
    """The SDK clients of one adapter: one sync client, one async client per event loop.

    An ``httpx`` async connection pool belongs to the loop that opened it, so a
    process that calls ``asyncio.run`` several times gets a client per loop.
    """

    def __init__(self, *, base_url: str | None, api_key: str, client: Any, max_retries: int) -> None:
        import openai

        self._lock = threading.Lock()
        self._sync: openai.OpenAI | None = None
        self._async_given: openai.AsyncOpenAI | None = None
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )
        self._closer: weakref.finalize[Any, Any] | None = None
        if isinstance(client, openai.AsyncOpenAI):
            self._async_given = client
        elif isinstance(client, openai.OpenAI):
            self._sync = client
        elif client is not None:
            raise ConfigurationError(
                f"client must be an openai.OpenAI or openai.AsyncOpenAI, not {type(client).__name__}"
            )
        if client is not None:
            base_url, api_key = str(client.base_url), client.api_key
            max_retries = client.max_retries
        self.base_url = base_url
        self.api_key = api_key
        self.max_retries = max_retries

    def sync(self) -> openai.OpenAI:
        if self._sync is None:
            import openai

            with self._lock:
                if self._sync is None:
                    self._sync = openai.OpenAI(
                        base_url=self.base_url, api_key=self.api_key, max_retries=self.max_retries
                    )
                    # Closed when this holder is collected, too: in a reference cycle the SDK
                    # client's own __del__ may run after its sockets were finalized unclosed.
                    self._closer = weakref.finalize(self, self._sync.close)
        return self._sync

    def async_(self) -> openai.AsyncOpenAI:
        if self._async_given is not None:
            return self._async_given
        loop = asyncio.get_running_loop()
        client = self._async.get(loop)
        if client is None:
            import openai

            with self._lock:
                client = self._async.get(loop)
                if client is None:
                    client = openai.AsyncOpenAI(
                        base_url=self.base_url, api_key=self.api_key, max_retries=self.max_retries
                    )
                    self._async[loop] = client
                    register(self, loop)
        return client

    async def aclose_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close the async client this holder opened on ``loop`` (not one it was given)."""
        with self._lock:
            client = self._async.pop(loop, None)
        if client is not None:
            await client.close()

    def close(self) -> None:
        if self._closer is not None:  # the sync client this holder created
            self._closer()
            self._closer = None
            self._sync = None


class OpenAIAdapter:
    """Chat completions through the official ``openai`` SDK (adapter id ``openai:MODEL``).

    Sends the prompt as the user message (after a system message when the run
    config has a system prompt), or a :class:`~llm_connect.types.Conversation`'s
    messages with its ``tools`` and ``tool_choice`` (the run config's system
    prompt goes first unless the conversation has its own), ``temperature``, ``max_tokens``, the per-call
    ``timeout_s`` and every ``model_params`` entry verbatim (``seed``,
    ``top_p``, ``tools``, ``response_format``, ``max_completion_tokens``...).
    Records latency, usage, cost (when ``pricing`` knows the model), tool calls
    and the finish reason. A run config's budget tracker reserves the call's
    :meth:`estimate` before it and is settled with the response after it.

    Args:
        model: the model name sent to the server.
        base_url: the server (default ``OPENAI_BASE_URL``, else api.openai.com).
        api_key: default ``OPENAI_API_KEY``; a loopback ``base_url`` needs none.
        client: an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` to use (its base URL
            and key are reused for the other flavour).
        pricing: ``{"input": X, "output": Y}`` or ``{model: {"input": X, "output": Y}}``,
            USD per 1M tokens.
        max_retries: SDK-level retries; 0 by default because the batch engine
            owns retries.

    Raises:
        ConfigurationError: no API key for a non-loopback server, or bad pricing.
    """

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        pricing: Mapping[str, Any] | None = None,
        max_retries: int = 0,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"OpenAIAdapter model must be a non-empty string, not {model!r}")
        self.model = model
        self.adapter_id = f"openai:{model}"
        self._prices = resolve_pricing(pricing, model)
        if client is None:
            base_url, api_key = _resolve_endpoint(base_url, api_key, self.adapter_id)
        self._clients = _Clients(
            base_url=base_url, api_key=api_key or "", client=client, max_retries=max_retries
        )
        self.endpoint = public_endpoint(self._clients.base_url)
        """The server without credentials (stored with every response, part of cache keys)."""

    @property
    def base_url(self) -> str | None:
        """The server this adapter calls (``None``: the SDK default)."""
        return self._clients.base_url

    def __repr__(self) -> str:
        return f"OpenAIAdapter({self.model!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the HTTP connections of the sync client this adapter created."""
        self._clients.close()

    async def aclose(self) -> None:
        """Close the async client this adapter opened on the running event loop (call it before
        your own loop ends, as with ``openai.AsyncOpenAI.close``); a later call opens a new one.
        Loops the library starts itself (``BatchGrader.run``, ``grade``) are closed for you."""
        await self._clients.aclose_loop(asyncio.get_running_loop())

    # -- request / response ---------------------------------------------------

    def _request(self, prompt: Prompt, run_config: RunConfig) -> dict[str, Any]:
        """The SDK keyword arguments of one chat-completion call.

        ``model_params`` entries go into the JSON body verbatim, except the SDK's
        own request options, which are passed as the SDK means them:
        ``extra_headers`` (HTTP headers), ``extra_query`` (URL query parameters) and
        ``extra_body`` (merged into the body; its entries win over same-named ones).

        Raises:
            ConfigurationError: one of them is not a mapping, or a header value is not text.
        """
        kwargs: dict[str, Any] = {"model": self.model}
        if isinstance(prompt, Conversation):
            kwargs["messages"] = prompt.openai_messages(run_config.system_prompt)
            given = [k for k in ("tools", "tool_choice", "functions") if k in run_config.model_params]
            if given and (prompt.tools or prompt.tool_choice is not None):
                raise ConfigurationError(
                    f"{self.adapter_id}: the conversation gives tools and model_params[{given[0]!r}] too; "
                    "give them in one place"
                )
            if prompt.tools:
                kwargs["tools"] = prompt.tools
            if prompt.tool_choice is not None:
                kwargs["tool_choice"] = prompt.tool_choice
        else:
            messages: list[dict[str, Any]] = []
            if run_config.system_prompt is not None:
                messages.append({"role": "system", "content": run_config.system_prompt})
            messages.append({"role": "user", "content": prompt})
            kwargs["messages"] = messages
        if run_config.temperature is not None:
            kwargs["temperature"] = run_config.temperature
        if run_config.max_tokens is not None:
            kwargs["max_tokens"] = run_config.max_tokens
        if run_config.timeout_s is not None:
            kwargs["timeout"] = run_config.timeout_s
        body = dict(run_config.model_params)
        options = {
            name: _request_option(body.pop(name, None), name, self.adapter_id) for name in _SDK_OPTIONS
        }
        body.update(options["extra_body"])
        if body:
            kwargs["extra_body"] = body
        headers = options["extra_headers"]
        for name, value in headers.items():
            if not isinstance(value, str):
                raise ConfigurationError(
                    f"{self.adapter_id}: extra_headers[{name!r}] must be a string, not {type(value).__name__}"
                )
        if headers:
            kwargs["extra_headers"] = headers
        if options["extra_query"]:
            kwargs["extra_query"] = options["extra_query"]
        return kwargs

    def _secrets(self, run_config: RunConfig) -> list[str]:
        """What the error boundary replaces with ``***``: the API key and every value
        under a secret-named parameter or header, at any depth (``extra_headers``
        included; a ``Bearer X`` value also gives ``X``)."""
        return [self._clients.api_key, *secret_values(run_config.model_params)]

    def _to_response(self, completion: Any, latency_ms: float, info: ResponseInfo) -> LLMResponse:
        try:
            choices = completion.choices
            if not choices:
                raise _malformed(f"{self.adapter_id}: the response has no choices", self.adapter_id, info)
            choice = choices[0]
            message = choice.message
            if message is None:
                raise _malformed(f"{self.adapter_id}: the first choice has no message", self.adapter_id, info)
            calls = [
                ToolCall(str(tc.function.name), tc.function.arguments or "")
                for tc in (message.tool_calls or ())
                if getattr(tc, "function", None) is not None
            ]
            legacy = getattr(message, "function_call", None)
            if legacy is not None and not calls:
                calls.append(ToolCall(str(legacy.name), legacy.arguments or ""))
            text = message.content
            if text is not None and not isinstance(text, str):
                raise _malformed(f"{self.adapter_id}: message content is not text", self.adapter_id, info)
            raw_usage = completion.usage
            usage = (
                None
                if raw_usage is None
                else Usage(int(raw_usage.prompt_tokens or 0), int(raw_usage.completion_tokens or 0))
            )
            model = completion.model or self.model
            fingerprint = getattr(completion, "system_fingerprint", None)
        except (AttributeError, TypeError, ValueError) as exc:
            raise _malformed(
                f"{self.adapter_id}: the response is not a chat completion ({exc})", self.adapter_id, info
            ) from exc
        return LLMResponse(
            text=text or "",
            model=str(model),
            provider=self.provider,
            latency_ms=latency_ms,
            usage=usage,
            cost_usd=cost_usd(self._prices, [self.model, str(model)], usage),
            tool_calls=tuple(calls),
            finish_reason=choice.finish_reason,
            requested_model=self.model,
            endpoint=self.endpoint,
            system_fingerprint=fingerprint if isinstance(fingerprint, str) and fingerprint else None,
        )

    def _log_call(self, response: LLMResponse) -> None:
        if _log.isEnabledFor(logging.DEBUG):
            usage = response.usage or Usage()
            _log.debug(
                "%s: %d+%d tokens in %.0f ms (%s)",
                self.adapter_id,
                usage.prompt_tokens,
                usage.completion_tokens,
                response.latency_ms or 0.0,
                response.finish_reason,
            )

    # -- budget -----------------------------------------------------------------

    CHARS_PER_TOKEN = 4
    """Prompt estimate: one token per this many characters, rounded up (English text
    averages about four characters per token)."""
    MESSAGE_OVERHEAD_TOKENS = 4
    """Prompt estimate: tokens the chat format adds around each message (plus as many
    again to prime the reply)."""
    DEFAULT_MAX_TOKENS_ESTIMATE = 4096
    """Completion estimate when neither ``RunConfig.max_tokens`` nor a ``max_tokens`` /
    ``max_completion_tokens`` model parameter bounds the answer."""

    def estimate(self, prompt: Prompt, run_config: RunConfig) -> tuple[float, int]:
        """``(usd, tokens)`` a budget tracker reserves before this call is sent.

        ``tokens`` = the prompt estimate (every message's characters /
        :attr:`CHARS_PER_TOKEN`, rounded up, plus :attr:`MESSAGE_OVERHEAD_TOKENS`
        per message and for the reply; tool and response-format schemas count as
        prompt text) + the completion bound: the largest of ``RunConfig.max_tokens``
        and the ``max_tokens`` / ``max_completion_tokens`` model parameters, else
        :attr:`DEFAULT_MAX_TOKENS_ESTIMATE`, times ``n`` when several choices are
        asked for. ``usd`` prices both parts at this model's pricing (USD per 1M
        tokens); with no price for the model it is 0.0 (the tokens still count).
        """
        params = run_config.model_params
        schemas = [params[k] for k in ("tools", "functions", "response_format") if params.get(k) is not None]
        if isinstance(prompt, Conversation):
            import json

            messages = prompt.openai_messages(run_config.system_prompt)
            texts = [
                m["content"] if isinstance(m.get("content"), str) else json.dumps(m.get("content") or "")
                for m in messages
            ]
            texts += [json.dumps(m["tool_calls"]) for m in messages if m.get("tool_calls")]
            overhead = self.MESSAGE_OVERHEAD_TOKENS * (len(messages) + 1)
            if prompt.tools:
                schemas.append(prompt.tools)
        else:
            texts = [prompt] if run_config.system_prompt is None else [run_config.system_prompt, prompt]
            overhead = self.MESSAGE_OVERHEAD_TOKENS * (len(texts) + 1)
        per = self.CHARS_PER_TOKEN
        prompt_tokens = sum(-(-len(t) // per) for t in texts) + overhead
        if schemas:
            import json

            prompt_tokens += -(-len(json.dumps(schemas, default=str)) // per)
        bounds = [run_config.max_tokens, params.get("max_tokens"), params.get("max_completion_tokens")]
        given = [b for b in bounds if isinstance(b, int) and not isinstance(b, bool) and b > 0]
        completion_tokens = max(given) if given else self.DEFAULT_MAX_TOKENS_ESTIMATE
        choices = params.get("n")
        if isinstance(choices, int) and not isinstance(choices, bool) and choices > 1:
            completion_tokens *= choices
        price = self._prices.get(self.model)
        usd = 0.0 if price is None else (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000
        return usd, prompt_tokens + completion_tokens

    def _reserve(self, prompt: Prompt, run_config: RunConfig) -> Reservation | None:
        tracker = run_config.budget_tracker
        if tracker is None:
            return None
        usd, tokens = self.estimate(prompt, run_config)
        return tracker.reserve(usd=usd, tokens=tokens)

    # -- calls ------------------------------------------------------------------

    def complete(self, prompt: Prompt, run_config: RunConfig) -> LLMResponse:
        """Answer ``prompt`` with one chat-completion request.

        With a budget tracker in ``run_config``, the call's :meth:`estimate` is
        reserved before the request, settled with the response, and released when
        the call fails (nothing is spent).

        Raises:
            BudgetExceededError: the run config's tracker has no budget left (no call made).
            AdapterError: a subclass naming what went wrong (see ``_errors``).
        """
        held = self._reserve(prompt, run_config)
        with held or nullcontext():  # a reservation not settled by the end is released
            kwargs = self._request(prompt, run_config)
            client = self._clients.sync()
            with model_call(), sdk_errors(self.adapter_id, secrets=self._secrets(run_config)) as info:
                start = time.perf_counter()
                raw = client.chat.completions.with_raw_response.create(**kwargs)
                latency_ms = (time.perf_counter() - start) * 1000.0
                info.note(raw)
                response = self._to_response(_parse(raw, self.adapter_id, info), latency_ms, info)
            if held is not None:
                held.settle(response)
        self._log_call(response)
        return response

    async def acomplete(self, prompt: Prompt, run_config: RunConfig) -> LLMResponse:
        """Async form of :meth:`complete` (``openai.AsyncOpenAI``, one client per event loop).

        A cancelled call releases its budget reservation like a failed one.
        """
        held = self._reserve(prompt, run_config)
        with held or nullcontext():  # a reservation not settled by the end is released
            kwargs = self._request(prompt, run_config)
            client = self._clients.async_()
            with model_call(), sdk_errors(self.adapter_id, secrets=self._secrets(run_config)) as info:
                start = time.perf_counter()
                raw = await client.chat.completions.with_raw_response.create(**kwargs)
                latency_ms = (time.perf_counter() - start) * 1000.0
                info.note(raw)
                response = self._to_response(_parse(raw, self.adapter_id, info), latency_ms, info)
            if held is not None:
                held.settle(response)
        self._log_call(response)
        return response


class OpenAIEmbeddingAdapter:
    """Embeddings through the ``openai`` SDK: one request per :meth:`embed` call.

    Args:
        model: the embedding model (default ``text-embedding-3-small``).
        base_url, api_key, client, max_retries: as for :class:`OpenAIAdapter`.
        timeout_s: per-request timeout (``None``: the SDK default).
    """

    provider = "openai"

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        max_retries: int = 0,
        timeout_s: float | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(
                f"OpenAIEmbeddingAdapter model must be a non-empty string, not {model!r}"
            )
        self.model = model
        self.adapter_id = f"openai:{model}"
        self.timeout_s = timeout_s
        if client is None:
            base_url, api_key = _resolve_endpoint(base_url, api_key, self.adapter_id)
        self._clients = _Clients(
            base_url=base_url, api_key=api_key or "", client=client, max_retries=max_retries
        )
        self.endpoint = public_endpoint(self._clients.base_url)
        """The server without credentials (part of the embedding cache's key)."""

    def __repr__(self) -> str:
        return f"OpenAIEmbeddingAdapter({self.model!r}, base_url={self._clients.base_url!r})"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order, from a single request (no request for no texts)."""
        texts = list(texts)
        if not texts:
            return []
        kwargs: dict[str, Any] = {"model": self.model, "input": texts}
        if self.timeout_s is not None:
            kwargs["timeout"] = self.timeout_s
        client = self._clients.sync()
        with sdk_errors(self.adapter_id, secrets=[self._clients.api_key]) as info:
            raw = client.embeddings.with_raw_response.create(**kwargs)
            info.note(raw)
            result = _parse(raw, self.adapter_id, info)
            try:
                data = sorted(result.data, key=lambda d: d.index)
                vectors = [[float(x) for x in d.embedding] for d in data]
            except (AttributeError, TypeError, ValueError) as exc:
                raise _malformed(
                    f"{self.adapter_id}: not an embeddings response ({exc})", self.adapter_id, info
                ) from exc
            if len(vectors) != len(texts):
                raise _malformed(
                    f"{self.adapter_id}: asked for {len(texts)} embeddings, got {len(vectors)}",
                    self.adapter_id,
                    info,
                )
        return vectors
