"""Benchmark (issue 15): the embedding judge against raw ``SentenceTransformer.encode``.

Same process, same texts, alternating within each round: raw ``encode(batch_size=64)``
(torch's thread setting), the embedding judge's ``judge_many`` without a ledger, with a
cold ledger cache (every text encoded and written) and with the cache filled (nothing
encoded), and the ONNX Runtime backend when ``llm-connect[onnx]`` is installed:
``OnnxEmbeddingAdapter.embed`` ("onnx encode") and the judge built with
``embedding:backend=onnx`` ("onnx judge"), both with ``num_threads="auto"``. Sizes 32,
512 and 4,096 distinct texts of 20-60 words; once with the machine idle and once with a
64-way HTTP load (64 threads of this process hammering the tests' loopback server).
Figures are texts per second (best round) and ratios to raw encode; "onnx min cos" is the
lowest cosine between an ONNX vector and raw encode's vector of the same text.

    HF_HUB_OFFLINE=1 python scripts/bench/embedding.py [--sizes 32 512 4096] [--rounds 5 3 1]

``--threads 1 2 0`` (issue 24; 0 = every core) runs a thread sweep instead: per thread count, in
one process, interleaved rounds on the same texts (``--sweep-texts`` of 20-200 words), medians
and ratios to raw ``encode`` at that thread count: raw PyTorch ``encode(batch_size=64)``, the
PyTorch adapter, ``OnnxEmbeddingAdapter`` (the plain dynamo export), the same export after
``onnxruntime.transformers.optimizer.optimize_model(model_type="bert", num_heads=12,
hidden_size=384)`` (an experiment: the library does not ship it), and the default judge's
adapter (``default_embedding_adapter()``: what the measured probe chose). With a GPU PyTorch
sees, a GPU column (raw ``encode`` and the adapter on ``cuda``, fp32 and fp16); without one it
says so and skips it.

    HF_HUB_OFFLINE=1 nice -n 10 python scripts/bench/embedding.py --threads 1 2 0 --rounds 5
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from llm_connect.adapters import OnnxEmbeddingAdapter, SentenceTransformerEmbeddingAdapter  # noqa: E402
from llm_connect.adapters._cached_embedder import CachedEmbedder  # noqa: E402
from llm_connect.adapters._sentence_transformers import _load  # noqa: E402
from llm_connect.grading import JudgePair  # noqa: E402
from llm_connect.grading.judges._embedding import EmbeddingSimilarityJudge  # noqa: E402
from llm_connect.ledger import QualityLedger  # noqa: E402
from llm_connect.types import LLMResponse, RunConfig  # noqa: E402

_VOCABULARY = (
    "the a model answer grade cost quality river mountain bank loan interest policy engine ship code "
    "test data ledger judge cache thread core batch light music history science football election "
    "weather market city garden winter coffee train bridge doctor school forest ocean planet voice"
)
WORDS = _VOCABULARY.split()


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) + f" ({seed}-{i})" for i in range(n)
    ]


def pairs_of(batch: list[str]) -> list[JudgePair]:
    half = len(batch) // 2
    config = RunConfig()
    return [
        JudgePair(
            LLMResponse(text=a, model="big", provider="recorded"),
            LLMResponse(text=b, model="small", provider="recorded"),
            prompt="p",
            run_config=config,
        )
        for a, b in zip(batch[:half], batch[half:], strict=True)
    ]


class HttpLoad:
    """64 threads posting chat completions to the loopback server as fast as it answers."""

    def __init__(self, threads: int = 64) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fixtures.openai_server", "--port", "0", "--no-record"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip().rstrip("/") + "/chat/completions"
        self.stop = threading.Event()
        self.requests = 0
        self.pool = ThreadPoolExecutor(threads)
        for _ in range(threads):
            self.pool.submit(self._hammer)

    def _hammer(self) -> None:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
        while not self.stop.is_set():
            try:
                urllib.request.urlopen(urllib.request.Request(self.url, body, headers), timeout=10).read()
                self.requests += 1
            except OSError:
                time.sleep(0.01)

    def close(self) -> None:
        self.stop.set()
        self.pool.shutdown(wait=True)
        self.proc.terminate()
        self.proc.wait()


def onnx_adapter() -> OnnxEmbeddingAdapter | None:
    """The ONNX Runtime adapter, exported (first run: into the cache directory) and with both
    of its sessions (one thread, every core) loaded, or ``None`` without ``llm-connect[onnx]``."""
    adapter = OnnxEmbeddingAdapter()
    try:
        started = time.perf_counter()
        adapter.load()
        adapter.embed(texts(2, seed=1))
        adapter.embed(texts(64, seed=2))
    except Exception as exc:  # the optional packages are missing
        print(f"onnx backend unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        return None
    print(f"onnx: {adapter.model_path} ready in {time.perf_counter() - started:.1f} s")
    return adapter


def _min_cosine(a: Any, b: Any) -> float:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(((x * y).sum(1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1))).min())


def one_round(
    st_model: Any,
    plain: EmbeddingSimilarityJudge,
    batch: list[str],
    onnx: OnnxEmbeddingAdapter | None,
) -> dict[str, float]:
    """Texts per second of each way of embedding ``batch``, one after the other."""
    pairs = pairs_of(batch)
    rates: dict[str, float] = {}
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ledger = QualityLedger(f"sqlite:///{tmp}/bench.db")
        cached = EmbeddingSimilarityJudge(CachedEmbedder(SentenceTransformerEmbeddingAdapter(), ledger))
        runs: list[tuple[str, Callable[[], object]]] = [
            ("raw encode", lambda: st_model.encode(batch, batch_size=64, show_progress_bar=False)),
            ("judge", lambda: plain.judge_many(pairs)),
            ("judge cold cache", lambda: cached.judge_many(pairs)),
            ("judge cached", lambda: cached.judge_many(pairs)),
        ]
        if onnx is not None:
            onnx_judge = EmbeddingSimilarityJudge(onnx)
            runs.append(("onnx encode", lambda: onnx.embed(batch)))
            runs.append(("onnx judge", lambda: onnx_judge.judge_many(pairs)))
        for name, fn in runs:
            start = time.perf_counter()
            out[name] = fn()
            rates[name] = len(batch) / (time.perf_counter() - start)
        ledger.close()
    if onnx is not None:
        rates["onnx min cos"] = _min_cosine(out["onnx encode"], out["raw encode"])
    return rates


def measure(
    sizes: list[int], rounds: list[int], label: str, onnx: OnnxEmbeddingAdapter | None
) -> dict[str, dict[str, float]]:
    st_model, _ = _load("all-MiniLM-L6-v2", "cpu")
    plain = EmbeddingSimilarityJudge(SentenceTransformerEmbeddingAdapter())
    out: dict[str, dict[str, float]] = {}
    for size, n_rounds in zip(sizes, rounds, strict=True):
        best: dict[str, float] = {}
        for r in range(n_rounds):
            batch = texts(size, seed=size * 1000 + r + (500 if label == "load" else 0))
            for name, rate in one_round(st_model, plain, batch, onnx).items():
                if name == "onnx min cos":  # the worst agreement, not the best
                    best[name] = min(best.get(name, 1.0), rate)
                else:
                    best[name] = max(best.get(name, 0.0), rate)
        raw = best["raw encode"]
        out[str(size)] = best
        cells = "  ".join(
            f"{k} {v:.9f}" if k == "onnx min cos" else f"{k} {v:,.0f}/s ({v / raw:.2f}x)"
            for k, v in best.items()
        )
        print(f"[{label}] {size:>5} texts: {cells}", flush=True)
    return out


def long_texts(n: int, seed: int) -> list[str]:
    """``n`` distinct texts of 20-200 words (answers' lengths; issue 24's benchmark)."""
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 200))) + f" ({seed}-{i})" for i in range(n)
    ]


def _optimized_session(path: Path, threads: int) -> Any:
    """An onnxruntime session on the bert-optimized copy of the export (fused LayerNorm/GELU)."""
    import onnxruntime
    from onnxruntime.transformers import optimizer

    target = Path(tempfile.gettempdir()) / f"llm-connect-bench-{path.parent.name}-opt.onnx"
    if not target.is_file():
        optimized = optimizer.optimize_model(str(path), model_type="bert", num_heads=12, hidden_size=384)
        print(
            f"optimizer fused: { {k: v for k, v in optimized.get_fused_operator_statistics().items() if v} }"
        )
        optimized.save_model_to_file(str(target))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(target), options, providers=["CPUExecutionProvider"])


def _optimized_embed(onnx: OnnxEmbeddingAdapter, session: Any, batch: list[str]) -> Any:
    """The ONNX adapter's pipeline (tokenize, sort, pad, mean-pool, normalize) on ``session``."""
    from llm_connect.adapters._onnx_pipeline import batch_arrays

    runtime = onnx._runtime()
    encodings = runtime.tokenizer.encode_batch(batch)
    order = sorted(range(len(batch)), key=lambda i: -len(encodings[i].ids))
    out = np.empty((len(batch), 384), dtype=np.float32)
    for start in range(0, len(order), 64):
        rows = order[start : start + 64]
        arrays = batch_arrays([encodings[i] for i in rows], runtime.pad_id)
        hidden = session.run(None, {name: arrays[name] for name in runtime.inputs})[0]
        mask = arrays["attention_mask"].astype(np.float32)[:, :, None]
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        out[rows] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return out


