"""``llm-connect suite import`` then ``grade --baseline recorded:production``: only candidate calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._util import invoke
from tests.fixtures.openai_server import OpenAIServer

KEY = "sk-test-SECRETSECRETSECRET0123456789"


def _litellm_log(path: Path, n: int) -> Path:
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"call-{i}",
                "status": "success",
                "model": "big",
                "messages": [{"role": "user", "content": f"question {i}"}],
                "model_parameters": {"temperature": 0},
                "response": {
                    "model": "big-2025-01-01",
                    "choices": [{"message": {"role": "assistant", "content": f"echo: question {i}"}}],
                    "usage": {"prompt_tokens": 2, "completion_tokens": 3},
                },
                "response_cost": 0.01,
                "startTime": 100.0,
                "endTime": 100.9,
                "request_tags": ["faq"],
            }
        )
    rows.append({**rows[0], "id": "dup"})  # an exact duplicate conversation
    rows.append({**rows[1], "id": "failed", "status": "failure", "error_str": "429"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    return path


def test_import_then_grade_calls_only_the_candidate(tmp_path: Path, openai_server: OpenAIServer) -> None:
    log = _litellm_log(tmp_path / "litellm.jsonl", 6)
    suite = tmp_path / "suite.jsonl"
    result = invoke("suite", "import", str(log), "-o", str(suite), "--task", "faq", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["written"] == 6 and report["duplicates"] == 1
    assert report["dropped"] == {"errored call": 1} and report["skipped"] == {"not valid JSON": 1}
    assert json.loads((tmp_path / "suite.meta.json").read_text())["counts"]["written"] == 6
    assert openai_server.requests == []  # nothing is sent anywhere during import

    graded = invoke(
        "grade", str(suite), "--baseline", "recorded:production", "--candidate", "openai:small",
        "--price", "small=1000,1000", "--base-url", openai_server.base_url, "--api-key", KEY,
        "--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--json",
    )  # fmt: skip
    assert graded.exit_code == 0, graded.output
    assert len(openai_server.requests) == 6  # one call per case, all to the candidate
    assert {r.body["model"] for r in openai_server.requests} == {"small"}
    (stats,) = json.loads(graded.stdout)["stats"]
    assert stats["n"] == 6 and stats["mean"] == 1.0  # the server echoes what production answered
    # the baseline's cost and latency come from the log: $0.01 and 900 ms per call
    # the candidate: "question i" + "echo: question i" = 2 + 3 words at $1000/M tokens = $0.005
    assert stats["cost_ratio"] == pytest.approx(0.5)
    assert stats["latency_ratio"] is not None and 0 < stats["latency_ratio"] < 1


def test_strict_and_bad_options_exit_2_with_nothing_written(tmp_path: Path) -> None:
    log = _litellm_log(tmp_path / "litellm.jsonl", 2)
    suite = tmp_path / "suite.jsonl"
    strict = invoke("suite", "import", str(log), "-o", str(suite), "--strict")
    assert strict.exit_code == 2 and "not valid JSON" in strict.stderr and "--strict" in strict.stderr
    assert not suite.exists()
    unknown = invoke("suite", "import", str(log), "-o", str(suite), "--format", "csv")
    assert unknown.exit_code == 2 and "unknown format 'csv'" in unknown.stderr


def test_plain_output_names_counts_strata_and_warnings(tmp_path: Path) -> None:
    log = _litellm_log(tmp_path / "litellm.jsonl", 4)
    result = invoke(
        "suite", "import", str(log), "-o", str(tmp_path / "s.jsonl"), "--sample", "3",
        "--stratify-by", "tag", "--per-stratum", "--seed", "3",
    )  # fmt: skip
    assert result.exit_code == 0
    assert "3 cases written" in result.stdout and "stratum faq: 3 of 4" in result.stdout
    assert "skipped: 1 not valid JSON" in result.stdout and "left out: 1 errored call" in result.stdout
