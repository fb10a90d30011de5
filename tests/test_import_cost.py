"""``import llm_connect`` stays light: no torch, sentence-transformers, openai or onnxruntime."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "torch",
    "sentence_transformers",
    "openai",
    "transformers",
    "matplotlib",
    "onnxruntime",
    "onnx",
    "onnxscript",
    "tokenizers",
)


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_llm_connect_loads_no_heavy_module() -> None:
    assert _loaded_after("import llm_connect") == []


def test_public_packages_load_no_heavy_module() -> None:
    code = (
        "import llm_connect.adapters, llm_connect.grading, llm_connect.grading.judges, "
        "llm_connect.scoring, llm_connect.types, llm_connect.errors, llm_connect.stability"
    )
    assert _loaded_after(code) == []
