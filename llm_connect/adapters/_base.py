"""Adapter protocols: how llm-connect talks to models and embedders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from llm_connect.types import LLMResponse, Prompt, RunConfig

if TYPE_CHECKING:
    import numpy as np

__all__ = ["EmbeddingAdapter", "LLMAdapter"]


@runtime_checkable
class LLMAdapter(Protocol):
    """Something that answers a prompt: a real API, a recording, a test double."""

    adapter_id: str
    """Stable id of provider and model, e.g. ``openai:gpt-4o-mini``."""

    def complete(self, prompt: Prompt, run_config: RunConfig) -> LLMResponse:
        """Answer ``prompt`` (a string or a :class:`~llm_connect.types.Conversation`) under ``run_config``."""
        ...

    async def acomplete(self, prompt: Prompt, run_config: RunConfig) -> LLMResponse:
        """Async form of :meth:`complete`."""
        ...


@runtime_checkable
class EmbeddingAdapter(Protocol):
    """Something that turns texts into vectors."""

    adapter_id: str
    """Stable id of the embedding model, e.g. ``sentence-transformers:all-MiniLM-L6-v2``."""

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]] | np.ndarray:
        """One vector per text, in order: a list of vectors, or (the local adapters) one
        ``(len(texts), dim)`` float array."""
        ...
