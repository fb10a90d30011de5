"""Local embeddings on ONNX Runtime: a sentence-transformers model exported to ONNX once, then run
by ``onnxruntime`` (the ``embedding:backend=onnx`` judge; contract: ``contracts/adapters.md``).

sentence-transformers' own ``backend="onnx"`` needs ``optimum-onnx``, whose only release requires
``transformers<4.58`` while sentence-transformers 6 requires ``transformers>=5``; so this module
does what that backend does, with ``torch.onnx.export`` and ``onnxruntime.InferenceSession``:

* **Export, once**, from the local weights (never the network) into
  ``onnx_cache_dir()/<model>-<digest of the weights>/`` (``model.onnx``, ``meta.json``), written
  to a temporary sibling and renamed into place, after a check against the PyTorch model. A
  cached model that onnxruntime cannot load is exported again once, never used.
* **The model's own pipeline**: its ``tokenizer.json`` with sentence-transformers' truncation and
  padding, then the modules of ``modules.json`` (Transformer, mean Pooling, optional Normalize;
  anything else is a :class:`~llm_connect.errors.ConfigurationError`).

It is the **default** backend (:func:`default_embedding_adapter`, used wherever llm-connect
builds its default embedder) when :func:`onnx_unusable_reason` finds nothing against it here;
otherwise the default is the PyTorch adapter, with one warning through the package's logging.

``onnxruntime`` and ``tokenizers`` are imported on first use; ``torch``, ``transformers`` and
``onnxscript`` only when a model must be exported.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from llm_connect._extras import importable
from llm_connect._secrets import get_logger
from llm_connect.adapters._activity import check_num_threads, distinct_texts, rows_in_order, threads_for
from llm_connect.adapters._onnx_pipeline import Pipeline, batch_arrays, load_tokenizer, read_pipeline
from llm_connect.adapters._sentence_transformers import (
    DEFAULT_EMBEDDING_MODEL,
    _no_progress_bars,
    _short_name,
    resolve_model_source,
)
from llm_connect.errors import ConfigurationError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "CACHE_DIR_ENV",
    "INSTALL_HINT",
    "ONNX_OPSET",
    "OnnxEmbeddingAdapter",
    "onnx_cache_dir",
    "onnx_unusable_reason",
    "onnxruntime_available",
]

CACHE_DIR_ENV = "LLM_CONNECT_CACHE_DIR"
"""llm-connect's cache directory; the exported models go to its ``onnx`` subdirectory."""
INSTALL_HINT = "pip install 'llm-connect[embeddings]'"
_EXPORT_NEEDS = ("onnx", "onnxscript", "torch", "transformers")
"""What ``torch.onnx.export`` of a model needs beyond onnxruntime (checked without importing)."""
ONNX_OPSET = 20
"""The ONNX opset the models are exported with (onnxruntime >= 1.17 runs it)."""
_FORMAT = 1  # the exported graph's interface; part of the digest, so a change exports again
_EXPORT_TOLERANCE = 1e-3  # largest |onnx - torch| token-embedding difference accepted at export
_OUTPUT = "token_embeddings"

_log = get_logger("llm_connect.adapters.onnx")
_load_lock = threading.Lock()
_runtimes: dict[tuple[str, str], _Runtime] = {}
_digests: dict[tuple[str, int, int], str] = {}
_exports = 0
"""Models exported by this process (read by the tests)."""
_fallbacks_warned: set[tuple[str, str]] = set()
"""``(model, reason)`` of every fallback to PyTorch this process has warned about."""


def onnx_cache_dir() -> Path:
    """Where exported models are kept: ``$LLM_CONNECT_CACHE_DIR/onnx``, else
    ``$XDG_CACHE_HOME/llm-connect/onnx``, else ``~/.cache/llm-connect/onnx``."""
    root = os.environ.get(CACHE_DIR_ENV, "").strip()
    if root:
        return Path(root).expanduser() / "onnx"
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "llm-connect" / "onnx"


def onnxruntime_available() -> bool:
    """Whether ``onnxruntime`` can be imported (checked without importing it)."""
    return importable("onnxruntime")


