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
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 512, 4096])
    parser.add_argument("--rounds", type=int, nargs="+", default=[5, 3, 1])
    parser.add_argument("--no-load", action="store_true", help="skip the run under HTTP load")
    args = parser.parse_args()
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
