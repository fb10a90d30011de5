"""The local embedder llm-connect builds: which backend, on which device.

:func:`default_embedding_adapter` (no backend asked for) and :func:`local_embedding_adapter`
(``backend="onnx"|"torch"``) take a ``device``: ``auto`` (default), ``cpu``, ``cuda``,
``cuda:N`` or ``mps`` (:mod:`llm_connect.adapters._device`). On a GPU the model runs on
PyTorch there (``fp16=True`` optional); on the CPU the default is the faster backend for the
machine: ONNX Runtime, unless the probe (:mod:`llm_connect.adapters._probe`) measured PyTorch
faster on a machine with this many CPUs, or ONNX Runtime cannot run here (then PyTorch, with one
logged warning). Contract: ``contracts/adapters.md``.
"""

from __future__ import annotations

from llm_connect.adapters import _onnx
from llm_connect.adapters._device import check_device, resolve_device
from llm_connect.adapters._onnx import INSTALL_HINT, OnnxEmbeddingAdapter, onnx_cache_dir
from llm_connect.adapters._sentence_transformers import (
    DEFAULT_EMBEDDING_MODEL,
    SentenceTransformerEmbeddingAdapter,
    resolve_model_source,
)
from llm_connect.errors import ConfigurationError

__all__ = ["EMBEDDING_BACKENDS", "default_embedding_adapter", "local_embedding_adapter"]

EMBEDDING_BACKENDS = ("torch", "onnx")
"""The local embedding backends a user can ask for by name (none asked: the default)."""


def _probed_torch(onnx: OnnxEmbeddingAdapter) -> bool:
    """Whether the probe measured PyTorch faster than ONNX Runtime on a machine like this one
    (read from beside an existing export; nothing is exported or measured here)."""
    from pathlib import Path

    from llm_connect.adapters import _probe

    if not _probe.probe_enabled():
        return False
    cache = onnx.cache_dir if onnx.cache_dir is not None else onnx_cache_dir()
    try:
        export_dir = _onnx._export_dir(onnx.model, Path(resolve_model_source(onnx.model)), cache)
    except (ConfigurationError, OSError):
        return False
    return _probe.remembered_backend(export_dir) == "torch"


def default_embedding_adapter(
    model: str = DEFAULT_EMBEDDING_MODEL, *, device: str = "auto", fp16: bool = False
) -> OnnxEmbeddingAdapter | SentenceTransformerEmbeddingAdapter:
    """The embedder llm-connect builds when no backend is asked for.

    ``device`` resolved (:func:`~llm_connect.adapters._device.resolve_device`) to a GPU:
    ``model`` on PyTorch there (:class:`SentenceTransformerEmbeddingAdapter`, ``fp16`` as
    given). To the CPU: ``model`` on ONNX Runtime (:class:`OnnxEmbeddingAdapter`, exported on
    first use, and on a machine's first use measured against PyTorch), unless that measurement
    found PyTorch faster here, or :func:`~llm_connect.adapters._onnx.onnx_unusable_reason`
    has something against it; then on PyTorch.

    A fallback to PyTorch because ONNX Runtime cannot run is logged once per process and model
    (and reason) as a warning on the ``llm_connect.adapters.onnx`` logger; nothing is printed.
    The backends (and devices) have different ``adapter_id`` values, so the embedding cache
    never hands one's vectors to another.

    Raises:
        ConfigurationError: ``model`` is not a non-empty string; an invalid ``device``, or a
            GPU device PyTorch does not see.
    """
    onnx = OnnxEmbeddingAdapter(model, probe=True)  # validates the name
    device = resolve_device(check_device(device))
    if device != "cpu":
        return SentenceTransformerEmbeddingAdapter(model, device=device, fp16=fp16)
    reason = _onnx.onnx_unusable_reason(onnx.model)
    if reason is None:
        if _probed_torch(onnx):
            return SentenceTransformerEmbeddingAdapter(model)
        return onnx
    from llm_connect.adapters._sentence_transformers import sentence_transformers_available

    if not sentence_transformers_available():
        raise ConfigurationError(
            f"the embedding judge cannot run {onnx.model} here: ONNX Runtime cannot "
            f"({reason.replace(f' ({_onnx.INSTALL_HINT})', '')}) and sentence-transformers is not "
            f"installed: {_onnx.INSTALL_HINT}"
        )
    key = (onnx.model, reason)
    if key not in _onnx._fallbacks_warned:
        _onnx._fallbacks_warned.add(key)
        _onnx._log.warning(
            "embedding model %s runs on PyTorch, not on ONNX Runtime (the default backend): %s",
            onnx.model,
            reason,
        )
    return SentenceTransformerEmbeddingAdapter(model)


def local_embedding_adapter(
    model: str = DEFAULT_EMBEDDING_MODEL,
    backend: str | None = None,
    *,
    device: str = "auto",
    fp16: bool = False,
) -> OnnxEmbeddingAdapter | SentenceTransformerEmbeddingAdapter:
    """``model`` (the packaged all-MiniLM-L6-v2 or a local sentence-transformers directory) on
    ``backend`` and ``device``: ``backend=None`` the default (:func:`default_embedding_adapter`),
    ``"torch"`` PyTorch on ``device``, ``"onnx"`` ONNX Runtime (the CPU only: ``device`` must
    be ``auto`` or ``cpu``), never falling back.

    Raises:
        ConfigurationError: an unknown ``backend`` (naming the allowed ones); ``"onnx"`` without
            onnxruntime installed or with a GPU device; an invalid or unavailable ``device``.
    """
    device = check_device(device)
    if backend is None:
        return default_embedding_adapter(model, device=device, fp16=fp16)
    if backend == "torch":
        return SentenceTransformerEmbeddingAdapter(model, device=device, fp16=fp16)
    if backend == "onnx":
        if device not in ("auto", "cpu"):
            raise ConfigurationError(
                f"the onnx embedding backend runs on the CPU, not on device {device!r}: "
                "use backend=torch (or no backend) for a GPU"
            )
        if not _onnx.onnxruntime_available():
            raise ConfigurationError(f"the onnx embedding backend needs onnxruntime: {INSTALL_HINT}")
        return OnnxEmbeddingAdapter(model)
    raise ConfigurationError(
        f"unknown embedding backend {backend!r} (allowed: {', '.join(EMBEDDING_BACKENDS)})"
    )
