"""A grade names what was asked, on which endpoint (issue 10), against servers that rename models.

The loopback server answers as real ones do: OpenAI reports the dated snapshot
(``gpt-4o-mini-2024-07-18`` for ``gpt-4o-mini``); one llama.cpp serving two
quantisations reports ``llama3`` for both.
"""

from __future__ import annotations

import json
from pathlib import Path

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger
from llm_connect.routing import Router
from llm_connect.types import LLMResponse
from tests.cli._util import invoke, live_suite, write_suite
from tests.fixtures.openai_server import OpenAIServer

KEY = "sk-test-identity-0123456789"
CASES = 5


def _grade(suite: Path, db: str, base_url: str, *args: str) -> tuple[int, str, str]:
    result = invoke(
        "grade", str(suite), "--db", db, "--base-url", base_url, "--api-key", KEY, "-j", "exact", *args
    )
    return result.exit_code, result.stdout, result.stderr


def test_dated_snapshot_names_resume_without_calls_and_route_by_the_asked_name(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.served_models = {"gpt-4o": "gpt-4o-2024-08-06", "gpt-4o-mini": "gpt-4o-mini-2024-07-18"}
    suite = live_suite(tmp_path / "s.jsonl", CASES)
    db = f"sqlite:///{tmp_path / 'l.db'}"
    args = ("-b", "openai:gpt-4o", "-c", "openai:gpt-4o-mini", "--run-id", "r1", "--no-cache")
    code, out, err = _grade(suite, db, openai_server.base_url, *args)
    assert code == 0, err
    assert "answered as gpt-4o-mini-2024-07-18" in out and "stored under gpt-4o-mini" in out
    calls = len(openai_server.requests)
    assert calls == 2 * CASES

    # Resuming the finished run (even without the cache) calls nothing again.
    code, out, err = _grade(suite, db, openai_server.base_url, *args[:4], "--resume", "r1", "--no-cache")
    assert code == 0, err
    assert len(openai_server.requests) == calls
    assert f"{CASES} already graded" in out

    with QualityLedger(db) as ledger:
        rows = list(ledger.results(run_id="r1"))
        assert {(r.baseline_model, r.candidate_model) for r in rows} == {("gpt-4o", "gpt-4o-mini")}
        assert {(r.baseline_served_model, r.candidate_served_model) for r in rows} == {
            ("gpt-4o-2024-08-06", "gpt-4o-mini-2024-07-18")
        }
        assert {r.candidate_endpoint for r in rows} == {openai_server.base_url}
        decision = Router(ledger).decide(
            "qa", baseline="gpt-4o", candidates=["gpt-4o-mini"], grader_id="exact", min_samples=2
        )
    assert decision.candidates[0].n == CASES


def test_two_candidates_served_under_one_name_keep_all_their_grades(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.served_models = {"llama3:q4": "llama3", "llama3:q8": "llama3", "big": "llama3"}
    suite = live_suite(tmp_path / "s.jsonl", CASES)
    db = f"sqlite:///{tmp_path / 'l.db'}"
    code, _out, err = _grade(
        suite,
        db,
        openai_server.base_url,
        "-b",
        "openai:big",
        "-c",
        "openai:llama3:q4",
        "-c",
        "openai:llama3:q8",
    )
    assert code == 0, err
    with QualityLedger(db) as ledger:
        rows = list(ledger.results())
        summary = {(s.candidate_model, s.n) for s in ledger.summary()}
    assert len(rows) == 2 * CASES
    assert summary == {("llama3:q4", CASES), ("llama3:q8", CASES)}
    assert {r.candidate_served_model for r in rows} == {"llama3"}


def test_one_model_name_on_two_endpoints_is_called_on_both(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    suite = live_suite(tmp_path / "s.jsonl", CASES)
    db = f"sqlite:///{tmp_path / 'l.db'}"
    local = openai_server.base_url
    other = local.replace("127.0.0.1", "localhost")  # the same model name on a second endpoint
    pair = ("-b", "openai:base", "-c", "openai:llama3")

    assert _grade(suite, db, local, *pair)[0] == 0
    first = len(openai_server.requests)
    assert first == 2 * CASES
    assert _grade(suite, db, other, *pair)[0] == 0  # not answered from the first server's cache
    assert len(openai_server.requests) == 2 * first
    code, out, _ = _grade(suite, db, local, *pair, "--json")  # the first server again: all cached
    assert code == 0 and len(openai_server.requests) == 2 * first
    assert json.loads(out)["cache_hits"] == 2 * CASES
    with QualityLedger(db) as ledger:
        assert {r.candidate_endpoint for r in ledger.results()} == {local, other}


def test_a_different_grade_under_a_stored_key_fails_the_run_loudly(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    suite = live_suite(tmp_path / "s.jsonl", CASES)
    db = f"sqlite:///{tmp_path / 'l.db'}"
    # Another writer (a library user, a second host) already stored a different grade under
    # the key this run will use for case c0.
    with QualityLedger(db) as ledger:
        other = GradingResult(
            0.25,
            "someone else's grade",
            "exact",
            LLMResponse("an older answer", "base", "openai"),
            LLMResponse("another answer", "cand", "openai"),
            prompt="question 0",
        )
        stored = ledger.record(other, task="qa", run_id="r1", case_id="c0")
    code, out, err = _grade(
        suite,
        db,
        openai_server.base_url,
        "-b",
        "openai:base",
        "-c",
        "openai:cand",
        "--run-id",
        "r1",
        "--json",
    )
    assert code == 3, err
    payload = json.loads(out)
    (failure,) = payload["failures"]
    assert (failure["case_id"], failure["stage"], failure["error_type"]) == (
        "c0",
        "ledger",
        "GradeConflictError",
    )
    assert f"grade #{stored}" in failure["message"] and "'cand'" in failure["message"]
    assert "c0" in err and "GradeConflictError" in err
    with QualityLedger(db) as ledger:
        rows = {r.case_id: r for r in ledger.results(run_id="r1")}
        assert len(rows) == CASES  # the other cases are recorded...
        assert rows["c0"].id == stored and rows["c0"].quality_score == 0.25  # ...and nothing overwritten
        assert [f.case_id for f in ledger.failures("r1")] == ["c0"]


def test_two_candidates_asking_for_one_model_name_are_refused_before_any_call(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    suite = write_suite(
        tmp_path / "s.jsonl",
        [{"id": f"c{i}", "prompt": f"q{i}", "responses": {"cand": f"a{i}"}} for i in range(2)],
    )
    db = f"sqlite:///{tmp_path / 'l.db'}"
    code, _out, err = _grade(
        suite, db, openai_server.base_url, "-b", "openai:base", "-c", "recorded:cand", "-c", "openai:cand"
    )
    assert code == 2
    assert "'recorded:cand'" in err and "'openai:cand'" in err and "model 'cand'" in err
    assert openai_server.requests == []


def test_suite_metadata_and_a_raw_line_separator_reach_the_ledger_and_sql(tmp_path: Path) -> None:
    lines = [
        json.dumps(
            {
                "id": f"c{i}",
                "prompt": f"q{i} with a raw \u2028 line separator",
                "metadata": {"team": "billing" if i else "search", "ticket": 100 + i},
                "responses": {"big": f"a{i}", "small": f"a{i}"},
            },
            ensure_ascii=False,
        )
        for i in range(3)
    ]
    suite = tmp_path / "s.jsonl"
    suite.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "\u2028" in suite.read_text(encoding="utf-8")  # raw, not escaped: valid JSON
    db = f"sqlite:///{tmp_path / 'l.db'}"
    result = invoke(
        "grade", str(suite), "-b", "recorded:big", "-c", "recorded:small", "-j", "exact", "--db", db
    )
    assert result.exit_code == 0, result.output
    query = "SELECT case_id FROM grades WHERE json_extract(metadata, '$.team') = 'billing' ORDER BY case_id"
    sql = invoke("ledger", "sql", query, "--db", db, "--json")
    assert sql.exit_code == 0, sql.output
    assert [r["case_id"] for r in json.loads(sql.stdout)] == ["c1", "c2"]
    with QualityLedger(db) as ledger:
        rows = {r.case_id: r for r in ledger.results()}
    assert rows["c0"].metadata == {"team": "search", "ticket": 100}
    assert "\u2028" in (rows["c0"].prompt or "")
