"""Shared fixtures. Tests never reach the network: HF hub offline, loopback servers only."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The default embedder keeps ONNX Runtime, unmeasured (tests/adapters/test_embedding_device.py
# runs the probe itself).
os.environ.setdefault("LLM_CONNECT_EMBEDDING_PROBE", "0")

# Fixture modules, one per shared resource (each owned by one area of the suite).
pytest_plugins = [
    "tests.fixtures.openai_server",
    "tests.fixtures.databases",
    "tests.fixtures.faults",
]


@pytest.fixture(scope="session", autouse=True)
def llm_connect_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This session's llm-connect cache directory (``LLM_CONNECT_CACHE_DIR``, inherited by the
    CLI processes tests start): the default embedding backend exports all-MiniLM-L6-v2 to ONNX
    here on first use, once per session, never into ``~/.cache``."""
    root = tmp_path_factory.mktemp("llm-connect-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LLM_CONNECT_CACHE_DIR", str(root))
        yield root
