"""Build an LLM adapter from a ``provider:model`` spec string (CLI, judge options)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_connect.adapters._base import LLMAdapter

__all__ = ["PROVIDERS", "adapter_from_spec"]

#: Providers :func:`adapter_from_spec` knows (``recorded:NAME`` is resolved by the CLI).
PROVIDERS: tuple[str, ...] = ("openai",)


def adapter_from_spec(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    pricing: Mapping[str, Any] | None = None,
) -> LLMAdapter:
    """The adapter named by ``spec`` (``openai:gpt-4o-mini``, ``openai:llama3.1:8b``).

    Everything after the first ``:`` is the model name, so model names may hold
    colons themselves.

    Raises:
        ConfigurationError: the spec is malformed or names an unknown provider.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigurationError(f"adapter spec must be a non-empty 'provider:model' string, not {spec!r}")
    provider, sep, model = spec.strip().partition(":")
    if not sep or not model.strip():
        raise ConfigurationError(
            f"adapter spec {spec!r} must have the form 'provider:model' (e.g. openai:gpt-4o-mini)"
        )
    if provider == "openai":
        from llm_connect.adapters._openai import OpenAIAdapter

        return OpenAIAdapter(model.strip(), base_url=base_url, api_key=api_key, pricing=pricing)
    if provider == "recorded":
        raise ConfigurationError(
            f"adapter spec {spec!r}: recorded adapters are read from a suite's responses by the CLI, "
            "not built from a spec"
        )
    raise ConfigurationError(
        f"adapter spec {spec!r}: unknown provider {provider!r} (known: {', '.join(PROVIDERS)})"
    )
