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
* :class:`RecordedAdapter` — replays recorded responses, no model call.
* :func:`adapter_from_spec` — the adapter a ``provider:model`` spec names. Providers are
  entry points of the group ``llm_connect.adapters`` (``openai`` and ``recorded`` too), so a
  plugin distribution adds a prefix: a factory ``factory(model, options: ProviderOptions)``
  returning an :class:`LLMAdapter`; :func:`register_provider` adds one in-process and
  :func:`provider_names` lists them.

Importing this package imports neither ``openai`` nor ``torch`` (nor
``onnxruntime``); they load when an adapter that needs them is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_connect.adapters._base import EmbeddingAdapter, LLMAdapter
from llm_connect.adapters._recorded import RecordedAdapter

if TYPE_CHECKING:
    from llm_connect.adapters._local import default_embedding_adapter
    from llm_connect.adapters._onnx import OnnxEmbeddingAdapter
    from llm_connect.adapters._openai import OpenAIAdapter, OpenAIEmbeddingAdapter
    from llm_connect.adapters._providers import ProviderOptions, provider_names, register_provider
    from llm_connect.adapters._sentence_transformers import SentenceTransformerEmbeddingAdapter
    from llm_connect.adapters._spec import adapter_from_spec

__all__ = [
    "EmbeddingAdapter",
    "LLMAdapter",
    "OnnxEmbeddingAdapter",
    "OpenAIAdapter",
    "OpenAIEmbeddingAdapter",
    "ProviderOptions",
    "RecordedAdapter",
    "SentenceTransformerEmbeddingAdapter",
    "adapter_from_spec",
    "default_embedding_adapter",
    "provider_names",
    "register_provider",
]

_LAZY = {
    "OnnxEmbeddingAdapter": "llm_connect.adapters._onnx",
    "OpenAIAdapter": "llm_connect.adapters._openai",
    "OpenAIEmbeddingAdapter": "llm_connect.adapters._openai",
    "ProviderOptions": "llm_connect.adapters._providers",
    "SentenceTransformerEmbeddingAdapter": "llm_connect.adapters._sentence_transformers",
    "adapter_from_spec": "llm_connect.adapters._spec",
    "default_embedding_adapter": "llm_connect.adapters._local",
    "provider_names": "llm_connect.adapters._providers",
    "register_provider": "llm_connect.adapters._providers",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