def _writable(directory: Path) -> bool:
    """Whether ``directory`` can be created (or written, when it exists) by this process,
    judged from its nearest existing ancestor; nothing is created."""
    path = directory
    while not path.exists():
        if path.parent == path:
            return False
        path = path.parent
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _source_digest(source: Path, model: str) -> str:
    """SHA-256 of the weights and ``config.json`` (plus the export format and opset)."""
    files = [source / "config.json"] + [
        source / name for name in ("model.safetensors", "pytorch_model.bin") if (source / name).is_file()
    ]
    if len(files) < 2:
        raise ConfigurationError(
            f"onnx backend: model {model!r} has no model.safetensors or pytorch_model.bin"
        )
    stats = [f.stat() for f in files]
    key = ("|".join(map(str, files)), sum(s.st_size for s in stats), max(s.st_mtime_ns for s in stats))
    if key not in _digests:
        digest = hashlib.sha256(f"llm-connect-onnx-{_FORMAT}-opset{ONNX_OPSET}".encode())
        for path in files:
            digest.update(f"\0{path.name}\0".encode())
            with path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        _digests[key] = digest.hexdigest()
    return _digests[key]


_CHECK_TEXTS = (
    "a",
    "The exported graph must give the PyTorch model's token embeddings, padded or not.",
    "Long enough to be truncated: " + "word " * 600,
)


