"""Build an LLM adapter from a ``provider:model`` spec string (CLI, judge options)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from llm_connect.adapters._providers import ProviderOptions, build_adapter
from llm_connect.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_connect.adapters._base import LLMAdapter

__all__ = ["adapter_from_spec"]


def adapter_from_spec(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    pricing: Mapping[str, Any] | None = None,
) -> LLMAdapter:
    """The adapter named by ``spec`` (``openai:gpt-4o-mini``, ``openai:llama3.1:8b``).

    Everything after the first ``:`` is the model name, so model names may hold
    colons themselves. The provider before it is looked up in the provider registry
    (``llm_connect/adapters/_providers.py``): the built-in ``openai`` and ``recorded``
    (``recorded:NAME`` is resolved by the CLI from a suite, not here) and any provider a
    plugin declares in the entry-point group ``llm_connect.adapters``.

    Raises:
        ConfigurationError: the spec is malformed, names an unknown provider, or its
            provider cannot build the adapter (a plugin that fails to load included).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigurationError(f"adapter spec must be a non-empty 'provider:model' string, not {spec!r}")
    provider, sep, model = spec.strip().partition(":")
    if not sep or not model.strip():
        raise ConfigurationError(
            f"adapter spec {spec!r} must have the form 'provider:model' (e.g. openai:gpt-4o-mini)"
        )
    options = ProviderOptions(spec=spec, base_url=base_url, api_key=api_key, pricing=pricing)
    return build_adapter(provider, model.strip(), options)
