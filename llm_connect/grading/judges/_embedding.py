"""EmbeddingSimilarityJudge: cosine similarity of the two responses' embeddings.

The score is the cosine of the baseline's and the candidate's embedding,
clamped into 0.0..1.0 (opposed or orthogonal meanings both grade 0.0).
Zero vectors have no direction, so the cosine is undefined; the judge defines
it instead of producing NaN: **1.0 when both texts embed to zero vectors**
(nothing versus nothing), **0.0 when exactly one does**.

Where the model runs (``embedding:device=auto|cpu|cuda[:N]|mps``) is a run setting: it is not
part of the grader id (``embedding:all-MiniLM-L6-v2`` on a GPU and on a CPU alike) nor of the
stored spec, so a stored spec rebuilds on any machine (with ``device=auto``); each grade's
details say which device and backend ran (``embedding_device``, ``embedding_backend``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from llm_connect.adapters import EMBEDDING_BACKENDS
from llm_connect.errors import ConfigurationError, EmbeddingOutputError
from llm_connect.grading._protocols import JudgePair, judge_spec
from llm_connect.grading._results import GradingResult
from llm_connect.grading.judges._base import BaseJudge, Scored
from llm_connect.grading.judges._fences import answer_material

if TYPE_CHECKING:
    from llm_connect.adapters import EmbeddingAdapter
    from llm_connect.grading.judges._registry import JudgeContext


__all__ = [
    "DEFAULT_BACKEND",
    "EMBEDDING_BACKENDS",
    "EmbeddingSimilarityJudge",
    "cosine_score",
    "make_embedding_judge",
]

# ``embedding:backend=...`` takes EMBEDDING_BACKENDS (PyTorch or ONNX Runtime, from the adapters'
# local_embedding_adapter); without a backend, ONNX Runtime where it can run the model, else PyTorch.
_BACKEND_OF_PROVIDER = {"sentence-transformers": "torch", "onnx": "onnx"}
DEFAULT_BACKEND = "default"
"""``EmbeddingSimilarityJudge(..., backend=DEFAULT_BACKEND)``: no backend was asked for, so the
judge's spec names none (and rebuilds the default, whichever backend that is where it is rebuilt)."""


def _model_name(adapter: EmbeddingAdapter) -> str:
    model = getattr(adapter, "model", None)
    if isinstance(model, str) and model:
        return model
    _, sep, rest = adapter.adapter_id.partition(":")
    return rest if sep and rest else adapter.adapter_id


def _matrix(vectors: Any, expected: int, adapter_id: str) -> np.ndarray:
    """Vectors as a float matrix, or :class:`EmbeddingOutputError` naming the problem.

    A 2-D float array (what the local adapters and the cache return) is used as it is."""
    if isinstance(vectors, np.ndarray) and vectors.ndim == 2 and vectors.dtype.kind == "f":
        if len(vectors) != expected:
            raise EmbeddingOutputError(f"{adapter_id} returned {len(vectors)} vectors for {expected} texts")
        if vectors.shape[1] == 0:
            raise EmbeddingOutputError(f"{adapter_id} returned empty vectors")
        if not np.all(np.isfinite(vectors)):
            raise EmbeddingOutputError(f"{adapter_id} returned vectors with NaN or infinite values")
        return vectors
    try:
        count = len(vectors)
    except TypeError:
        raise EmbeddingOutputError(
            f"{adapter_id} returned {type(vectors).__name__}, not a list of vectors"
        ) from None
    if count != expected:
        raise EmbeddingOutputError(f"{adapter_id} returned {count} vectors for {expected} texts")
    try:
        lengths = {len(v) for v in vectors}
    except TypeError:
        raise EmbeddingOutputError(f"{adapter_id} returned something other than a list of vectors") from None
    if len(lengths) > 1:
        raise EmbeddingOutputError(f"{adapter_id} returned vectors of different lengths {sorted(lengths)}")
    if lengths == {0}:
        raise EmbeddingOutputError(f"{adapter_id} returned empty vectors")
    try:
        matrix = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise EmbeddingOutputError(f"{adapter_id} returned non-numeric vectors: {exc}") from None
    if not np.all(np.isfinite(matrix)):
        raise EmbeddingOutputError(f"{adapter_id} returned vectors with NaN or infinite values")
    return matrix


