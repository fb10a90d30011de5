"""Helpers for CLI tests: write suites, invoke the real Typer app, open the ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import Result
from typer.testing import CliRunner

from llm_connect.cli import app

runner = CliRunner()


def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """Run ``llm-connect ARGS`` in-process through Typer's runner."""
    return runner.invoke(app, list(args), input=input, env=env, catch_exceptions=False)


def write_suite(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def pair_suite(path: Path, n: int = 6, *, same: int | None = None, task: str = "qa") -> Path:
    """``n`` cases with recorded baseline/candidate; the first ``same`` candidates match the baseline."""
    same = n // 2 if same is None else same
    rows = [
        {
            "id": f"c{i}",
            "prompt": f"question {i}",
            "task": task,
            "baseline_response": {"text": f"answer {i}", "model": "big", "cost_usd": 0.01, "latency_ms": 900},
            "candidate_response": {
                "text": f"answer {i}" if i < same else f"other {i}",
                "model": "small",
                "cost_usd": 0.001,
                "latency_ms": 300,
            },
        }
        for i in range(n)
    ]
    return write_suite(path, rows)


def live_suite(path: Path, n: int = 4, *, task: str = "qa") -> Path:
    return write_suite(path, [{"id": f"c{i}", "prompt": f"question {i}", "task": task} for i in range(n)])
