"""Embeddings on the hardware that is there (issue 24): ``embedding:device=...``, the device in
each grade's details and the grade report, the measured choice of the CPU backend, and numpy
arrays from the adapters to the cosine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from llm_connect.adapters import OnnxEmbeddingAdapter, SentenceTransformerEmbeddingAdapter, _probe
from llm_connect.adapters._cached_embedder import CachedEmbedder
from llm_connect.adapters._device import DEVICE_FORMS, check_device, gpu_may_be_present, resolve_device
from llm_connect.adapters._local import default_embedding_adapter, local_embedding_adapter
from llm_connect.errors import ConfigurationError
from llm_connect.grading import JudgeContext, build_judge
from llm_connect.ledger import QualityLedger
from llm_connect.types import LLMResponse, RunConfig
from tests.cli._util import invoke, pair_suite
from tests.fixtures.skips import skip_or_fail

pytestmark = pytest.mark.embeddings

ROOT = Path(__file__).resolve().parents[2]
AGREEMENT_TEXTS = json.loads(
    (ROOT / "tests" / "fixtures" / "embedding_agreement_texts.json").read_text(encoding="utf-8")
)["texts"]
NO_GPU_ENV = "LLM_CONNECT_REQUIRE_NO_GPU"
ONNX_MIN_COSINE = 0.99999
"""Measured on the agreement set: min 0.9999999999984 (float32 rounding only)."""


def _no_gpu() -> bool:
    import torch

    return not torch.cuda.is_available() and not torch.backends.mps.is_available()


@pytest.fixture
def no_gpu() -> None:
    """The calling test checks what a machine without a GPU does: it cannot run where PyTorch sees one."""
    if not _no_gpu():
        skip_or_fail(
            NO_GPU_ENV, "this machine has a GPU PyTorch sees", tests="tests of a machine without a GPU"
        )


needs_no_gpu = pytest.mark.usefixtures("no_gpu")


def _response(text: str) -> LLMResponse:
    return LLMResponse(text=text, model="m", provider="recorded")


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    cosines: np.ndarray = (x * y).sum(axis=1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1))
    return cosines


def test_device_strings_are_checked_and_a_bad_one_lists_the_valid_forms() -> None:
    assert [check_device(d) for d in ("auto", "CPU", " cuda ", "cuda:1", "mps")] == [
        "auto",
        "cpu",
        "cuda",
        "cuda:1",
        "mps",
    ]
    for bad in ("gpu", "cuda:", "cuda:x", "", 3, None):
        with pytest.raises(ConfigurationError, match="is not one of auto, cpu, cuda, cuda:N") as caught:
            check_device(bad)
        assert DEVICE_FORMS in str(caught.value)
    with pytest.raises(ConfigurationError, match=r"embedding:device=tpu: .*auto, cpu, cuda"):
        build_judge("embedding:device=tpu", JudgeContext())


@needs_no_gpu
def test_auto_picks_the_cpu_here_and_cpu_never_imports_torch() -> None:
    assert resolve_device("auto") == "cpu" and resolve_device("cpu") == "cpu"
    code = (
        "import json, sys\n"
        "from llm_connect.adapters._device import resolve_device\n"
        "from llm_connect.grading import JudgeContext, build_judge\n"
        "assert resolve_device('cpu') == 'cpu'\n"
        "judge = build_judge('embedding:device=cpu,backend=onnx', JudgeContext())\n"
        "assert judge.adapter.device == 'cpu'\n"
        "auto = resolve_device('auto')\n"
        "print(json.dumps([auto, 'torch' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    auto, imported = json.loads(out.stdout)
    assert auto == "cpu"
    # auto needs torch only where a GPU driver (or Apple silicon) is there
    assert imported is gpu_may_be_present()


@needs_no_gpu
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "mps"])
def test_a_gpu_pytorch_does_not_see_is_a_configuration_error_naming_what_was_found(device: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        build_judge(f"embedding:device={device}", JudgeContext())
    message = str(caught.value)
    assert f"embedding device {device!r} is not available" in message
    assert "PyTorch" in message and "sees no CUDA device" in message
    with pytest.raises(ConfigurationError, match="is not available"):
        local_embedding_adapter(backend="torch", device=device)
    with pytest.raises(ConfigurationError, match="onnx embedding backend runs on the CPU"):
        local_embedding_adapter(backend="onnx", device=device)


@needs_no_gpu
def test_grade_with_an_unavailable_gpu_exits_2_before_anything_is_graded(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    suite = pair_suite(tmp_path / "s.jsonl", 4)
    args = ["grade", str(suite), "--db", db, "-b", "recorded:baseline", "-c", "recorded:candidate"]
    result = invoke(*args, "--judge", "embedding:device=cuda")
    assert result.exit_code == 2, result.output
    assert "embedding device 'cuda' is not available" in result.output
    if (tmp_path / "ledger.db").exists():
        assert QualityLedger(db).results() == []


def test_the_device_is_a_run_setting_not_part_of_the_grader_id_or_the_spec() -> None:
    auto = build_judge("embedding", JudgeContext())
    pinned = build_judge("embedding:device=cpu", JudgeContext())
    torch_cpu = build_judge("embedding:device=cpu,backend=torch", JudgeContext())
    assert auto.grader_id == pinned.grader_id == torch_cpu.grader_id == "embedding:all-MiniLM-L6-v2"
    spec = torch_cpu.judge(_response("a"), _response("b"), prompt="p", run_config=RunConfig()).details[
        "judge_spec"
    ]
    assert spec["args"] == {"model": "all-MiniLM-L6-v2", "backend": "torch"}  # no device
    rebuilt = build_judge(spec, JudgeContext())  # on any machine: device auto
    assert rebuilt.grader_id == torch_cpu.grader_id
    assert rebuilt.adapter.device == "cpu"  # type: ignore[attr-defined]
    # fp16 runs only on a GPU: on the CPU it is not used, so the spec does not record it
    half = build_judge("embedding:device=cpu,backend=torch,fp16=true", JudgeContext())
    assert half.adapter.fp16 is False  # type: ignore[attr-defined]
    assert "fp16" not in half._spec["args"]  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="fp16"):
        build_judge("embedding:fp16=maybe", JudgeContext())


def test_each_grade_and_the_grade_report_say_which_device_and_backend_ran(tmp_path: Path) -> None:
    for spec, backend in (("embedding:backend=onnx", "onnx"), ("embedding:backend=torch", "torch")):
        judge = build_judge(spec, JudgeContext())
        details = judge.judge(_response("x"), _response("y"), prompt="p", run_config=RunConfig()).details
        assert (details["embedding_device"], details["embedding_backend"]) == ("cpu", backend)
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    suite = pair_suite(tmp_path / "s.jsonl", 4, same=1)
    args = ["grade", str(suite), "--db", db, "-b", "recorded:baseline", "-c", "recorded:candidate"]
    out = invoke(*args, "--judge", "embedding:device=cpu,backend=onnx", "--json")
    assert out.exit_code == 0, out.output
    ran = json.loads(out.stdout)["embeddings"]["ran_on"]
    assert ran == [{"adapter": "onnx:all-MiniLM-L6-v2", "device": "cpu", "backend": "onnx"}]
    human = invoke(*args, "--judge", "embedding:backend=torch")
    assert "from the cache (torch on cpu)" in human.stdout


def test_local_adapters_and_the_cache_return_float32_arrays(tmp_path: Path) -> None:
    texts = ["one text", "another text", "one text"]
    for adapter in (OnnxEmbeddingAdapter(), SentenceTransformerEmbeddingAdapter()):
        vectors = adapter.embed(texts)
        assert isinstance(vectors, np.ndarray) and vectors.dtype == np.float32 and vectors.shape == (3, 384)
        np.testing.assert_array_equal(vectors[0], vectors[2])
        ledger = QualityLedger(f"sqlite:///{tmp_path}/{adapter.provider}.db")
        try:
            cold = CachedEmbedder(adapter, ledger).embed(texts)
            warm_embedder = CachedEmbedder(adapter, ledger)
            warm = warm_embedder.embed(texts)
            assert warm_embedder.counts.cached == 2 and warm_embedder.counts.embedded == 0
            for got in (cold, warm):
                assert isinstance(got, np.ndarray) and got.dtype == np.float32
                np.testing.assert_array_equal(got, vectors)  # bit-identical through the cache
        finally:
            ledger.close()


def test_the_default_backend_agrees_with_raw_sentence_transformers() -> None:
    from llm_connect.adapters._sentence_transformers import _load

    st_model, _ = _load("all-MiniLM-L6-v2", "cpu")
    raw = st_model.encode(AGREEMENT_TEXTS, batch_size=64, convert_to_numpy=True, show_progress_bar=False)
    onnx = _cosines(OnnxEmbeddingAdapter().embed(AGREEMENT_TEXTS), raw)
    assert onnx.min() >= ONNX_MIN_COSINE
    torch_cos = _cosines(SentenceTransformerEmbeddingAdapter().embed(AGREEMENT_TEXTS), raw)
    assert torch_cos.min() >= 1 - 1e-12  # the PyTorch backend is raw encode


def test_the_probe_is_remembered_per_cpu_count_and_the_default_follows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llm_connect.adapters import _onnx
    from llm_connect.adapters._sentence_transformers import resolve_model_source

    monkeypatch.setenv("LLM_CONNECT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(_probe.PROBE_ENV, "1")
    export_dir = _onnx._export_dir(
        "all-MiniLM-L6-v2", Path(resolve_model_source("all-MiniLM-L6-v2")), tmp_path / "onnx"
    )
    export_dir.mkdir(parents=True)
    assert _probe.remembered_backend(export_dir) is None
    assert isinstance(default_embedding_adapter(), OnnxEmbeddingAdapter)  # not probed yet: ONNX
    _probe.record_probe(export_dir, {"backend": "torch"})
    (export_dir / _probe.PROBE_FILE).write_text(
        json.dumps({**json.loads((export_dir / _probe.PROBE_FILE).read_text()), "99999": {"backend": "onnx"}})
    )
    assert _probe.remembered_backend(export_dir) == "torch"
    assert isinstance(default_embedding_adapter(), SentenceTransformerEmbeddingAdapter)
    monkeypatch.setattr(_probe.os, "cpu_count", lambda: 99999)  # another machine, same cache
    assert isinstance(default_embedding_adapter(), OnnxEmbeddingAdapter)
    monkeypatch.setenv(_probe.PROBE_ENV, "0")
    monkeypatch.setattr(_probe.os, "cpu_count", lambda: 2)
    assert isinstance(default_embedding_adapter(), OnnxEmbeddingAdapter)  # probe off: ONNX


def test_run_probe_keeps_onnx_only_when_it_is_at_least_as_fast_at_every_thread_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time as time_module

    from llm_connect.adapters import _sentence_transformers as st_module

    monkeypatch.setattr(
        st_module.SentenceTransformerEmbeddingAdapter, "embed", lambda self, t: time_module.sleep(0.02)
    )
    calls: list[int] = []

    def slow_onnx(texts: list[str], threads: int) -> None:
        calls.append(threads)
        time_module.sleep(0.1)

    result = _probe.run_probe("all-MiniLM-L6-v2", slow_onnx, threads_all=2)
    assert result["backend"] == "torch" and sorted(set(calls)) == [1, 2]
    assert set(result["seconds"]["torch"]) == set(result["seconds"]["onnx"]) == {"1", "2"}
    fast = _probe.run_probe("all-MiniLM-L6-v2", lambda texts, threads: None, threads_all=2)
    assert fast["backend"] == "onnx"
