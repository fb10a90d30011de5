"""Which CPU backend is faster on this machine: a measured probe, remembered with the export.

ONNX Runtime is not faster than PyTorch everywhere: on a 16-core machine it did not scale with
the cores (0.56x raw PyTorch ``encode``), and on 2 cores it lost to PyTorch at one thread on
answers of 20-200 words. So the first process that loads the default ONNX model on a machine
times both backends on the same texts (:data:`PROBE_TEXTS`, 20-200 words) at one thread and at
every core, interleaved, and writes the verdict to ``probe.json`` beside the export, keyed by
the machine's CPU count; every later :func:`~llm_connect.adapters.default_embedding_adapter`
on a machine with that many CPUs reads it and builds the faster backend. ONNX Runtime is kept
only when it is at least as fast as PyTorch at both thread counts.

``LLM_CONNECT_EMBEDDING_PROBE=0`` turns the probe off (the default stays ONNX Runtime, as
before the probe existed; the test suite runs so).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from llm_connect._secrets import get_logger

__all__ = ["PROBE_ENV", "PROBE_FILE", "probe_enabled", "record_probe", "remembered_backend", "run_probe"]

PROBE_ENV = "LLM_CONNECT_EMBEDDING_PROBE"
PROBE_FILE = "probe.json"
_ROUNDS = 3
_WORDS = (
    "the a model answer grade cost quality river mountain bank loan interest policy engine ship "
    "code test data judge cache thread core batch light music history science weather market"
)
_log = get_logger("llm_connect.adapters.onnx")


def probe_enabled() -> bool:
    """Whether the default embedder measures and follows the faster CPU backend (``PROBE_ENV``
    not set to ``0``/``false``/``no``/``off``)."""
    return os.environ.get(PROBE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _cpus() -> str:
    return str(os.cpu_count() or 1)


def remembered_backend(export_dir: Path) -> str | None:
    """``"onnx"`` or ``"torch"``: the probe's verdict for this machine's CPU count, or ``None``
    (never probed here, or the file is unreadable: then it is probed again)."""
    try:
        entry = json.loads((export_dir / PROBE_FILE).read_text(encoding="utf-8"))[_cpus()]
        backend = entry["backend"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return backend if backend in ("onnx", "torch") else None


def record_probe(export_dir: Path, result: dict[str, Any]) -> None:
    """Add ``result`` under this machine's CPU count to ``probe.json`` (written to a temporary
    file and renamed into place; other CPU counts' entries are kept)."""
    path = export_dir / PROBE_FILE
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(entries, dict):
            entries = {}
    except (OSError, ValueError):
        entries = {}
    entries[_cpus()] = result
    fd, tmp = tempfile.mkstemp(prefix=".tmp-probe-", dir=export_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(entries, indent=1, sort_keys=True) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        raise


def probe_texts() -> list[str]:
    """16 deterministic texts of 20-200 words (answers' lengths), distinct."""
    words = _WORDS.split()
    rng = random.Random(24)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(20, 200))) + f" {i}" for i in range(16)]


def run_probe(model: str, onnx_embed: Any, threads_all: int | None = None) -> dict[str, Any]:
    """Time PyTorch's ``encode`` (through the PyTorch adapter) and ``onnx_embed(texts, threads)``
    on :func:`probe_texts` at one thread and at every core (``threads_all``, default the CPU
    count), interleaved, :data:`_ROUNDS` rounds; median seconds per backend and thread count,
    and the verdict ``backend``: ``onnx`` when it is at least as fast at both, else ``torch``."""
    from llm_connect.adapters._sentence_transformers import SentenceTransformerEmbeddingAdapter

    texts = probe_texts()
    counts = sorted({1, threads_all or os.cpu_count() or 1})
    seconds: dict[str, dict[str, float]] = {"onnx": {}, "torch": {}}
    for threads in counts:
        torch_adapter = SentenceTransformerEmbeddingAdapter(model, num_threads=threads)
        torch_adapter.embed(texts[:2])  # load and warm up
        onnx_embed(texts[:2], threads)
        times: dict[str, list[float]] = {"onnx": [], "torch": []}
        for _ in range(_ROUNDS):
            started = time.perf_counter()
            torch_adapter.embed(texts)
            times["torch"].append(time.perf_counter() - started)
            started = time.perf_counter()
            onnx_embed(texts, threads)
            times["onnx"].append(time.perf_counter() - started)
        for name, values in times.items():
            seconds[name][str(threads)] = round(statistics.median(values), 4)
    onnx_wins = all(seconds["onnx"][t] <= seconds["torch"][t] for t in seconds["onnx"])
    result = {
        "backend": "onnx" if onnx_wins else "torch",
        "seconds": seconds,
        "texts": len(texts),
        "rounds": _ROUNDS,
        "probed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _log.info("embedding backend probe (%s CPUs): %s", _cpus(), result)
    return result
