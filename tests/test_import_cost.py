"""``import llm_connect`` stays light: no torch, sentence-transformers, openai or onnxruntime."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


# -- the CLI's start (issue 36, item 6: each command imports what it uses) -----------------------


def _llm_connect_modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.strip().splitlines()[-1].split())


def test_import_llm_connect_loads_its_names_on_first_use() -> None:
    loaded = _llm_connect_modules_after("import llm_connect")
    assert "llm_connect.grading" not in loaded and "llm_connect.types" not in loaded
    loaded = _llm_connect_modules_after("from llm_connect import PairedGrader, Usage")
    assert {"llm_connect.grading", "llm_connect.types"} <= loaded


def test_ledger_and_routing_load_only_the_modules_asked_for() -> None:
    loaded = _llm_connect_modules_after(
        "from llm_connect.ledger import QualityLedger\nimport llm_connect.routing"
    )
    assert "llm_connect.ledger._store" in loaded
    unused = {"alembic", "llm_connect.grading", "llm_connect.ledger._design", "llm_connect.routing._router"}
    assert not unused & loaded, sorted(unused & loaded)


def test_ledger_summary_and_route_import_no_grading_alembic_or_label_numerics(tmp_path: Path) -> None:
    from llm_connect.ledger import QualityLedger
    from llm_connect.types import LLMResponse
    from llm_connect.values import GradingResult

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with QualityLedger(url) as ledger:
        ledger.record_many(
            [
                GradingResult(
                    quality_score=1.0,
                    notes="",
                    grader_id="exact",
                    baseline_response=LLMResponse(f"a{i}", "big", "openai", 900.0),
                    candidate_response=LLMResponse(f"a{i}", "small", "openai", 300.0),
                    prompt=f"q{i}",
                )
                for i in range(5)
            ],
            task="qa",
        )
    unused = {
        "alembic",
        "llm_connect.grading",
        "llm_connect.cli.grade",
        "llm_connect.ledger._design",
        "llm_connect.routing._ppi",
        "numpy.ma",
        "scipy",
    }
    for args in (["ledger", "summary"], ["route", "-t", "qa", "-b", "big", "-c", "small", "-j", "exact"]):
        code = (
            f"import sys\nsys.argv = ['llm-connect', *{[*args, '--db', url]!r}]\n"
            "from llm_connect.cli import main\n"
            "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        )
        loaded = _llm_connect_modules_after(code)
        assert "sqlalchemy" in loaded and "llm_connect.routing._evidence" in loaded  # it did read and decide
        assert not unused & loaded, (args, sorted(unused & loaded))
