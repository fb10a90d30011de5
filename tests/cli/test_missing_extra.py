"""A judge whose extra is not installed is a usage error before anything runs (issue 34, item 3)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.cli._util import invoke, pair_suite


@pytest.fixture
def without_embeddings(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a machine without ``llm-connect[embeddings]``: neither backend can be imported."""
    from llm_connect.adapters import _onnx

    for name in ("sentence_transformers", "onnxruntime"):
        monkeypatch.setitem(sys.modules, name, None)  # import and find_spec both see it missing
    monkeypatch.setattr(_onnx, "_runtimes", {})  # nothing exported earlier in this process


@pytest.mark.usefixtures("without_embeddings")
def test_the_embedding_judge_without_its_extra_is_exit_2_before_the_ledger(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    suite = pair_suite(tmp_path / "s.jsonl", 4)
    result = invoke("grade", str(suite), "--judge", "embedding", "--db", f"sqlite:///{db}")
    assert result.exit_code == 2, result.output
    assert "pip install 'llm-connect[embeddings]'" in result.output
    assert "--resume" not in result.output and not db.exists()  # nothing to resume: nothing ran


@pytest.mark.usefixtures("without_embeddings")
def test_the_pytorch_backend_asked_for_without_its_extra_is_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    suite = pair_suite(tmp_path / "s.jsonl", 4)
    result = invoke("grade", str(suite), "--judge", "embedding:backend=torch", "--db", f"sqlite:///{db}")
    assert result.exit_code == 2, result.output
    assert "sentence-transformers is not installed" in result.output and not db.exists()
    assert result.output.count("pip install 'llm-connect[embeddings]'") == 1


def test_a_report_without_matplotlib_is_exit_2_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as a machine without llm-connect[plot]
    db = tmp_path / "ledger.db"
    suite = pair_suite(tmp_path / "s.jsonl", 4)
    graded = invoke("grade", str(suite), "--report", str(tmp_path / "r.html"), "--db", f"sqlite:///{db}")
    assert graded.exit_code == 2, graded.output
    assert "pip install 'llm-connect[plot]'" in graded.output and not db.exists()
    monkeypatch.delitem(sys.modules, "matplotlib")
    assert invoke("grade", str(suite), "--db", f"sqlite:///{db}").exit_code == 0
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    report = invoke("report", "-o", str(tmp_path / "r.html"), "--db", f"sqlite:///{db}")
    assert report.exit_code == 2 and "pip install 'llm-connect[plot]'" in report.output
    assert not (tmp_path / "r.html").exists()