def sweep(thread_counts: list[int], n_texts: int, rounds: int) -> dict[str, dict[str, float]]:
    """Texts per second (median of ``rounds``) of each way of embedding, per thread count."""
    import statistics

    import torch

    from llm_connect.adapters import default_embedding_adapter

    st_model, _ = _load("all-MiniLM-L6-v2", "cpu")
    default = default_embedding_adapter()
    print(f"default adapter here: {default!r} (cpus {os.cpu_count()})")
    out: dict[str, dict[str, float]] = {}
    for threads in thread_counts:
        n = threads or os.cpu_count() or 1
        torch.set_num_threads(n)
        onnx = OnnxEmbeddingAdapter(num_threads=n)
        optimized = _optimized_session(onnx.model_path, n)
        ways: dict[str, Callable[[list[str]], object]] = {
            "raw encode": lambda b: st_model.encode(b, batch_size=64, show_progress_bar=False),
            "torch adapter": SentenceTransformerEmbeddingAdapter(num_threads=n).embed,
            "onnx plain": onnx.embed,
            "onnx optimized": functools.partial(_optimized_embed, onnx, optimized),
            "default": type(default)(num_threads=n).embed,  # type: ignore[call-arg]
        }
        rates: dict[str, list[float]] = {name: [] for name in ways}
        for fn in ways.values():
            fn(long_texts(4, seed=7))  # warm up
        cos = 1.0
        for r in range(rounds):
            batch = long_texts(n_texts, seed=24_000 + r)
            got: dict[str, object] = {}
            for name, fn in ways.items():
                start = time.perf_counter()
                got[name] = fn(batch)
                rates[name].append(len(batch) / (time.perf_counter() - start))
            cos = min(cos, _min_cosine(got["onnx optimized"], got["raw encode"]))
        med = {name: statistics.median(v) for name, v in rates.items()}
        raw = med["raw encode"]
        cells = "  ".join(f"{k} {v:,.1f}/s ({v / raw:.2f}x)" for k, v in med.items())
        print(
            f"[threads {n}] {n_texts} texts x {rounds} rounds: {cells}  optimized min cos {cos:.9f}",
            flush=True,
        )
        out[str(n)] = {**med, "optimized min cos": cos}
    out["gpu"] = gpu_column(n_texts, rounds)
    return out


