"""Adapters: how llm-connect calls models and embedders.

* :class:`OpenAIAdapter` — chat completions through the official ``openai`` SDK
  (any OpenAI-compatible server via ``base_url``).
* :class:`OpenAIEmbeddingAdapter` — embeddings through the same SDK.
* :class:`SentenceTransformerEmbeddingAdapter` — local sentence-transformers on PyTorch
  (the packaged, offline all-MiniLM-L6-v2 by default).
* :class:`OnnxEmbeddingAdapter` — the same local model exported to ONNX and run
  by ONNX Runtime (``pip install 'llm-connect[embeddings]'``).
* :func:`default_embedding_adapter` — the default embedder, on ``device="auto"``: PyTorch
  on a GPU PyTorch sees; on the CPU ONNX Runtime, unless a probe measured PyTorch faster on
  this machine or ONNX Runtime cannot run here (then PyTorch).
* :func:`local_embedding_adapter` — a local embedder on a backend asked for by name
  (:data:`EMBEDDING_BACKENDS`; :data:`DEFAULT_EMBEDDING_MODEL` unless another model is named);
  :func:`check_device` / :func:`resolve_device` validate a device string and turn it into the
  device that will run.
* :class:`CachedEmbedder` — an embedder whose vectors are kept in an :class:`EmbeddingStore`
  (the ledger's embedding cache), counted in :class:`EmbeddingCounts`.
* :class:`RecordedAdapter` — replays recorded responses, no model call.
* :func:`adapter_from_spec` — the adapter a ``provider:model`` spec names. Providers are
  entry points of the group ``llm_connect.adapters`` (``openai`` and ``recorded`` too), so a
  plugin distribution adds a prefix: a factory ``factory(model, options: ProviderOptions)``
  returning an :class:`LLMAdapter`; :func:`register_provider` adds one in-process and
  :func:`provider_names` lists them.
* :func:`run_in_own_loop` — ``asyncio.run`` for the library's own loops, closing every async
  client opened on the loop before it ends.

Importing this package imports neither ``openai`` nor ``torch`` (nor
``onnxruntime``); they load when an adapter that needs them is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_connect.adapters._base import EmbeddingAdapter, LLMAdapter
from llm_connect.adapters._recorded import RecordedAdapter

if TYPE_CHECKING:
    from llm_connect.adapters._cached_embedder import CachedEmbedder, EmbeddingCounts, EmbeddingStore
    from llm_connect.adapters._device import check_device, resolve_device
    from llm_connect.adapters._local import (
        EMBEDDING_BACKENDS,
        default_embedding_adapter,
        local_embedding_adapter,
    )
    from llm_connect.adapters._loop import run_in_own_loop
    from llm_connect.adapters._onnx import OnnxEmbeddingAdapter
    from llm_connect.adapters._openai import OpenAIAdapter, OpenAIEmbeddingAdapter
    from llm_connect.adapters._providers import ProviderOptions, provider_names, register_provider
    from llm_connect.adapters._sentence_transformers import (
        DEFAULT_EMBEDDING_MODEL,
        SentenceTransformerEmbeddingAdapter,
    )
    from llm_connect.adapters._spec import adapter_from_spec

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "EMBEDDING_BACKENDS",
    "CachedEmbedder",
    "EmbeddingAdapter",
    "EmbeddingCounts",
    "EmbeddingStore",
    "LLMAdapter",
    "OnnxEmbeddingAdapter",
    "OpenAIAdapter",
    "OpenAIEmbeddingAdapter",
    "ProviderOptions",
    "RecordedAdapter",
    "SentenceTransformerEmbeddingAdapter",
    "adapter_from_spec",
    "check_device",
    "default_embedding_adapter",
    "local_embedding_adapter",
    "provider_names",
    "register_provider",
    "resolve_device",
    "run_in_own_loop",
]

_LAZY = {
    **dict.fromkeys(
        ("CachedEmbedder", "EmbeddingCounts", "EmbeddingStore"), "llm_connect.adapters._cached_embedder"
    ),
    **dict.fromkeys(("check_device", "resolve_device"), "llm_connect.adapters._device"),
    **dict.fromkeys(
        ("EMBEDDING_BACKENDS", "default_embedding_adapter", "local_embedding_adapter"),
        "llm_connect.adapters._local",
    ),
    "run_in_own_loop": "llm_connect.adapters._loop",
    "OnnxEmbeddingAdapter": "llm_connect.adapters._onnx",
    **dict.fromkeys(("OpenAIAdapter", "OpenAIEmbeddingAdapter"), "llm_connect.adapters._openai"),
    **dict.fromkeys(
        ("ProviderOptions", "provider_names", "register_provider"), "llm_connect.adapters._providers"
    ),
    **dict.fromkeys(
        ("DEFAULT_EMBEDDING_MODEL", "SentenceTransformerEmbeddingAdapter"),
        "llm_connect.adapters._sentence_transformers",
    ),
    "adapter_from_spec": "llm_connect.adapters._spec",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