def _export(pipeline: Pipeline, tokenizer: Any, target: Path) -> dict[str, Any]:
    """Export the transformer to ``target/model.onnx``, check it against PyTorch, write ``meta.json``."""
    global _exports
    started = time.perf_counter()
    try:
        import numpy as np
        import onnx
        import onnxruntime
        import onnxscript  # noqa: F401  (torch.onnx.export's dynamo exporter needs it)
        import torch
        import transformers
    except ImportError as exc:
        raise ConfigurationError(f"onnx backend: exporting a model needs {exc.name}: {INSTALL_HINT}") from exc
    try:
        with _no_progress_bars():
            model = transformers.AutoModel.from_pretrained(str(pipeline.source), local_files_only=True)
    except Exception as exc:
        raise ConfigurationError(
            f"onnx backend: could not load model {pipeline.model!r} from {str(pipeline.source)!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    model.eval()
    import inspect

    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in inspect.signature(model.forward).parameters:
        names.append("token_type_ids")

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
            extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state

    wrapper = TokenEmbeddings(model).eval()
    pad_id = tokenizer.token_to_id(pipeline.pad_token)
    # The example batch must hold padding: from an all-ones mask the exporter drops the mask.
    example = batch_arrays(tokenizer.encode_batch(list(_CHECK_TEXTS[:2])), pad_id)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", max=pipeline.max_length)
    path = target / "model.onnx"
    exporter_log = logging.getLogger("torch.onnx")
    level = exporter_log.level
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            exporter_log.setLevel(logging.ERROR)  # "torchvision is not installed": not our business
            torch.onnx.export(
                wrapper,
                tuple(torch.from_numpy(example[n]) for n in names),
                str(path),
                input_names=names,
                output_names=[_OUTPUT],
                dynamic_shapes=tuple({0: batch, 1: seq} for _ in names),
                opset_version=ONNX_OPSET,
                dynamo=True,
                external_data=False,
                verbose=False,
            )
    except Exception as exc:
        raise ConfigurationError(
            f"onnx backend: exporting model {pipeline.model!r} failed: {type(exc).__name__}: {exc}; "
            "use backend=torch (e.g. --judge embedding:backend=torch)"
        ) from exc
    finally:
        exporter_log.setLevel(level)
    session = _new_session(path, 0)
    worst = 0.0
    for texts in (_CHECK_TEXTS, _CHECK_TEXTS[1:2]):  # other batch sizes and lengths than the example
        arrays = batch_arrays(tokenizer.encode_batch(list(texts)), pad_id)
        got = session.run([_OUTPUT], {n: arrays[n] for n in names})[0]
        with torch.no_grad():
            want = wrapper(*(torch.from_numpy(arrays[n]) for n in names)).numpy()
        real = arrays["attention_mask"].astype(bool)
        worst = max(worst, float(np.abs(got - want)[real].max()))
    if not worst <= _EXPORT_TOLERANCE:
        raise ConfigurationError(
            f"onnx backend: the exported model {pipeline.model!r} differs from PyTorch by {worst:.3g} "
            f"(tolerance {_EXPORT_TOLERANCE}); use backend=torch"
        )
    meta = {
        "format": _FORMAT,
        "model": pipeline.model,
        "source": str(pipeline.source),
        "inputs": names,
        "output": _OUTPUT,
        "opset": ONNX_OPSET,
        "max_length": pipeline.max_length,
        "max_abs_diff_vs_torch": worst,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "export_seconds": round(time.perf_counter() - started, 2),
    }
    (target / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    _exports += 1
    _log.info("exported %s to %s in %.1f s", pipeline.model, path, meta["export_seconds"])
    return meta


def _export_into(pipeline: Pipeline, tokenizer: Any, final: Path, *, replace: bool) -> None:
    """Export to a temporary directory beside ``final`` and rename it into place (atomically).

    ``replace``: ``final`` holds a model that failed to load; it is moved aside first. When another
    process published ``final`` meanwhile, its copy is kept and this one dropped."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the cache is as readable as any other
    try:
        _export(pipeline, tokenizer, tmp)
        if replace:
            trash = final.with_name(f".old-{final.name}-{uuid.uuid4().hex[:8]}")
            try:
                final.rename(trash)
            except FileNotFoundError:
                pass
            else:
                shutil.rmtree(trash, ignore_errors=True)
        try:
            tmp.rename(final)
        except OSError:
            if not (final / "meta.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class _Runtime:
    """One model's pipeline, tokenizer, exported file and sessions (by thread count)."""

    pipeline: Pipeline
    tokenizer: Any
    pad_id: int
    path: Path
    inputs: list[str] = field(default_factory=list)
    sessions: dict[int, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while encoding (one encode of the model at a time, as the PyTorch adapter)."""


def _new_session(path: Path, threads: int) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads  # 0: onnxruntime's default, one per physical core
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: library code prints nothing
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _export_dir(model: str, source: Path, cache_dir: Path) -> Path:
    """Where the export of ``model``'s weights (at ``source``) lives in ``cache_dir``."""
    label = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(model).name) or "model"
    return cache_dir / f"{label}-{_source_digest(source, model)[:16]}"


def _runtime(model: str, cache_dir: Path) -> _Runtime:
    """The model's runtime, exporting it into ``cache_dir`` on first use (once per process)."""
    if not onnxruntime_available():
        raise ConfigurationError(f"the onnx embedding backend needs onnxruntime: {INSTALL_HINT}")
    source = Path(resolve_model_source(model))
    key = (str(source), str(cache_dir))
    with _load_lock:
        if key in _runtimes:
            return _runtimes[key]
        try:
            import tokenizers  # noqa: F401
        except ImportError as exc:
            raise ConfigurationError(f"the onnx embedding backend needs tokenizers: {INSTALL_HINT}") from exc
        pipeline = read_pipeline(model, source)
        tokenizer = load_tokenizer(pipeline)
        final = _export_dir(model, source, cache_dir)
        if not (final / "model.onnx").is_file() or not (final / "meta.json").is_file():
            _export_into(pipeline, tokenizer, final, replace=final.exists())
        try:
            session = _new_session(final / "model.onnx", 1)
        except Exception as exc:  # a corrupt or truncated cached model: export it again, once
            _log.warning("cached ONNX model %s does not load (%s); exporting it again", final, exc)
            _export_into(pipeline, tokenizer, final, replace=True)
            try:
                session = _new_session(final / "model.onnx", 1)
            except Exception as again:
                raise ConfigurationError(
                    f"onnx backend: the model exported to {final} does not load: "
                    f"{type(again).__name__}: {again}"
                ) from again
        runtime = _Runtime(
            pipeline=pipeline,
            tokenizer=tokenizer,
            pad_id=tokenizer.token_to_id(pipeline.pad_token),
            path=final / "model.onnx",
            inputs=[i.name for i in session.get_inputs()],
            sessions={1: session},
        )
        _runtimes[key] = runtime
        return runtime


def _session(runtime: _Runtime, threads: int) -> Any:
    with _load_lock:
        if threads not in runtime.sessions:
            runtime.sessions[threads] = _new_session(runtime.path, threads)
        return runtime.sessions[threads]


_probed: set[Path] = set()


def _probe_once(model: str, cache_dir: Path, export_dir: Path) -> None:
    """Measure ONNX Runtime against PyTorch here and remember the verdict beside the export,
    unless this machine's CPU count has one (or this process probed it, or the probe is off)."""
    from llm_connect.adapters import _probe

    with _load_lock:
        if export_dir in _probed or not _probe.probe_enabled() or not importable("torch"):
            return
        _probed.add(export_dir)
    if _probe.remembered_backend(export_dir) is not None:
        return

    def onnx_embed(texts: list[str], threads: int) -> Any:
        return OnnxEmbeddingAdapter(model, num_threads=threads, cache_dir=cache_dir).embed(texts)

    try:
        _probe.record_probe(export_dir, _probe.run_probe(model, onnx_embed))
    except Exception as exc:  # a probe that cannot run or be written changes nothing
        _log.warning("embedding backend probe failed (%s: %s); ONNX Runtime stays", type(exc).__name__, exc)


class OnnxEmbeddingAdapter:
    """Embeds texts with a local sentence-transformers model on ONNX Runtime (``embedding:backend=onnx``).

    The same surface as :class:`~llm_connect.adapters.SentenceTransformerEmbeddingAdapter` and
    the same vectors to within float rounding (cosine >= 0.999 on every text of the agreement set;
    measured: > 0.99999), under another ``adapter_id`` (``onnx:all-MiniLM-L6-v2``), so the
    ledger's embedding cache never hands one backend's vectors to the other. ``model`` is
    ``all-MiniLM-L6-v2`` (the packaged offline copy) or a local model directory; the first
    :meth:`embed` (or :meth:`load`) exports it into ``cache_dir`` (default :func:`onnx_cache_dir`)
    unless an export of the same weights is there, and every instance of the process shares the
    loaded model. Identical texts within one call are encoded once.

    ``num_threads`` as the PyTorch adapter's: ``"auto"`` (default) runs **one thread** for fewer
    than :data:`~llm_connect.adapters._sentence_transformers.AUTO_MIN_TEXTS` distinct texts or
    while this process has model calls in flight, and **one thread per core** (onnxruntime's
    default) for a large batch with none in flight; an int pins that many threads; ``None`` is
    onnxruntime's default. onnxruntime fixes the thread count per session, so each count used
    gets its own session, created on first use.

    Raises:
        ConfigurationError: onnxruntime (or, to export, torch/transformers/onnxscript) is missing,
            the model is not a local sentence-transformers directory of supported modules, or the
            export fails or disagrees with PyTorch.
    """

    provider = "onnx"

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        *,
        batch_size: int = 64,
        num_threads: int | Literal["auto"] | None = "auto",
        cache_dir: str | Path | None = None,
        probe: bool = False,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"embedding model must be a non-empty string, not {model!r}")
        check_num_threads(num_threads)
        self.probe = probe
        """Whether the first load on a machine measures ONNX Runtime against PyTorch and
        remembers the faster (:mod:`llm_connect.adapters._probe`; set by the default embedder)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size must be an int >= 1, not {batch_size!r}")
        self.model = _short_name(model)
        self.batch_size = batch_size
        self.num_threads = num_threads
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else None
        self.adapter_id = f"onnx:{self.model}"

    def __repr__(self) -> str:
        return f"OnnxEmbeddingAdapter({self.model!r})"

    device = "cpu"
    """Where the model runs: ONNX Runtime's CPU execution provider."""
    backend = "onnx"
    """What runs the model (``embedding:backend=onnx``)."""

    def threads_for(self, n_texts: int) -> int | None:
        """The onnxruntime thread count an encode of ``n_texts`` distinct texts runs with now
        (``None``: onnxruntime's default, one per core)."""
        return threads_for(self.num_threads, n_texts)

    def _runtime(self) -> _Runtime:
        cache_dir = self.cache_dir if self.cache_dir is not None else onnx_cache_dir()
        runtime = _runtime(self.model, cache_dir)
        if self.probe:
            _probe_once(self.model, cache_dir, runtime.path.parent)
        return runtime

    @property
    def model_path(self) -> Path:
        """The exported ``model.onnx`` (exporting it first if needed)."""
        return self._runtime().path

    def load(self) -> None:
        """Export (if needed) and load the model now (otherwise the first :meth:`embed` does)."""
        self._runtime()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, in order (a ``(len(texts), dim)`` array); each distinct
        text is encoded once."""
        import numpy as np

        texts, unique = distinct_texts(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)

        runtime = self._runtime()
        threads = self.threads_for(len(unique))
        session = _session(runtime, 0 if threads is None else threads)
        matrix: np.ndarray | None = None
        with runtime.lock:
            encodings = runtime.tokenizer.encode_batch(unique)
            order = sorted(range(len(unique)), key=lambda i: -len(encodings[i].ids))  # less padding
            for start in range(0, len(order), self.batch_size):
                rows = order[start : start + self.batch_size]
                arrays = batch_arrays([encodings[i] for i in rows], runtime.pad_id)
                hidden = session.run([_OUTPUT], {name: arrays[name] for name in runtime.inputs})[0]
                mask = arrays["attention_mask"].astype(np.float32)[:, :, None]
                pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), np.float32(1e-9))
                if runtime.pipeline.normalize:
                    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
                    pooled = pooled / np.maximum(norms, np.float32(1e-12))
                if matrix is None:
                    matrix = np.empty((len(unique), pooled.shape[1]), dtype=np.float32)
                matrix[rows] = pooled
        assert matrix is not None
        return rows_in_order(matrix, texts, unique)


def onnx_unusable_reason(
    model: str = DEFAULT_EMBEDDING_MODEL, cache_dir: str | Path | None = None
) -> str | None:
    """Why the default backend cannot run ``model`` on ONNX Runtime here, or ``None`` when it can.

    Checked without importing anything heavy or exporting: ``onnxruntime`` and ``tokenizers``
    importable; the model a local sentence-transformers directory of modules the backend runs
    (what :class:`OnnxEmbeddingAdapter` would refuse with a ``ConfigurationError``); and either an
    export of its weights already in ``cache_dir`` (default :func:`onnx_cache_dir`) or both
    what the export needs (``onnx``, ``onnxscript``, ``torch``, ``transformers``) importable and
    ``cache_dir`` writable. An export that fails once started is not foreseen here: it raises.
    """
    if not onnxruntime_available():
        return f"onnxruntime is not installed ({INSTALL_HINT})"
    if not importable("tokenizers"):
        return f"tokenizers is not installed ({INSTALL_HINT})"
    model = _short_name(model)
    source = Path(resolve_model_source(model))
    cache = Path(cache_dir).expanduser() if cache_dir is not None else onnx_cache_dir()
    try:
        read_pipeline(model, source)
        missing = [name for name in _EXPORT_NEEDS if not importable(name)]
        if not missing and _writable(cache):
            return None
        with _load_lock:
            if (str(source), str(cache)) in _runtimes:
                return None  # exported or found earlier in this process
        final = _export_dir(model, source, cache)
    except ConfigurationError as exc:
        return str(exc)
    if (final / "model.onnx").is_file() and (final / "meta.json").is_file():
        return None  # exported before: running it needs neither the exporter nor a writable cache
    if missing:
        return f"exporting the model needs {', '.join(missing)} ({INSTALL_HINT})"
    return (
        f"the ONNX model cache {str(cache)!r} cannot be written (set {CACHE_DIR_ENV} to a writable directory)"
    )