def gpu_column(n_texts: int, rounds: int) -> dict[str, float]:
    """Raw ``encode`` and the adapter on ``cuda`` (fp32, fp16), or ``{}`` with a note without a GPU."""
    import statistics

    import torch

    if not torch.cuda.is_available():
        print("GPU column skipped: PyTorch sees no CUDA device on this machine (GPU path untested here)")
        return {}
    from sentence_transformers import SentenceTransformer

    from llm_connect.adapters._sentence_transformers import resolve_model_source

    raw = SentenceTransformer(resolve_model_source("all-MiniLM-L6-v2"), device="cuda")
    ways: dict[str, Callable[[list[str]], object]] = {
        "gpu raw encode": lambda b: raw.encode(b, batch_size=64, show_progress_bar=False),
        "gpu adapter": SentenceTransformerEmbeddingAdapter(device="cuda").embed,
        "gpu adapter fp16": SentenceTransformerEmbeddingAdapter(device="cuda", fp16=True).embed,
    }
    rates: dict[str, list[float]] = {name: [] for name in ways}
    for fn in ways.values():
        fn(long_texts(4, seed=7))
    for r in range(rounds):
        batch = long_texts(n_texts, seed=25_000 + r)
        for name, fn in ways.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            fn(batch)
            torch.cuda.synchronize()
            rates[name].append(len(batch) / (time.perf_counter() - start))
    med = {name: statistics.median(v) for name, v in rates.items()}
    base = med["gpu raw encode"]
    print(
        f"[gpu {torch.cuda.get_device_name()}] "
        + "  ".join(f"{k} {v:,.0f}/s ({v / base:.2f}x)" for k, v in med.items())
    )
    return med


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 512, 4096])
    parser.add_argument("--rounds", type=int, nargs="+", default=[5, 3, 1])
    parser.add_argument("--no-load", action="store_true", help="skip the run under HTTP load")
    parser.add_argument(
        "--threads", type=int, nargs="+", help="thread sweep instead (0 = every core), e.g. 1 2 0"
    )
    parser.add_argument("--sweep-texts", type=int, default=128, help="texts per sweep round")
    args = parser.parse_args()
    if args.threads:
        import onnxruntime
        import torch

        print(f"cores {os.cpu_count()}, torch {torch.__version__}, onnxruntime {onnxruntime.__version__}")
        print(json.dumps(sweep(args.threads, args.sweep_texts, args.rounds[0])))
        return
    import torch

    print(f"cores {os.cpu_count()}, torch threads {torch.get_num_threads()}, torch {torch.__version__}")
    _load("all-MiniLM-L6-v2", "cpu")[0].encode(["warm up"])
    onnx = onnx_adapter()
    if onnx is not None:
        import onnxruntime

        print(f"onnxruntime {onnxruntime.__version__}")
    results = {"idle": measure(args.sizes, args.rounds, "idle", onnx)}
    if not args.no_load:
        load = HttpLoad()
        time.sleep(1.0)
        started, count = time.perf_counter(), load.requests
        try:
            results["load"] = measure(args.sizes, args.rounds, "load", onnx)
        finally:
            rate = (load.requests - count) / (time.perf_counter() - started)
            load.close()
        print(f"HTTP load: {rate:,.0f} requests/s during the loaded run")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
