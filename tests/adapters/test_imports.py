"""Adapters and judges import their heavy dependencies only when used."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("openai", "torch", "sentence_transformers")


def _heavy_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_package_and_adapters_loads_no_sdk():
    assert _heavy_after("import llm_connect, llm_connect.adapters") == []


def test_naming_the_adapter_and_judge_classes_loads_no_sdk():
    code = (
        "from llm_connect.adapters import OpenAIAdapter, OpenAIEmbeddingAdapter, "
        "SentenceTransformerEmbeddingAdapter, adapter_from_spec, default_embedding_adapter\n"
        "from llm_connect.grading.judges import EmbeddingSimilarityJudge, LLMJudge\n"
        "SentenceTransformerEmbeddingAdapter(); default_embedding_adapter()"
    )
    assert _heavy_after(code) == []


def test_building_an_openai_adapter_loads_openai_but_not_torch():
    code = (
        "from llm_connect.adapters import OpenAIAdapter\n"
        "OpenAIAdapter('m', base_url='http://127.0.0.1:1/v1')._clients.sync()"
    )
    assert _heavy_after(code) == ["openai"]
