"""A run remembers its settings: ``grade --resume RUN`` alone restores them; a changed one is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_connect.ledger import QualityLedger
from tests.cli._util import invoke, live_suite, pair_suite
from tests.fixtures.openai_server import OpenAIServer

KEY = "sk-test-SECRETSECRETSECRET0123456789"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def first_run(tmp_path: Path, db: str, server: OpenAIServer, *extra: str) -> tuple[Path, str]:
    suite = live_suite(tmp_path / "s.jsonl", 6)
    # Case c3 fails for good (a 500 on every retry): the run ends with a failed case to retry.

    def responder(body: dict) -> str:
        if "question 3" in json.dumps(body["messages"]):
            raise RuntimeError("boom")
        return "ok"

    server.responder = responder
    result = invoke(
        "grade", str(suite), "-b", "openai:base", "-c", "openai:cand", "--base-url", server.base_url,
        "--api-key", KEY, "--db", db, "--run-id", "r1", "--max-retries", "2", "--concurrency", "1",
        "--temperature", "0.3", "--max-tokens", "77", "--seed", "5", "--system-prompt", "Be brief.",
        "--samples", "2", "--min-quality", "0.5", *extra,
    )  # fmt: skip
    return suite, result.stderr + result.stdout


def chat_bodies(server: OpenAIServer) -> list[dict]:
    return [r.body for r in server.requests_to("/chat/completions")]


def test_resume_alone_restores_every_setting(
    tmp_path: Path, db: str, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _suite, output = first_run(tmp_path, db, openai_server)
    hint = f"llm-connect grade --resume r1 --db {db}"
    assert "retry them with: " + hint in output
    with QualityLedger(db) as ledger:
        before = ledger.count(run_id="r1")
        settings = ledger.run("r1").config["settings"]  # type: ignore[union-attr]
    assert (settings["temperature"], settings["max_tokens"], settings["seed"]) == (0.3, 77, 5)
    assert settings["system_prompt"] == "Be brief." and settings["samples"] == 2
    assert KEY not in json.dumps(settings)
    openai_server.reset()

    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the key is never stored: it comes from the environment
    monkeypatch.chdir(tmp_path.parent)  # another folder: the suite is found by its stored path
    resumed = invoke(*hint.split()[1:], "--json")
    data = json.loads(resumed.stdout)
    # the gate came back too (--min-quality 0.5): six cases prove nothing, so it is not settled
    assert resumed.exit_code == 5 and data["gate"] == "not settled" and data["min_quality"] == 0.5
    assert data["cases_skipped"] == 6 - 1 and data["failures"] == []
    bodies = chat_bodies(openai_server)
    assert bodies, "the failed case was asked again"
    for body in bodies:
        assert body["temperature"] == 0.3 and body["max_tokens"] == 77 and body["seed"] == 5
        assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert len(bodies) == 2 * 2  # the one missing case: two sides, two samples each
    with QualityLedger(db) as ledger:
        assert ledger.count(run_id="r1") == before + 1


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("--max-tokens", "500", "--max-tokens"),
        ("--temperature", "0.0", "--temperature"),
        ("--samples", "1", "--samples"),
        ("--judge", "embedding", "--judge"),
        ("--min-quality", "0.9", "--min-quality"),
        ("--candidate", "openai:other", "--candidate"),
    ],
)
def test_a_changed_setting_is_refused_before_any_call(
    tmp_path: Path, db: str, openai_server: OpenAIServer, option: str, value: str, named: str
) -> None:
    first_run(tmp_path, db, openai_server)
    openai_server.reset()
    result = invoke("grade", "--resume", "r1", "--db", db, "--api-key", KEY, option, value)
    assert result.exit_code == 2, result.output
    assert f"--resume r1: {named} " in result.stderr and "differs from the run's" in result.stderr
    assert openai_server.requests == []


def test_the_same_value_and_free_settings_are_accepted(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    suite, _ = first_run(tmp_path, db, openai_server)
    openai_server.reset()
    result = invoke(
        "grade", str(suite), "--resume", "r1", "--db", db, "--api-key", KEY, "--max-tokens", "77",
        "--concurrency", "3", "--max-retries", "0", "--json",
    )  # fmt: skip
    assert result.exit_code == 5, result.output  # ran: the gate (restored) is not settled


def test_a_different_suite_is_refused(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "a.jsonl", 4)
    assert invoke("grade", str(suite), "--db", db, "--run-id", "r2").exit_code == 0
    other = pair_suite(tmp_path / "b.jsonl", 4)
    result = invoke("grade", str(other), "--resume", "r2", "--db", db)
    assert result.exit_code == 2 and "SUITE" in result.stderr
    same = invoke("grade", "--resume", "r2", "--db", db, "--json")
    assert same.exit_code == 0 and json.loads(same.stdout)["cases_skipped"] == 4


def test_resume_of_an_unknown_run_names_it(tmp_path: Path, db: str) -> None:
    QualityLedger(db).close()
    result = invoke("grade", "--resume", "nope", "--db", db)
    assert result.exit_code == 2 and "--resume nope: no such run" in result.stderr
