"""``llm-connect grade --judge pairwise:openai:M`` end to end over the loopback server (issue 22, item 1)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from llm_connect.grading.judges._llm import forget_response_formats
from llm_connect.ledger import QualityLedger
from llm_connect.routing import Router
from tests.cli._util import invoke, live_suite
from tests.fixtures.openai_server import OpenAIServer

KEY = "sk-test-SECRETSECRETSECRET0123456789"
GRADER = "pairwise:openai:house-judge:pairwise-v1"


@pytest.fixture(autouse=True)
def _fresh_memory():
    forget_response_formats()
    yield
    forget_response_formats()


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def _answer_a(body: dict[str, Any]) -> str:
    match = re.search(
        r"<<<BEGIN ANSWER_A (\w+)>>>\n(.*?)\n<<<END ANSWER_A \1>>>", body["messages"][-1]["content"], re.S
    )
    assert match is not None
    return match.group(2)


def _server(server: OpenAIServer, judge: Any) -> None:
    """Sides answer ``answer from MODEL``; the judge model is scripted by ``judge(body)``."""
    server.responder = lambda body: (
        judge(body) if body["model"] == "house-judge" else f"answer from {body['model']}"
    )


def _grade(tmp_path: Path, db: str, server: OpenAIServer, *judge: str, n: int = 4) -> Any:
    suite = live_suite(tmp_path / "s.jsonl", n)
    return invoke(
        "grade",
        str(suite),
        "-b",
        "openai:big",
        "-c",
        "openai:small",
        *judge,
        "--db",
        db,
        "--run-id",
        "r1",
        "--base-url",
        server.base_url,
        "--api-key",
        KEY,
        "--json",
    )


def test_grade_suite_with_the_pairwise_judge_stores_both_verdicts(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    # The judge prefers the small model's answer wherever it is shown.
    _server(openai_server, lambda body: {"notes": "n", "verdict": "A" if "small" in _answer_a(body) else "B"})
    result = _grade(tmp_path, db, openai_server, "--judge", "pairwise:openai:house-judge")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["failures"] == []
    judged = [r.body for r in openai_server.requests if r.body["model"] == "house-judge"]
    assert len(judged) == 8  # two orders per case
    for body in judged:
        material = body["messages"][-1]["content"]
        assert "answer from big" in material and "answer from small" in material
        assert "openai:big" not in material and "openai:small" not in material
    rows = [r for r in QualityLedger(db).results() if r.grader_id == GRADER]
    assert len(rows) == 4
    for row in rows:
        assert row.quality_score == 1.0 and row.asks_llm is True
        assert row.details["shown_first"] == ["baseline", "candidate"]
        assert row.details["verdicts"] == ["B", "A"]
        assert row.details["winners"] == ["candidate", "candidate"]
        assert row.details["position_consistent"] is True
        assert row.details["judge_spec"] == {
            "name": "pairwise",
            "args": {"model": "openai:house-judge"},
            "asks_llm": True,
        }


def test_routing_ignores_an_uncalibrated_pairwise_judge(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    _server(openai_server, lambda body: {"notes": "n", "verdict": "tie"})
    assert _grade(tmp_path, db, openai_server, "--judge", "pairwise:openai:house-judge").exit_code == 0
    decision = Router(QualityLedger(db)).decide(
        "qa",
        baseline="big",
        candidates=["small"],
        grader_id=GRADER,
        min_quality=0.45,
        min_samples=2,
    )
    assert decision.model == "big" and "no stored calibration" in decision.reason


def test_pairwise_without_a_model_uses_judge_model_and_orders_one_asks_once(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    _server(openai_server, lambda body: {"notes": "n", "verdict": "A"})
    result = _grade(
        tmp_path,
        db,
        openai_server,
        "--judge",
        "pairwise:orders=one,seed=3",
        "--judge-model",
        "openai:house-judge",
    )
    assert result.exit_code == 0, result.output
    assert len([r for r in openai_server.requests if r.body["model"] == "house-judge"]) == 4
    rows = [r for r in QualityLedger(db).results() if r.grader_id == GRADER]
    assert len(rows) == 4 and all(len(r.details["shown_first"]) == 1 for r in rows)
    # A judge that always says "A" gives the side shown first the case.
    for row in rows:
        assert row.quality_score == (1.0 if row.details["shown_first"] == ["candidate"] else 0.0)


def test_an_unusable_verdict_fails_the_case_and_stores_no_grade(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    _server(openai_server, lambda body: {"notes": "n", "verdict": "maybe"})
    result = _grade(tmp_path, db, openai_server, "--judge", "pairwise:openai:house-judge", n=2)
    assert result.exit_code == 3
    failures = json.loads(result.stdout)["failures"]
    assert len(failures) == 2
    assert all("JudgeOutputError" in json.dumps(f) and "'maybe'" in f["message"] for f in failures)
    assert [r for r in QualityLedger(db).results() if r.grader_id == GRADER] == []
