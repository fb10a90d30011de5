"""``llm-connect grade`` on a suite of tool-using conversations: live and recorded, tools judge, --samples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_connect.ledger import QualityLedger
from tests.cli._util import invoke, write_suite
from tests.fixtures.openai_server import OpenAIServer, chat_completion

KEY = "sk-test-SECRETSECRETSECRET0123456789"
REFUND = {
    "type": "function",
    "function": {
        "name": "refund",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}},
    },
}
DELETE = {"type": "function", "function": {"name": "delete_account", "parameters": {"type": "object"}}}


def conversation(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a support agent. Use the tools."},
        {"role": "user", "content": f"Order {i} never arrived."},
        {"role": "assistant", "content": "Sorry to hear that. Shall I refund it?"},
        {"role": "user", "content": "Yes, refund it."},
    ]


def call(name: str, order: int) -> dict[str, Any]:
    return {
        "id": f"call_{order}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"order_id": order})},
    }


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def test_recorded_conversations_with_tool_calls_grade_end_to_end(tmp_path: Path, db: str) -> None:
    rows = []
    for i in range(4):
        candidate = (
            [call("refund", i)]
            if i < 2
            else [call("refund", i + 100)]
            if i == 2
            else [call("delete_account", i)]
        )
        rows.append(
            {
                "id": f"c{i}",
                "task": "support",
                "messages": conversation(i),
                "tools": [REFUND, DELETE],
                "baseline_response": {"tool_calls": [call("refund", i)], "model": "big"},
                "candidate_response": {"tool_calls": candidate, "model": "small"},
            }
        )
    suite = write_suite(tmp_path / "s.jsonl", rows)
    result = invoke("grade", str(suite), "--judge", "tools", "--judge", "exact", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    ledger = QualityLedger(db)
    by_case = {(g.case_id, g.grader_id): g.quality_score for g in ledger.results(task="support")}
    # right function + right arguments, right function + wrong arguments, wrong function
    assert [by_case[(f"c{i}", "tools")] for i in range(4)] == [1.0, 1.0, 0.5, 0.0]
    # Two different tool calls are never "texts match", though both texts are empty.
    assert [by_case[(f"c{i}", "exact")] for i in range(4)] == [1.0, 1.0, 0.0, 0.0]
    grade = next(g for g in ledger.results(task="support") if g.case_id == "c3")
    assert ledger.conversation(grade.prompt_sha256) is not None
    assert grade.candidate_tool_calls[0]["name"] == "delete_account"


def test_live_conversations_send_messages_and_tools(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    def answer(body: dict[str, Any]) -> Any:
        order = int(body["messages"][1]["content"].split()[1])
        name = "refund" if body["model"] == "big" or order % 2 == 0 else "delete_account"
        return chat_completion(
            body, None, tool_calls=[{"name": name, "arguments": json.dumps({"order_id": order})}]
        )

    openai_server.responder = answer
    rows = [
        {"id": f"c{i}", "task": "support", "messages": conversation(i), "tools": [REFUND, DELETE]}
        for i in range(4)
    ]
    suite = write_suite(tmp_path / "s.jsonl", rows)
    result = invoke(
        "grade",
        str(suite),
        "-b",
        "openai:big",
        "-c",
        "openai:small",
        "--judge",
        "tools",
        "--db",
        db,
        "--base-url",
        openai_server.base_url,
        "--api-key",
        KEY,
    )
    assert result.exit_code == 0, result.output
    bodies = [r.body for r in openai_server.requests]
    assert len(bodies) == 8
    assert all(
        b["tools"] == [REFUND, DELETE] and b["messages"][-1]["content"] == "Yes, refund it." for b in bodies
    )
    scores = sorted(g.quality_score for g in QualityLedger(db).results(task="support"))
    assert scores == [0.0, 0.0, 1.0, 1.0]


def test_samples_make_three_calls_per_side_and_one_value_per_case(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    suite = write_suite(tmp_path / "s.jsonl", [{"id": f"c{i}", "prompt": f"q{i}"} for i in range(3)])
    result = invoke(
        "grade",
        str(suite),
        "-b",
        "openai:big",
        "-c",
        "openai:small",
        "--samples",
        "3",
        "--db",
        db,
        "--json",
        "--base-url",
        openai_server.base_url,
        "--api-key",
        KEY,
    )
    assert result.exit_code == 0, result.output
    assert len(openai_server.requests) == 3 * 2 * 3
    grades = list(QualityLedger(db).results())
    assert len(grades) == 3 and all(g.details["samples"] == 3 for g in grades)
    out = json.loads(result.stdout)
    assert out["stats"][0]["n"] == 3 and out["stats"][0]["n_grades"] == 3 and out["model_calls"] == 18


def test_samples_out_of_range_is_a_usage_error(tmp_path: Path, db: str) -> None:
    suite = write_suite(tmp_path / "s.jsonl", [{"id": "c", "prompt": "q"}])
    result = invoke("grade", str(suite), "--samples", "0", "--db", db)
    assert result.exit_code == 2 and "--samples" in result.output
    assert not (tmp_path / "ledger.db").exists()


def test_the_tools_judge_does_not_apply_to_a_text_only_suite(tmp_path: Path, db: str) -> None:
    rows = [
        {"id": f"c{i}", "prompt": f"q{i}", "baseline_response": "a", "candidate_response": "b"}
        for i in range(2)
    ]
    result = invoke("grade", str(write_suite(tmp_path / "s.jsonl", rows)), "--judge", "tools", "--db", db)
    assert result.exit_code == 0, result.output
    assert QualityLedger(db).count() == 0  # not applicable: no perfect "tools" grades
    assert "not applicable" in result.output.lower() or "n/a" in result.output.lower()