def cosine_score(a: np.ndarray, b: np.ndarray) -> tuple[float, float | None]:
    """``(score, raw_cosine)``: the cosine clamped into 0..1, and the cosine itself.

    Zero vectors: both zero -> ``(1.0, None)``, one zero -> ``(0.0, None)``.
    """
    a, b = a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return (1.0 if na == nb else 0.0), None
    cosine = float(np.dot(a, b) / (na * nb))
    return min(1.0, max(0.0, cosine)), cosine


class EmbeddingSimilarityJudge(BaseJudge):
    """Grades the candidate by the cosine similarity of its embedding to the baseline's.

    :meth:`judge` embeds the two response texts in one ``embed`` call of exactly
    two texts; :meth:`judge_many` embeds every distinct text of a batch in one
    call. The grader id names the embedding model (``embedding:all-MiniLM-L6-v2``).

    Raises (from judging):
        EmbeddingOutputError: (a ``ValueError``) the adapter returned the wrong
            number of vectors, ragged vectors, or non-finite values.
    """

    asks_llm = False
    """Embeddings and a cosine give the grade; no LLM is asked."""
    in_thread = True
    """Embedding is CPU-bound: ``ajudge`` runs in a worker thread."""

    def __init__(self, adapter: EmbeddingAdapter, *, backend: str | None = None) -> None:
        """``backend``: what the judge's spec records as ``backend``: ``None`` (the default) the
        adapter's own (``onnx`` for an ONNX Runtime adapter, ``torch`` for a sentence-transformers
        one, nothing for others); :data:`DEFAULT_BACKEND` nothing (the registry's default judge);
        ``"onnx"``/``"torch"`` that backend. The spec records ``fp16=true`` when the adapter runs
        in half precision, and never the device."""
        if backend not in (None, DEFAULT_BACKEND, *EMBEDDING_BACKENDS):
            raise ConfigurationError(f"embedding judge: unknown backend {backend!r}")
        self.adapter = adapter
        self.model = _model_name(adapter)
        self.grader_id = f"embedding:{self.model}"
        args: dict[str, Any] = {"model": self._spec_model()}
        if backend is None:
            backend = _BACKEND_OF_PROVIDER.get(str(getattr(adapter, "provider", "")))
        if backend is not None and backend != DEFAULT_BACKEND:
            args["backend"] = backend
        if getattr(adapter, "fp16", False) is True:
            args["fp16"] = True
        self._ran: dict[str, Any] = {
            f"embedding_{key}": value
            for key in ("device", "backend")
            if isinstance(value := getattr(adapter, key, None), str)
        }
        """Where the model ran (``embedding_device``) and on what (``embedding_backend``)."""
        self._spec = judge_spec("embedding", asks_llm=self.asks_llm, **args)

    def _spec_model(self) -> str:
        provider = getattr(self.adapter, "provider", None)
        if provider == "openai":
            return f"openai:{self.model}"
        return self.model

    def __repr__(self) -> str:
        return f"EmbeddingSimilarityJudge({self.adapter!r})"

    def _scored(self, a: np.ndarray, b: np.ndarray) -> Scored:
        score, cosine = cosine_score(a, b)
        if cosine is None:
            notes = "both embeddings are zero vectors" if score == 1.0 else "one embedding is a zero vector"
        else:
            notes = f"cosine similarity {cosine:.3f}"
        details: dict[str, Any] = {
            "cosine": cosine,
            "embedding_model": self.model,
            "embedding_adapter": self.adapter.adapter_id,
            **self._ran,
            "judge_spec": self._spec,
        }
        return Scored(score, notes, details)

    def score(self, pair: JudgePair) -> Scored:
        """Cosine similarity of the two answers, embedded in one call, clamped into 0..1.

        An answer's tool calls are part of what is embedded (``[tool call] name(arguments)``
        after its text), so two answers that only call different tools do not embed alike.
        """
        texts = [answer_material(pair.baseline_response), answer_material(pair.candidate_response)]
        matrix = _matrix(self.adapter.embed(texts), 2, self.adapter.adapter_id)
        return self._scored(matrix[0], matrix[1])

    def judge_many(self, pairs: Sequence[JudgePair]) -> list[GradingResult]:
        """Grade every pair, embedding each distinct text of the batch once in one call."""
        pairs = list(pairs)
        if not pairs:
            return []
        index: dict[str, int] = {}
        for pair in pairs:
            for text in (answer_material(pair.baseline_response), answer_material(pair.candidate_response)):
                index.setdefault(text, len(index))
        matrix = _matrix(self.adapter.embed(list(index)), len(index), self.adapter.adapter_id)
        return [
            self.grading_result(
                self._scored(
                    matrix[index[answer_material(pair.baseline_response)]],
                    matrix[index[answer_material(pair.candidate_response)]],
                ),
                pair,
            )
            for pair in pairs
        ]


