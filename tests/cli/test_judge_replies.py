"""What a local server's judge replies cost: none lost to JSON syntax, every refused one shown,
every judge call counted (issue 34, item 1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_connect.ledger import QualityLedger
from tests.cli._util import invoke, live_suite

KEY = "sk-test-0123456789abcdef"


def _grade(tmp_path: Path, openai_server: Any, *extra: str) -> Any:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    return invoke(
        "grade", str(live_suite(tmp_path / "s.jsonl", 4)), "-b", "openai:big", "-c", "openai:small",
        "--judge", "llm:openai:judge", "--db", db, "--base-url", openai_server.base_url, "--api-key", KEY,
        "--concurrency", "1", *extra,
    ), db  # fmt: skip


def _judge_replies(text: str) -> Any:
    def respond(body: dict[str, Any]) -> str:
        if body.get("response_format") is not None:
            return text
        return f"answer from {body['model']}"

    return respond


def test_raw_control_characters_in_a_judge_reply_lose_no_case(tmp_path: Path, openai_server: Any) -> None:
    # a raw newline and tab inside the notes string, as llama.cpp's grammar lets a small model write
    openai_server.responder = _judge_replies('{"quality_score": 0.75, "notes": "line one\nline\ttwo"}')
    result, db = _grade(tmp_path, openai_server, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["failures"] == [] and data["judge_calls"] == 4 and data["model_calls"] == 8
    with QualityLedger(db) as ledger:
        assert {r.notes for r in ledger.results()} == {"line one\nline\ttwo"}


def test_a_refused_reply_is_shown_and_stored_and_judge_calls_are_counted(
    tmp_path: Path, openai_server: Any
) -> None:
    openai_server.responder = _judge_replies('{"quality_score": 100.0, "notes": "perfect"}')
    result, db = _grade(tmp_path, openai_server)
    assert result.exit_code == 3, result.output
    shown = 'the reply was: \'{"quality_score": 100.0, "notes": "perfect"}\''
    assert shown in result.output
    assert "12 model calls (4 by judges)" in result.stdout  # 4 cases x (2 sides + 1 judge)
    with QualityLedger(db) as ledger:
        failures = ledger.failures()
    assert len(failures) == 4 and all(shown in f.message for f in failures)
    # --resume asks the judge again (the sides' answers come from the cache): counted, not hidden
    run_id = failures[0].run_id
    again = invoke("grade", "--resume", str(run_id), "--db", db, "--api-key", KEY)
    assert "4 model calls (4 by judges), 8 cached" in again.stdout, again.output
