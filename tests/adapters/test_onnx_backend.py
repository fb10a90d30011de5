"""OnnxEmbeddingAdapter (``embedding:backend=onnx``): the packaged all-MiniLM-L6-v2 exported to ONNX
and run by onnxruntime, against the PyTorch (sentence-transformers) adapter.

The model is exported once per test session into the session's llm-connect cache directory
(``LLM_CONNECT_CACHE_DIR``, ``tests/conftest.py``); only the corrupt-model test exports a second
time.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from llm_connect.adapters import OnnxEmbeddingAdapter, SentenceTransformerEmbeddingAdapter
from llm_connect.adapters import _onnx as onnx_module
from llm_connect.adapters._cached_embedder import CachedEmbedder
from llm_connect.adapters._onnx_pipeline import batch_arrays
from llm_connect.errors import ConfigurationError
from llm_connect.grading import JudgeContext, build_judge
from llm_connect.ledger import QualityLedger
from llm_connect.types import LLMResponse, RunConfig

pytestmark = pytest.mark.embeddings

ROOT = Path(__file__).resolve().parents[2]
AGREEMENT_TEXTS = json.loads(
    (ROOT / "tests" / "fixtures" / "embedding_agreement_texts.json").read_text(encoding="utf-8")
)["texts"]
MIN_COSINE = 0.999


@pytest.fixture(scope="session")
def onnx_cache(llm_connect_cache_dir: Path) -> Path:
    """The session's llm-connect cache directory, holding its one export of all-MiniLM-L6-v2
    (made here, or by an earlier test that embedded with the default backend)."""
    before = onnx_module._exports
    OnnxEmbeddingAdapter().load()
    assert onnx_module._exports <= before + 1
    assert len(list((llm_connect_cache_dir / "onnx").iterdir())) == 1
    return llm_connect_cache_dir


@pytest.fixture(autouse=True)
def _exported(onnx_cache: Path) -> None:
    assert os.environ["LLM_CONNECT_CACHE_DIR"] == str(onnx_cache)


@pytest.fixture(scope="module")
def torch_adapter() -> SentenceTransformerEmbeddingAdapter:
    adapter = SentenceTransformerEmbeddingAdapter()
    adapter.load()
    return adapter


def _export_dir(onnx_cache: Path) -> Path:
    (found,) = (onnx_cache / "onnx").iterdir()
    return found


def _cosines(a: list[list[float]], b: list[list[float]]) -> np.ndarray:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    cosines: np.ndarray = (x * y).sum(axis=1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1))
    return cosines


def test_the_agreement_set_is_varied_and_long_enough() -> None:
    from tokenizers import Tokenizer

    from llm_connect.adapters._sentence_transformers import resolve_model_source

    tokenizer = Tokenizer.from_file(str(Path(resolve_model_source("all-MiniLM-L6-v2")) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()  # tokenizer.json pads to 128
    lengths = [len(tokenizer.encode(t).ids) for t in AGREEMENT_TEXTS]
    assert len(AGREEMENT_TEXTS) >= 40 and len(set(AGREEMENT_TEXTS)) == len(AGREEMENT_TEXTS)
    assert sum(n > 256 for n in lengths) >= 5  # longer than the model's 256-token limit
    assert sum(n <= 8 for n in lengths) >= 5  # and very short ones (the empty text too)
    assert "" in AGREEMENT_TEXTS
    assert any("[tool call]" in t for t in AGREEMENT_TEXTS)
    assert any("def " in t for t in AGREEMENT_TEXTS) and any("SELECT" in t for t in AGREEMENT_TEXTS)
    assert sum(any(ord(c) > 0x2000 for c in t) for t in AGREEMENT_TEXTS) >= 5


def test_onnx_vectors_agree_with_pytorch_on_every_text(
    torch_adapter: SentenceTransformerEmbeddingAdapter,
) -> None:
    cosines = _cosines(OnnxEmbeddingAdapter().embed(AGREEMENT_TEXTS), torch_adapter.embed(AGREEMENT_TEXTS))
    worst = int(np.argmin(cosines))
    assert cosines.min() >= MIN_COSINE, f"text {worst} ({AGREEMENT_TEXTS[worst][:40]!r}): {cosines[worst]}"
    # measured: min 0.9999999999984, mean 0.9999999999996 (float32 rounding only)
    assert cosines.mean() >= 0.99999


def test_tokenization_is_the_sentence_transformers_models(
    torch_adapter: SentenceTransformerEmbeddingAdapter,
) -> None:
    from llm_connect.adapters._sentence_transformers import _load

    st_model, _ = _load("all-MiniLM-L6-v2", "cpu")
    prepare = getattr(st_model, "preprocess", None) or st_model.tokenize
    want = prepare(AGREEMENT_TEXTS)
    runtime = onnx_module._runtime("all-MiniLM-L6-v2", onnx_module.onnx_cache_dir())
    got = batch_arrays(runtime.tokenizer.encode_batch(AGREEMENT_TEXTS), runtime.pad_id)
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        np.testing.assert_array_equal(got[name], want[name].numpy(), err_msg=name)
    assert got["input_ids"].shape[1] == 256 == runtime.pipeline.max_length  # truncated as the model
    assert runtime.pipeline.normalize


def test_building_the_adapter_and_the_judge_imports_nothing_heavy() -> None:
    heavy = ("onnxruntime", "onnx", "onnxscript", "tokenizers", "torch", "transformers")
    code = (
        "import json, sys\n"
        "from llm_connect.adapters import OnnxEmbeddingAdapter\n"
        "from llm_connect.grading import JudgeContext, build_judge\n"
        "OnnxEmbeddingAdapter(); build_judge('embedding:backend=onnx', JudgeContext())\n"
        "from llm_connect.adapters import default_embedding_adapter\n"
        "assert default_embedding_adapter().provider == 'onnx'\n"
        "assert build_judge('embedding', JudgeContext()).adapter.provider == 'onnx'\n"
        f"print(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout) == []


def test_embed_returns_one_384_float_vector_per_text_each_distinct_text_once() -> None:
    adapter = OnnxEmbeddingAdapter()
    vectors = adapter.embed(["hello", "world", "hello"])
    assert len(vectors) == 3
    assert isinstance(vectors, np.ndarray) and vectors.dtype == np.float32 and vectors.shape == (3, 384)
    np.testing.assert_array_equal(vectors[0], vectors[2])
    assert abs(float(np.linalg.norm(vectors[1])) - 1.0) < 1e-5  # the Normalize module
    assert len(adapter.embed([])) == 0
    with pytest.raises(TypeError, match="text 1"):
        adapter.embed(["a", 3])  # type: ignore[list-item]


def test_adapter_id_and_provider_are_not_the_pytorch_adapters() -> None:
    adapter = OnnxEmbeddingAdapter()
    assert (adapter.adapter_id, adapter.provider, adapter.model) == (
        "onnx:all-MiniLM-L6-v2",
        "onnx",
        "all-MiniLM-L6-v2",
    )
    assert OnnxEmbeddingAdapter("sentence-transformers/all-MiniLM-L6-v2").adapter_id == adapter.adapter_id
    assert adapter.adapter_id != SentenceTransformerEmbeddingAdapter().adapter_id


def test_the_two_backends_never_share_embedding_cache_entries(
    tmp_path: Path, torch_adapter: SentenceTransformerEmbeddingAdapter
) -> None:
    onnx_cached = CachedEmbedder(OnnxEmbeddingAdapter())
    torch_cached = CachedEmbedder(SentenceTransformerEmbeddingAdapter())
    assert onnx_cached.cache_id == "onnx:all-MiniLM-L6-v2"
    assert torch_cached.cache_id == "sentence-transformers:all-MiniLM-L6-v2"
    ledger = QualityLedger(f"sqlite:///{tmp_path}/ledger.db")
    try:
        texts = ["a text both backends embed", "and another one"]
        onnx_vectors = CachedEmbedder(OnnxEmbeddingAdapter(), ledger).embed(texts)
        from_torch = CachedEmbedder(SentenceTransformerEmbeddingAdapter(), ledger)
        torch_vectors = from_torch.embed(texts)
        assert (from_torch.counts.embedded, from_torch.counts.cached) == (2, 0)  # not ONNX's vectors
        np.testing.assert_array_equal(torch_vectors, torch_adapter.embed(texts))  # a fresh PyTorch encode
        again = CachedEmbedder(OnnxEmbeddingAdapter(), ledger)
        np.testing.assert_array_equal(again.embed(texts), onnx_vectors)
        assert again.counts.cached == 2
        assert not np.array_equal(onnx_vectors, torch_vectors)  # the invariant is needed: the floats differ
    finally:
        ledger.close()


def test_the_export_lands_in_the_cache_dir_and_another_process_reuses_it(onnx_cache: Path) -> None:
    export = _export_dir(onnx_cache)
    assert re.fullmatch(r"all-MiniLM-L6-v2-[0-9a-f]{16}", export.name)
    assert sorted(p.name for p in export.iterdir()) == ["meta.json", "model.onnx"]
    meta = json.loads((export / "meta.json").read_text())
    import onnx
    import torch

    assert meta["opset"] == onnx_module.ONNX_OPSET
    assert (meta["torch"], meta["onnx"]) == (torch.__version__, onnx.__version__)
    assert meta["max_abs_diff_vs_torch"] < 1e-4
    assert OnnxEmbeddingAdapter().model_path == export / "model.onnx"
    stamp = (export / "model.onnx").stat().st_mtime_ns
    before = onnx_module._exports
    OnnxEmbeddingAdapter(num_threads=2).embed(["second adapter"])  # another instance: no export
    assert onnx_module._exports == before
    code = (
        "import json, sys\n"
        "from llm_connect.adapters import OnnxEmbeddingAdapter\n"
        "from llm_connect.adapters import _onnx\n"
        "vector = OnnxEmbeddingAdapter().embed(['hello'])[0].tolist()\n"
        "print(json.dumps({'exports': _onnx._exports, 'torch': 'torch' in sys.modules, 'v': vector}))"
    )
    env = {**os.environ, "LLM_CONNECT_CACHE_DIR": str(onnx_cache), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env
    )
    # library code prints nothing (onnxruntime's own start-up warnings, on some hosts, aside)
    assert [line for line in out.stderr.splitlines() if ":onnxruntime:" not in line] == []
    seen = json.loads(out.stdout)
    assert seen["exports"] == 0 and seen["torch"] is False  # a cached model needs no torch
    assert seen["v"] == OnnxEmbeddingAdapter().embed(["hello"])[0].tolist()
    assert (export / "model.onnx").stat().st_mtime_ns == stamp
    assert [p.name for p in (onnx_cache / "onnx").iterdir()] == [export.name]  # no temporary left


def test_a_corrupt_cached_model_is_exported_again_not_used(onnx_cache: Path, tmp_path: Path) -> None:
    good = _export_dir(onnx_cache)
    cache = tmp_path / "onnx"
    copy = cache / good.name
    shutil.copytree(good, copy)
    size = (copy / "model.onnx").stat().st_size
    with (copy / "model.onnx").open("r+b") as fh:
        fh.truncate(size // 2)
    before = onnx_module._exports
    vector = OnnxEmbeddingAdapter(cache_dir=cache).embed(["hello"])[0]
    assert onnx_module._exports == before + 1
    assert (copy / "model.onnx").stat().st_size == size
    assert sorted(p.name for p in cache.iterdir()) == [good.name]  # the broken copy is gone
    np.testing.assert_allclose(vector, OnnxEmbeddingAdapter().embed(["hello"])[0], atol=1e-6)


def test_the_export_is_published_by_one_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    final = tmp_path / "onnx" / "m-0123"
    seen: list[Path] = []

    def fake_export(pipeline: object, tokenizer: object, target: Path) -> dict[str, object]:
        seen.append(target)
        assert target.parent == final.parent and target.name.startswith(".tmp-m-0123-")
        assert not final.exists()  # nothing is visible under the final name while writing
        (target / "model.onnx").write_bytes(b"new")
        (target / "meta.json").write_text("{}")
        return {}

    monkeypatch.setattr(onnx_module, "_export", fake_export)
    onnx_module._export_into(None, None, final, replace=False)  # type: ignore[arg-type]
    assert (final / "model.onnx").read_bytes() == b"new" and not seen[0].exists()

    def raced_export(pipeline: object, tokenizer: object, target: Path) -> dict[str, object]:
        fake_export(pipeline, tokenizer, target)
        final.mkdir()  # another process publishes first
        (final / "model.onnx").write_bytes(b"theirs")
        (final / "meta.json").write_text("{}")
        return {}

    shutil.rmtree(final)
    monkeypatch.setattr(onnx_module, "_export", raced_export)
    onnx_module._export_into(None, None, final, replace=False)  # type: ignore[arg-type]
    assert (final / "model.onnx").read_bytes() == b"theirs"  # theirs is kept, ours dropped
    assert [p.name for p in final.parent.iterdir()] == ["m-0123"]


def test_the_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLM_CONNECT_CACHE_DIR", str(tmp_path / "mine"))
    assert onnx_module.onnx_cache_dir() == tmp_path / "mine" / "onnx"
    monkeypatch.delenv("LLM_CONNECT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert onnx_module.onnx_cache_dir() == tmp_path / "xdg" / "llm-connect" / "onnx"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert onnx_module.onnx_cache_dir() == Path.home() / ".cache" / "llm-connect" / "onnx"


def test_auto_threads_one_for_small_or_live_batches_every_core_for_large_offline_ones() -> None:
    from llm_connect.adapters._activity import model_call
    from llm_connect.adapters._sentence_transformers import AUTO_MIN_TEXTS

    adapter = OnnxEmbeddingAdapter()
    assert adapter.threads_for(2) == 1 and adapter.threads_for(AUTO_MIN_TEXTS) is None
    with model_call():
        assert adapter.threads_for(4096) == 1
    assert OnnxEmbeddingAdapter(num_threads=3).threads_for(2) == 3
    texts = [f"sentence number {i} about a river bank" for i in range(AUTO_MIN_TEXTS)]
    large = adapter.embed(texts)
    small = adapter.embed(texts[:3])
    runtime = onnx_module._runtime("all-MiniLM-L6-v2", onnx_module.onnx_cache_dir())
    assert {0, 1} <= set(runtime.sessions)  # one session per thread count, made on first use
    np.testing.assert_allclose(large[:3], small, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs", [{"num_threads": 0}, {"num_threads": True}, {"batch_size": 0}, {"model": ""}]
)
def test_bad_options_are_configuration_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        OnnxEmbeddingAdapter(**kwargs)  # type: ignore[arg-type]


def _model_dir(tmp_path: Path, modules: list[dict[str, object]], pooling: dict[str, object]) -> Path:
    model = tmp_path / "model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "modules.json").write_text(json.dumps(modules))
    (model / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return model


TRANSFORMER = {"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"}
POOLING = {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
MEAN = {"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}


@pytest.mark.parametrize(
    ("modules", "pooling", "named"),
    [
        (
            [
                TRANSFORMER,
                POOLING,
                {"idx": 2, "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
            ],
            MEAN,
            "Dense",
        ),
        (
            [TRANSFORMER, POOLING, {"idx": 2, "path": "", "type": "my_package.Custom"}],
            MEAN,
            "my_package.Custom",
        ),
        (
            [TRANSFORMER, POOLING],
            {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False},
            "cls_token",
        ),
        ([TRANSFORMER, POOLING], {"pooling_mode": "lasttoken"}, "lasttoken"),
    ],
    ids=["dense", "custom", "cls-pooling", "lasttoken"],
)
def test_a_model_of_unsupported_modules_is_refused(
    tmp_path: Path, modules: list[dict[str, object]], pooling: dict[str, object], named: str
) -> None:
    model = _model_dir(tmp_path, modules, pooling)
    with pytest.raises(ConfigurationError, match=re.escape(named)) as caught:
        OnnxEmbeddingAdapter(str(model), cache_dir=tmp_path / "cache").load()
    assert "backend=torch" in str(caught.value)
    assert not (tmp_path / "cache").exists()  # refused before any export


def test_a_model_that_is_not_a_local_sentence_transformers_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"modules\.json"):
        OnnxEmbeddingAdapter(str(tmp_path), cache_dir=tmp_path / "cache").load()
    with pytest.raises(ConfigurationError, match="never downloads"):
        OnnxEmbeddingAdapter("some-org/some-hub-model", cache_dir=tmp_path / "cache").load()


def test_an_unknown_backend_is_a_configuration_error_naming_it_and_the_allowed_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown backend 'tensorflow' \(allowed: torch, onnx\)"):
        build_judge("embedding:backend=tensorflow", JudgeContext())
    with pytest.raises(ConfigurationError, match="local models"):
        build_judge("embedding:model=openai:text-embedding-3-small,backend=onnx", JudgeContext())


def test_without_onnxruntime_backend_onnx_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if it were not installed
    hint = re.escape("pip install 'llm-connect[embeddings]'")
    with pytest.raises(ConfigurationError, match=hint):
        build_judge("embedding:backend=onnx", JudgeContext())
    with pytest.raises(ConfigurationError, match=hint):
        OnnxEmbeddingAdapter(cache_dir=tmp_path / "cache").embed(["x"])


def _response(text: str) -> LLMResponse:
    return LLMResponse(text=text, model="m", provider="recorded")


def test_the_onnx_judge_scores_a_pair_as_the_torch_judge_does() -> None:
    baseline = _response("You can return the item within 14 days for a full refund.")
    candidate = _response("Refunds are available if you send it back inside two weeks.")
    onnx_judge = build_judge("embedding:backend=onnx", JudgeContext())
    torch_judge = build_judge("embedding:backend=torch", JudgeContext())
    default_judge = build_judge("embedding", JudgeContext())
    results = [
        j.judge(baseline, candidate, prompt="p", run_config=RunConfig())
        for j in (onnx_judge, torch_judge, default_judge)
    ]
    onnx_result, torch_result, default_result = results
    assert 0.5 < torch_result.quality_score < 1.0
    assert abs(onnx_result.quality_score - torch_result.quality_score) < 1e-5
    assert default_result.quality_score == onnx_result.quality_score  # ONNX is the default
    assert onnx_result.grader_id == torch_result.grader_id == "embedding:all-MiniLM-L6-v2"
    assert onnx_result.details["embedding_adapter"] == "onnx:all-MiniLM-L6-v2"
    assert default_result.details["embedding_adapter"] == "onnx:all-MiniLM-L6-v2"
    assert torch_result.details["embedding_adapter"] == "sentence-transformers:all-MiniLM-L6-v2"
    specs = [r.details["judge_spec"] for r in results]
    assert [s["args"] for s in specs] == [
        {"model": "all-MiniLM-L6-v2", "backend": "onnx"},
        {"model": "all-MiniLM-L6-v2", "backend": "torch"},
        {"model": "all-MiniLM-L6-v2"},  # no backend asked for: rebuilds the default
    ]
    rebuilt = [build_judge(spec, JudgeContext()).adapter.adapter_id for spec in specs]  # type: ignore[attr-defined]
    assert rebuilt == [
        "onnx:all-MiniLM-L6-v2",
        "sentence-transformers:all-MiniLM-L6-v2",
        "onnx:all-MiniLM-L6-v2",
    ]


# --- ONNX Runtime is the default backend where it can run; PyTorch otherwise ------------------------

ONNX_LOG = "llm_connect.adapters.onnx"


@pytest.fixture
def fresh_warnings(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> pytest.LogCaptureFixture:
    """Fallback warnings captured, as if this process had given none yet."""
    monkeypatch.setattr(onnx_module, "_fallbacks_warned", set())
    caplog.set_level(logging.WARNING, logger=ONNX_LOG)
    return caplog


def _fallbacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == ONNX_LOG and r.levelno == logging.WARNING]


def test_the_default_embedder_is_onnx_where_onnxruntime_is_available(
    fresh_warnings: pytest.LogCaptureFixture, persona_file: Path
) -> None:
    from llm_connect.adapters import default_embedding_adapter
    from llm_connect.stability._analyze import _default_embedder

    assert onnx_module.onnx_unusable_reason() is None
    assert isinstance(default_embedding_adapter(), OnnxEmbeddingAdapter)
    assert _default_embedder().adapter_id == "onnx:all-MiniLM-L6-v2"  # stability's default
    context = JudgeContext()
    shared = context.embedding_adapter()
    assert shared.adapter_id == "onnx:all-MiniLM-L6-v2"
    judge = build_judge("embedding", context)
    persona = build_judge(f"persona:{persona_file}", context)
    assert judge.adapter is shared  # type: ignore[attr-defined]
    assert persona.scorer.embedder is shared  # type: ignore[attr-defined]  # one embedder per context
    assert build_judge("embedding:backend=onnx", context).adapter is shared  # type: ignore[attr-defined]
    torch_judge = build_judge("embedding:backend=torch", context)
    assert torch_judge.adapter.adapter_id == "sentence-transformers:all-MiniLM-L6-v2"  # type: ignore[attr-defined]
    assert _fallbacks(fresh_warnings) == []


@pytest.fixture
def persona_file(tmp_path: Path) -> Path:
    path = tmp_path / "voice.yaml"
    path.write_text(
        "name: support\nexamples:\n  - Happy to help! Let me look into that for you.\n"
        "  - Thanks for reaching out, here is what I found.\n",
        encoding="utf-8",
    )
    return path


def test_without_onnxruntime_the_default_falls_back_to_pytorch_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, fresh_warnings: pytest.LogCaptureFixture
) -> None:
    from llm_connect.adapters import default_embedding_adapter

    monkeypatch.setattr(onnx_module, "onnxruntime_available", lambda: False)
    judges = [build_judge("embedding", JudgeContext()) for _ in range(3)]
    assert {j.adapter.adapter_id for j in judges} == {"sentence-transformers:all-MiniLM-L6-v2"}  # type: ignore[attr-defined]
    assert isinstance(default_embedding_adapter(), SentenceTransformerEmbeddingAdapter)
    torch_judge = build_judge("embedding:backend=torch", JudgeContext())
    assert torch_judge.adapter.adapter_id == "sentence-transformers:all-MiniLM-L6-v2"  # type: ignore[attr-defined]
    (warning,) = _fallbacks(fresh_warnings)  # once per process, however many defaults are built
    assert "all-MiniLM-L6-v2 runs on PyTorch, not on ONNX Runtime" in warning
    assert "onnxruntime is not installed" in warning and "llm-connect[embeddings]" in warning
    with pytest.raises(ConfigurationError, match="needs onnxruntime"):
        build_judge("embedding:backend=onnx", JudgeContext())  # asked for: raises, never falls back
    spec = (
        judges[0]
        .judge(_response("a"), _response("b"), prompt="p", run_config=RunConfig())
        .details["judge_spec"]
    )
    assert spec["args"] == {"model": "all-MiniLM-L6-v2"}  # the default, not backend=torch


def test_with_onnxruntime_unimportable_a_grade_runs_on_pytorch_and_says_so_once(tmp_path: Path) -> None:
    suite = tmp_path / "suite.jsonl"
    rows = [
        {
            "id": f"c{i}",
            "prompt": f"question {i}",
            "baseline_response": {"text": f"answer {i}", "model": "big"},
            "candidate_response": {"text": f"other answer {i}", "model": "small"},
        }
        for i in range(3)
    ]
    suite.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code = (
        "import sys\n"
        "sys.modules['onnxruntime'] = None  # as if it were not installed\n"
        "from llm_connect.cli import main\n"
        f"sys.argv = ['llm-connect', 'grade', {str(suite)!r}, '--db', 'sqlite:///{tmp_path}/l.db', "
        "'-b', 'recorded:baseline', '-c', 'recorded:candidate', '--judge', 'embedding', '--json']\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["embeddings"].items() >= {"embedded": 6, "cached": 0}.items()
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and "runs on PyTorch, not on ONNX Runtime" in lines[0], out.stderr
    ledger = QualityLedger(f"sqlite:///{tmp_path}/l.db")
    try:
        (row, *_) = list(ledger.results(limit=1))
        assert row.details["embedding_adapter"] == "sentence-transformers:all-MiniLM-L6-v2"
    finally:
        ledger.close()


def test_a_refused_model_or_an_unwritable_cache_falls_back_to_pytorch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_warnings: pytest.LogCaptureFixture
) -> None:
    from llm_connect.adapters import default_embedding_adapter

    dense = {"idx": 2, "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    model = _model_dir(tmp_path, [TRANSFORMER, POOLING, dense], MEAN)
    judge = build_judge(f"embedding:model={model}", JudgeContext())  # a model ONNX refuses
    assert judge.adapter.adapter_id == f"sentence-transformers:{model}"  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="Dense"):
        build_judge(f"embedding:model={model},backend=onnx", JudgeContext()).adapter.embed(["x"])  # type: ignore[attr-defined]

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("LLM_CONNECT_CACHE_DIR", str(blocker / "cache"))  # cannot be created
    assert isinstance(default_embedding_adapter(), SentenceTransformerEmbeddingAdapter)
    first, second = _fallbacks(fresh_warnings)
    assert "Dense" in first
    assert "cannot be written" in second and str(blocker) in second
    assert not (tmp_path / "cache").exists()


def test_an_existing_export_needs_no_exporter_and_no_writable_cache(
    onnx_cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fresh_warnings: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(onnx_module, "_EXPORT_NEEDS", ("no_such_exporter_module",))
    monkeypatch.setattr(onnx_module, "_writable", lambda directory: False)
    assert onnx_module.onnx_unusable_reason() is None  # the session's export is there
    reason = onnx_module.onnx_unusable_reason(cache_dir=tmp_path / "empty")
    assert reason is not None and "no_such_exporter_module" in reason
    assert fresh_warnings.records == []


@pytest.mark.embeddings
def test_a_failed_export_names_the_model_and_the_way_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An exporter that fails (a torch/onnxscript mismatch on some machine) is a ConfigurationError
    naming the model and pointing to backend=torch, and leaves nothing under the cache dir."""
    import torch

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("exporter exploded")

    monkeypatch.setattr(torch.onnx, "export", broken)
    adapter = OnnxEmbeddingAdapter(cache_dir=tmp_path / "cache")
    with pytest.raises(ConfigurationError, match=r"exporting model 'all-MiniLM-L6-v2' failed.*backend=torch"):
        adapter.embed(["a text"])
    leftovers = list((tmp_path / "cache").rglob("model.onnx")) if (tmp_path / "cache").exists() else []
    assert leftovers == []
