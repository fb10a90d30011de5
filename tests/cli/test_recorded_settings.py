"""A production suite is compared at the settings its users got (issue 34, item 2).

``suite import`` keeps each call's request settings with its case; ``grade`` asks the candidate
with them unless the command line sets its own, says which applied, and flags candidate answers
a token cap cut where production's answer was not cut.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli._util import invoke
from tests.fixtures.openai_server import OpenAIServer, chat_completion

KEY = "sk-test-0123456789abcdef0123"


def _production(tmp_path: Path, n: int = 5) -> Path:
    """A LiteLLM log of ``n`` calls made at temperature 0 with a 24-token cap, then imported."""
    rows = [
        {
            "id": f"call-{i}",
            "status": "success",
            "model": "big",
            "messages": [{"role": "user", "content": f"question {i}"}],
            "model_parameters": {"temperature": 0, "max_tokens": 24, "top_p": 0.5},
            "response": {
                "model": "big",
                "choices": [
                    {"message": {"role": "assistant", "content": f"short {i}"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 2, "completion_tokens": 2},
            },
            "startTime": 100.0,
            "endTime": 100.5,
        }
        for i in range(n)
    ]
    log = tmp_path / "prod.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    suite = tmp_path / "suite.jsonl"
    assert invoke("suite", "import", str(log), "-o", str(suite), "--task", "faq").exit_code == 0
    return suite


def _grade(tmp_path: Path, server: OpenAIServer, suite: Path, *extra: str) -> Any:
    return invoke(
        "grade", str(suite), "--baseline", "recorded:production", "--candidate", "openai:small",
        "--base-url", server.base_url, "--api-key", KEY, "--db", f"sqlite:///{tmp_path / 'l.db'}", *extra,
    )  # fmt: skip


def test_the_candidate_is_asked_with_the_recorded_settings_and_the_output_says_so(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    suite = _production(tmp_path)
    result = _grade(tmp_path, openai_server, suite, "--json")
    assert result.exit_code == 0, result.output
    sent = [r.body for r in openai_server.requests]
    assert len(sent) == 5
    assert all(b["max_tokens"] == 24 and b["temperature"] == 0 and b["top_p"] == 0.5 for b in sent)
    data = json.loads(result.stdout)
    assert data["recorded_settings"]["applied"] == {"max_tokens": 5, "temperature": 5, "top_p": 5}
    assert data["recorded_settings"]["replaced"] == {} and data["token_capped"] == {}
    text = _grade(tmp_path, openai_server, suite, "--run-id", "again", "--no-cache")
    assert "asked with the run settings recorded with the cases: max_tokens (5 cases)" in text.stdout


def test_the_command_line_wins_and_a_capped_candidate_is_flagged(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    suite = _production(tmp_path)
    # the candidate runs into its cap on every answer; production's answers stopped on their own
    openai_server.responder = lambda body: chat_completion(body, "a long answer " * 8, finish_reason="length")
    result = _grade(tmp_path, openai_server, suite, "--max-tokens", "8")
    assert result.exit_code == 0, result.output
    assert all(r.body["max_tokens"] == 8 and r.body["temperature"] == 0 for r in openai_server.requests)
    assert "the command line's --max-tokens replaced the recorded value" in result.stdout
    assert "note: 5 of 5 answers of openai:small stopped at the token cap" in result.stdout
