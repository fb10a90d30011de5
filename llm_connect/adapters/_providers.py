"""Provider registry: the ``PROVIDER`` of a ``PROVIDER:MODEL`` spec names an adapter factory.

Every provider is an entry point of the group ``llm_connect.adapters`` (:data:`ENTRY_POINT_GROUP`)
naming a factory ``factory(model: str, options: ProviderOptions) -> LLMAdapter``. llm-connect
declares its own (``openai``, ``recorded``) in its ``pyproject.toml`` and reads them through the
same :func:`importlib.metadata.entry_points` call as any plugin; a plugin distribution declares
more, and ``NAME:MODEL`` then works wherever a spec is taken (``grade -b/-c``, ``llm:NAME:MODEL``
judges, :func:`~llm_connect.adapters.adapter_from_spec`). Code may also add a provider in its
own process with :func:`register_provider`.

Nothing is imported until a spec names its provider: the group is read once per process (its
entry points are names and ``module:attr`` strings) and only the named entry point is loaded, so
``import llm_connect`` and ``llm-connect --help`` import neither ``openai`` nor any plugin.

Which factory a name gets: one registered in-process, else llm-connect's own entry point for a
built-in name (another distribution cannot take over ``openai`` or ``recorded``), else the one
distribution declaring it (two declaring the same name is an error naming both).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError, LLMConnectError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from llm_connect.adapters._base import LLMAdapter

__all__ = [
    "BUILTIN_PROVIDERS",
    "ENTRY_POINT_GROUP",
    "ProviderFactory",
    "ProviderOptions",
    "build_adapter",
    "clear_provider_cache",
    "make_openai_adapter",
    "make_recorded_adapter",
    "provider_names",
    "register_provider",
]

ENTRY_POINT_GROUP = "llm_connect.adapters"
"""The entry-point group providers are declared in (``NAME = "module:factory"``)."""

DISTRIBUTION = "llm-connect"
"""The distribution whose entry points are the built-in providers."""

BUILTIN_PROVIDERS: Mapping[str, str] = {
    "openai": "llm_connect.adapters._providers:make_openai_adapter",
    "recorded": "llm_connect.adapters._providers:make_recorded_adapter",
}
"""The built-in providers, exactly as ``pyproject.toml`` declares them under
``[project.entry-points."llm_connect.adapters"]`` (a test keeps the two equal)."""


@dataclass(frozen=True)
class ProviderOptions:
    """What a provider factory gets besides the model name.

    Fields may be added (always with a default), so a factory should read the ones it uses by
    name and ignore the rest.
    """

    spec: str
    """The whole spec as given (``echo:anything``), for error messages."""
    base_url: str | None = None
    """The server to call (``--base-url``), when one was given."""
    api_key: str | None = field(default=None, repr=False)
    """The API key (``--api-key``), when one was given; never printed."""
    pricing: Mapping[str, Any] | None = None
    """Prices in USD per 1M tokens (``{"input": X, "output": Y}`` or per model), when given."""


ProviderFactory = Callable[[str, ProviderOptions], "LLMAdapter"]
"""``factory(model, options) -> LLMAdapter``: ``model`` is the spec after the first ``:``."""


@dataclass(frozen=True)
class _Provider:
    load: Callable[[], Any]
    """Imports and returns the factory (an entry point's ``load``)."""
    origin: str
    """Where the factory comes from, for messages and :func:`provider_names`."""
    conflict: str | None = None
    """Why the name cannot be used (two plugins declare it); ``None`` when it can."""


_registered: dict[str, _Provider] = {}


def register_provider(name: str) -> Callable[[ProviderFactory], ProviderFactory]:
    """Register ``factory(model, options) -> LLMAdapter`` under ``name`` in this process (a
    decorator); it takes precedence over entry points of the same name."""
    if not isinstance(name, str) or not name or ":" in name or any(c.isspace() for c in name):
        raise ConfigurationError(f"invalid provider name {name!r} (non-empty, no ':' or spaces)")

    def decorate(factory: ProviderFactory) -> ProviderFactory:
        where = f"{getattr(factory, '__module__', '?')}:{getattr(factory, '__qualname__', '?')}"
        _registered[name] = _Provider(lambda: factory, f"registered in-process: {where}")
        return factory

    return decorate


def _import(path: str) -> Any:
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _describe(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    owner = "an unknown distribution" if dist is None else f"distribution {dist.name} {dist.version}"
    return f"entry point '{ep.name} = {ep.value}' of {owner}"


def _is_own(ep: EntryPoint) -> bool:
    dist = getattr(ep, "dist", None)
    return dist is not None and re.sub(r"[-_.]+", "-", dist.name).lower() == DISTRIBUTION


def _group_entry_points() -> list[EntryPoint]:
    """Every entry point of :data:`ENTRY_POINT_GROUP` on ``sys.path``."""
    from importlib.metadata import entry_points  # costly import: only once a spec is resolved

    return list(entry_points(group=ENTRY_POINT_GROUP))


@cache
def _discovered() -> dict[str, _Provider]:
    """Name -> provider, from the group's entry points (read once; :func:`clear_provider_cache`)."""
    own: dict[str, _Provider] = {}
    plugins: dict[str, list[EntryPoint]] = {}
    for ep in _group_entry_points():
        if ep.name in BUILTIN_PROVIDERS:
            if _is_own(ep):  # another distribution cannot take over a built-in name
                own[ep.name] = _Provider(ep.load, _describe(ep))
        else:
            plugins.setdefault(ep.name, []).append(ep)
    found: dict[str, _Provider] = {}
    for name, eps in plugins.items():
        described = sorted({_describe(ep) for ep in eps})
        conflict = None
        if len(described) > 1:
            conflict = f"declared by more than one plugin: {'; '.join(described)} (uninstall all but one)"
        found[name] = _Provider(eps[0].load, described[0], conflict)
    for name, path in BUILTIN_PROVIDERS.items():
        # Running from a source tree that was never installed (or whose install predates these
        # entry points) leaves no llm-connect metadata declaring them: fall back to the table
        # above, which names the same factories pyproject.toml declares.
        found[name] = own.get(name) or _Provider(
            partial(_import, path), f"built-in {path} (no installed entry point)"
        )
    return found


def clear_provider_cache() -> None:
    """Forget the entry points read so far: the next spec reads the group again (tests, or after
    installing a plugin into a running process)."""
    _discovered.cache_clear()


def _providers() -> dict[str, _Provider]:
    return {**_discovered(), **_registered}


def provider_names() -> dict[str, str]:
    """Every provider prefix a spec may use, with where its factory comes from."""
    return {
        name: provider.origin if provider.conflict is None else f"unusable: {provider.conflict}"
        for name, provider in sorted(_providers().items())
    }


def _lookup(name: str, spec: str) -> _Provider:
    provider = _registered.get(name) or _discovered().get(name)
    if provider is None:
        clear_provider_cache()  # a plugin may have been installed since the group was read
        provider = _discovered().get(name)
    if provider is None:
        known = ", ".join(sorted(_providers()))
        raise ConfigurationError(f"adapter spec {spec!r}: unknown provider {name!r} (known: {known})")
    if provider.conflict is not None:
        raise ConfigurationError(f"adapter spec {spec!r}: provider {name!r} is {provider.conflict}")
    return provider


def _load(name: str, provider: _Provider, spec: str) -> ProviderFactory:
    try:
        loaded = provider.load()
    except Exception as exc:
        raise ConfigurationError(
            f"adapter spec {spec!r}: provider {name!r} ({provider.origin}) failed to load: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not callable(loaded):
        raise ConfigurationError(
            f"adapter spec {spec!r}: provider {name!r} ({provider.origin}) is not a factory "
            f"but {type(loaded).__name__}"
        )
    factory: ProviderFactory = loaded
    return factory


def build_adapter(name: str, model: str, options: ProviderOptions) -> LLMAdapter:
    """The adapter provider ``name`` builds for ``model``.

    Raises:
        ConfigurationError: unknown provider (the known ones listed, installed plugins
            included), a plugin that fails to load (naming its distribution and entry point),
            a factory that fails with anything but an llm-connect error, or returns no
            :class:`~llm_connect.adapters.LLMAdapter`.
    """
    from llm_connect.adapters._base import LLMAdapter

    provider = _lookup(name, options.spec)
    factory = _load(name, provider, options.spec)
    try:
        adapter = factory(model, options)
    except LLMConnectError:
        raise
    except Exception as exc:
        raise ConfigurationError(
            f"adapter spec {options.spec!r}: provider {name!r} ({provider.origin}) failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(adapter, LLMAdapter):
        raise ConfigurationError(
            f"adapter spec {options.spec!r}: provider {name!r} ({provider.origin}) returned "
            f"{type(adapter).__name__}, not an LLMAdapter (adapter_id, complete, acomplete)"
        )
    return adapter


# -- the built-in providers (declared as entry points in pyproject.toml) -------------------------


def make_openai_adapter(model: str, options: ProviderOptions) -> LLMAdapter:
    """``openai:MODEL``: an :class:`~llm_connect.adapters.OpenAIAdapter` (any OpenAI-compatible
    server through ``base_url``)."""
    from llm_connect.adapters._openai import OpenAIAdapter

    return OpenAIAdapter(model, base_url=options.base_url, api_key=options.api_key, pricing=options.pricing)


def make_recorded_adapter(model: str, options: ProviderOptions) -> LLMAdapter:
    """``recorded:NAME``: the suite's recorded responses, which the CLI reads from the suite
    itself (``side_from_spec``); there is nothing to build from the spec alone.

    Raises:
        ConfigurationError: always, saying so.
    """
    raise ConfigurationError(
        f"adapter spec {options.spec!r}: recorded adapters are read from a suite's responses by the CLI, "
        "not built from a spec"
    )