def _local_adapter(model: str, backend: str | None, device: str, fp16: bool) -> EmbeddingAdapter:
    from llm_connect.adapters import local_embedding_adapter

    try:
        return local_embedding_adapter(model, backend, device=device, fp16=fp16)
    except ConfigurationError as exc:
        asked = ",".join(f"{k}={v}" for k, v in (("backend", backend), ("device", device)) if v) or "model"
        raise ConfigurationError(f"embedding:{asked}: {exc}") from None


def make_embedding_judge(
    context: JudgeContext,
    *,
    model: str | None = None,
    backend: str | None = None,
    device: str | None = None,
    fp16: bool = False,
) -> EmbeddingSimilarityJudge:
    """Registry factory for ``embedding`` (``embedding:model=NAME`` picks the model,
    ``embedding:backend=onnx|torch`` where a local model runs, ``embedding:device=auto|cpu|
    cuda[:N]|mps`` on which device, ``embedding:fp16=true`` half precision on a GPU).

    Without ``model`` (or when it names the context's embedding model), ``backend``, ``device``
    and ``fp16`` (or when they match the shared adapter's), the context's shared embedding
    adapter is used (by default all-MiniLM-L6-v2 on the context's ``embedding_device``, ``auto``:
    PyTorch on a GPU PyTorch sees, else the faster CPU backend, ONNX Runtime or PyTorch);
    ``model="openai:NAME"`` uses the OpenAI embeddings API; any other name is a local
    sentence-transformers model, run by the default backend, by PyTorch (``backend="torch"``)
    or by ONNX Runtime (``backend="onnx"``, the CPU only, never falling back). The adapter is
    wrapped with the context's embedding cache (the ledger's, when the context has one). The
    judge's spec records ``backend`` only when one was asked for, ``fp16`` when it ran, and
    never the device (a run setting: the spec rebuilds on another machine).

    Raises:
        ConfigurationError: an unknown ``backend``; a backend, device or fp16 for an OpenAI
            model; ``backend="onnx"`` without onnxruntime installed or with a GPU device; an
            invalid device, or a GPU device PyTorch does not see (naming what it found).
    """
    from llm_connect.adapters import check_device

    if backend is not None and backend not in EMBEDDING_BACKENDS:
        raise ConfigurationError(
            f"embedding judge: unknown backend {backend!r} (allowed: {', '.join(EMBEDDING_BACKENDS)})"
        )
    if not isinstance(fp16, bool):
        raise ConfigurationError(f"embedding judge: fp16 must be true or false, not {fp16!r}")
    if device is not None:
        try:
            device = check_device(device)
        except ConfigurationError as exc:
            raise ConfigurationError(f"embedding:device={device}: {exc}") from None
    if model is not None and model.startswith("openai:"):
        if backend is not None or device is not None or fp16:
            raise ConfigurationError(
                f"embedding judge: backend, device and fp16 run local models, not the OpenAI model {model!r}"
            )
        from llm_connect.adapters import OpenAIEmbeddingAdapter

        openai_adapter = OpenAIEmbeddingAdapter(model.partition(":")[2])
        return EmbeddingSimilarityJudge(context.cached_embedder(openai_adapter))
    if device is not None and device != "auto" and backend != "onnx":
        from llm_connect.adapters import resolve_device

        try:  # an unavailable GPU is refused here, before any model call
            device = resolve_device(device)
        except ConfigurationError as exc:
            raise ConfigurationError(f"embedding:device={device}: {exc}") from None
    adapter = context.embedding_adapter()
    shared_backend = _BACKEND_OF_PROVIDER.get(str(getattr(adapter, "provider", "")))
    if (
        (model is None or model in (_model_name(adapter), adapter.adapter_id))
        and (backend is None or backend == shared_backend)
        and (device in (None, "auto") or device == getattr(adapter, "device", None))
        and fp16 == bool(getattr(adapter, "fp16", False))
    ):
        return EmbeddingSimilarityJudge(adapter, backend=backend or DEFAULT_BACKEND)
    if model is None:
        from llm_connect.adapters import DEFAULT_EMBEDDING_MODEL

        model = _model_name(adapter) if shared_backend else DEFAULT_EMBEDDING_MODEL
    local = _local_adapter(model, backend, device or context.embedding_device, fp16)
    return EmbeddingSimilarityJudge(context.cached_embedder(local), backend=backend or DEFAULT_BACKEND)
