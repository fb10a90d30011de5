"""``llm-connect grade`` through Typer's runner: output, exit codes, every failure mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_connect.grading import register_judge
from llm_connect.grading.judges import _registry
from llm_connect.ledger import QualityLedger
from tests.cli._util import invoke, live_suite, pair_suite, write_suite
from tests.fixtures.openai_server import OpenAIServer

KEY = "sk-test-SECRETSECRETSECRET0123456789"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def live_args(server: OpenAIServer, *extra: str) -> list[str]:
    return ["--base-url", server.base_url, "--api-key", KEY, *extra]


def test_recorded_suite_prints_stats_and_a_routing_verdict(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 60, same=60)
    result = invoke("grade", str(suite), "--db", db)
    assert result.exit_code == 0, result.output
    assert "recorded:candidate" in result.stdout and "judge=exact" in result.stdout
    assert "cases=60" in result.stdout and "mean=1.000 [0.930, 1.000]" in result.stdout
    assert "verdict=proven" in result.stdout
    assert "task qa: route to small" in result.stdout
    assert QualityLedger(db).count() == 60


def test_a_two_case_suite_does_not_route(tmp_path: Path, db: str) -> None:
    # min_samples is never lowered to the size of the suite: two perfect cases prove nothing.
    suite = pair_suite(tmp_path / "s.jsonl", 2, same=2)
    result = invoke("grade", str(suite), "--db", db, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    (decision,) = data["routing"]
    assert decision["model"] == "big"
    assert "insufficient evidence (2 of 30 cases)" in decision["reason"]
    (stats,) = data["stats"]
    assert stats["verdict"] == "insufficient" and stats["cases_needed"] >= 30


def test_the_table_the_summary_and_the_router_agree(tmp_path: Path, db: str) -> None:
    # Three candidates (one proven, one ruled out, one undecided): one pass/fail for each everywhere.
    rows = [
        json.loads(line) for line in pair_suite(tmp_path / "a.jsonl", 60, same=60).read_text().splitlines()
    ]
    for i, row in enumerate(rows):
        same = row["baseline_response"]["text"]
        row["responses"] = {
            "baseline": {"text": same, "model": "big"},
            "good": {"text": same, "model": "good"},
            "bad": {"text": "nope" if i % 2 else same, "model": "bad"},
            "close": {"text": "nope" if i % 10 == 0 else same, "model": "close"},
        }
        del row["baseline_response"], row["candidate_response"]
    suite = tmp_path / "three.jsonl"
    suite.write_text("".join(json.dumps(r) + "\n" for r in rows))
    graded = invoke(
        "grade", str(suite), "--db", db, "-b", "recorded:baseline",
        "-c", "recorded:good", "-c", "recorded:bad", "-c", "recorded:close", "--json",
    )  # fmt: skip
    data = json.loads(graded.stdout)
    table = {s["candidate_model"]: s["verdict"] for s in data["stats"]}
    summary = json.loads(invoke("ledger", "summary", "--db", db, "--json").stdout)
    listed = {r["candidate_model"]: r["verdict"] for r in summary}
    (decision,) = data["routing"]
    routed = {c["model"]: c["graders"][0]["status"] for c in decision["candidates"]}
    assert table == listed == routed
    assert table["good"] == "proven" and table["bad"] == "ruled out" and table["close"] == "undecided"
    assert decision["model"] == "good"


def test_json_output_parses_and_carries_stats_routing_and_exit_code(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 6, same=3)
    result = invoke("grade", str(suite), "--db", db, "--json", "--cases")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    (stats,) = data["stats"]
    assert (stats["n"], stats["mean"], stats["candidate_model"]) == (6, 0.5, "small")
    assert stats["cost_ratio"] == pytest.approx(0.1) and stats["latency_ratio"] == pytest.approx(1 / 3)
    assert data["routing"][0]["model"] == "big" and data["exit_code"] == 0
    assert len(data["case_results"]) == 6 and data["failures"] == []


def test_quality_gate_failure_exits_1(tmp_path: Path, db: str) -> None:
    # The gate fails on evidence: a candidate ruled out (upper bound below the threshold).
    suite = pair_suite(tmp_path / "s.jsonl", 60, same=20)
    failed = invoke("grade", str(suite), "--db", db, "--min-quality", "0.8")
    assert failed.exit_code == 1
    assert "quality gate FAILED" in failed.stdout and "upper bound" in failed.stdout
    passed = invoke("grade", str(suite), "--db", db, "--min-quality", "0.1", "--json")
    assert passed.exit_code == 0 and json.loads(passed.stdout)["gate_failed"] == []


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b'{"id": "a", "prompt": "p", "baseline_response": "x", "candidate_response": "y"}\n{"id": \n', ":2"),
        (b'{"id": "a", "prompt": "p"}\n{"id": "a", "prompt": "q"}\n', ":2 field 'id'"),
        (b'{"id": "a", "prompt": "caf\xe9"}\n', ":1"),
        (b'{"id": "a", "baseline_response": "x", "candidate_response": "y"}\n', ":1 field 'prompt'"),
    ],
    ids=["malformed-line", "duplicate-id", "invalid-utf8", "missing-prompt"],
)
def test_bad_suite_exits_2_before_any_write(tmp_path: Path, db: str, content: bytes, where: str) -> None:
    good = pair_suite(tmp_path / "good.jsonl", 3)
    assert invoke("grade", str(good), "--db", db).exit_code == 0
    before = (QualityLedger(db).count(), len(QualityLedger(db).failures()))
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    result = invoke("grade", str(bad), "--db", db, "-b", "recorded:baseline", "-c", "recorded:candidate")
    assert result.exit_code == 2
    assert f"{bad}{where}" in result.stderr and "Traceback" not in result.output
    assert (QualityLedger(db).count(), len(QualityLedger(db).failures())) == before


def test_bad_suite_never_creates_a_ledger(tmp_path: Path, db: str) -> None:
    bad = write_suite(tmp_path / "bad.jsonl", [{"id": "a", "prompt": ""}])
    assert invoke("grade", str(bad), "--db", db).exit_code == 2
    assert not (tmp_path / "ledger.db").exists()


@pytest.mark.parametrize(
    ("judge", "message"),
    [("nosuchjudge", "unknown judge 'nosuchjudge'"), ("exact:bogus=1", "judge 'exact'")],
)
def test_bad_judge_exits_2_and_writes_nothing(
    tmp_path: Path, db: str, openai_server: OpenAIServer, judge: str, message: str
) -> None:
    suite = live_suite(tmp_path / "s.jsonl")
    result = invoke(
        "grade",
        str(suite),
        "-b",
        "openai:a",
        "-c",
        "openai:b",
        "--judge",
        judge,
        "--db",
        db,
        *live_args(openai_server),
    )
    assert result.exit_code == 2 and message in result.stderr
    assert openai_server.requests == [] and not (tmp_path / "ledger.db").exists()


def test_unknown_recorded_name_exits_2(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 2)
    result = invoke("grade", str(suite), "-b", "recorded:baseline", "-c", "recorded:nope", "--db", db)
    assert result.exit_code == 2 and "no recorded response 'nope'" in result.stderr


def test_rate_limit_then_success_exits_0(tmp_path: Path, db: str, openai_server: OpenAIServer) -> None:
    suite = live_suite(tmp_path / "s.jsonl", 2)
    openai_server.queue_fault(429, headers={"Retry-After": "1"})
    result = invoke(
        "grade",
        str(suite),
        "-b",
        "openai:a",
        "-c",
        "openai:b",
        "--db",
        db,
        "--json",
        *live_args(openai_server),
    )
    assert result.exit_code == 0, result.output
    statuses = sorted(r.status or 0 for r in openai_server.requests)
    assert statuses == [200, 200, 200, 200, 429]
    assert json.loads(result.stdout)["stats"][0]["n"] == 2


def test_server_errors_after_retries_exit_3_listing_the_failure(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    suite = write_suite(
        tmp_path / "s.jsonl",
        [{"id": f"c{i}", "prompt": f"q{i}", "baseline_response": f"echo: q{i}"} for i in range(3)],
    )
    openai_server.queue_fault(500)
    openai_server.queue_fault(500)
    result = invoke(
        "grade",
        str(suite),
        "-c",
        "openai:cand",
        "--max-retries",
        "1",
        "--concurrency",
        "1",
        "--db",
        db,
        "--run-id",
        "r500",
        *live_args(openai_server),
    )
    assert result.exit_code == 3
    assert "c0 (line 1) [candidate openai:cand] ServerError" in result.stderr
    assert "--resume r500" in result.stderr
    ledger = QualityLedger(db)
    assert [f.case_id for f in ledger.failures("r500")] == ["c0"]
    assert ledger.count(run_id="r500") == 2  # the rest is recorded


def test_bad_request_is_not_retried_and_exits_3(tmp_path: Path, db: str, openai_server: OpenAIServer) -> None:
    suite = write_suite(tmp_path / "s.jsonl", [{"id": "c0", "prompt": "q", "baseline_response": "x"}])
    openai_server.queue_fault(400)
    result = invoke("grade", str(suite), "-c", "openai:cand", "--db", db, *live_args(openai_server))
    assert result.exit_code == 3 and "BadRequestError" in result.stderr
    assert len(openai_server.requests) == 1


def test_timeout_exits_3(tmp_path: Path, db: str, openai_server: OpenAIServer) -> None:
    suite = write_suite(tmp_path / "s.jsonl", [{"id": "c0", "prompt": "q", "baseline_response": "x"}])
    openai_server.queue_fault(delay_s=3.0)
    result = invoke(
        "grade",
        str(suite),
        "-c",
        "openai:cand",
        "--timeout",
        "0.3",
        "--max-retries",
        "0",
        "--db",
        db,
        "--json",
        *live_args(openai_server),
    )
    assert result.exit_code == 3
    assert [f["error_type"] for f in json.loads(result.stdout)["failures"]] == ["AdapterTimeoutError"]


def test_regrading_with_a_new_judge_makes_no_model_calls(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    suite = live_suite(tmp_path / "s.jsonl", 5)
    base = ["grade", str(suite), "-b", "openai:a", "-c", "openai:b", "--db", db, *live_args(openai_server)]
    assert invoke(*base).exit_code == 0
    assert len(openai_server.requests) == 10
    again = invoke(*base, "--judge", "exact:normalize=true", "--json")
    assert again.exit_code == 0 and len(openai_server.requests) == 10
    assert json.loads(again.stdout)["cache_hits"] == 10
    assert invoke(*base, "--no-cache").exit_code == 0
    assert len(openai_server.requests) == 20


def test_api_key_is_never_printed_or_stored(tmp_path: Path, db: str, openai_server: OpenAIServer) -> None:
    suite = live_suite(tmp_path / "s.jsonl", 2)
    openai_server.queue_fault(500)
    result = invoke(
        "grade",
        str(suite),
        "-b",
        "openai:a",
        "-c",
        "openai:b",
        "--max-retries",
        "0",
        "--db",
        db,
        *live_args(openai_server),
    )
    assert result.exit_code == 3
    assert KEY not in result.output
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was used
    for path in tmp_path.glob("ledger.db*"):
        assert KEY.encode() not in path.read_bytes()


def test_single_prompt_from_option_and_stdin(tmp_path: Path, db: str, openai_server: OpenAIServer) -> None:
    result = invoke(
        "grade",
        "--prompt",
        "What is 2+2?",
        "-b",
        "openai:a",
        "-c",
        "openai:b",
        "--db",
        db,
        *live_args(openai_server),
    )
    assert result.exit_code == 0, result.output
    assert "echo: What is 2+2?" in result.stdout and "quality=1.000" in result.stdout
    piped = invoke(
        "grade",
        "--prompt-file",
        "-",
        "-b",
        "openai:a",
        "-c",
        "openai:b",
        "--db",
        db,
        "--json",
        *live_args(openai_server),
        input="Name a colour.",
    )
    assert piped.exit_code == 0
    assert openai_server.requests[-1].body["messages"][-1]["content"] == "Name a colour."


def test_usage_errors_exit_2(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 2)
    assert invoke("grade", "--db", db).exit_code == 2
    assert invoke("grade", str(suite), "--prompt", "x", "--db", db).exit_code == 2
    missing = invoke("grade", str(suite), "--resume", "nope", "--db", db)
    assert missing.exit_code == 2 and "no such run" in missing.stderr
    assert invoke("grade", str(suite), "--run-id", "r1", "--db", db).exit_code == 0
    again = invoke("grade", str(suite), "--run-id", "r1", "--db", db)
    assert again.exit_code == 2 and "--resume r1" in again.stderr
    assert invoke("grade", str(suite), "--concurrency", "0", "--db", db).exit_code == 2


@pytest.fixture
def exploding_judge() -> object:
    @register_judge("explodes-on-build")
    def factory(context: object) -> object:
        raise RuntimeError("boom\nsecond line")

    yield factory
    _registry._registered.pop("explodes-on-build", None)


def test_unexpected_errors_are_one_line_unless_debug(
    tmp_path: Path, db: str, exploding_judge: object
) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 2)
    result = invoke("grade", str(suite), "--judge", "explodes-on-build", "--db", db)
    assert result.exit_code == 4
    assert (
        result.stderr.strip() == "error: unexpected RuntimeError: boom (run with --debug for the traceback)"
    )
    debug = invoke("--debug", "grade", str(suite), "--judge", "explodes-on-build", "--db", db)
    assert debug.exit_code == 4 and "Traceback" in debug.stderr


def test_prices_give_live_responses_a_cost(tmp_path: Path, db: str, openai_server: OpenAIServer) -> None:
    suite = live_suite(tmp_path / "s.jsonl", 2)
    result = invoke("grade", str(suite), "-b", "openai:big", "-c", "openai:small", "--price", "big=10,30",
                    "--price", "small=1,3", "--db", db, "--json", *live_args(openai_server))  # fmt: skip
    assert result.exit_code == 0
    assert json.loads(result.stdout)["stats"][0]["cost_ratio"] == pytest.approx(0.1)
    bad = invoke(
        "grade", str(suite), "-b", "openai:big", "-c", "openai:small", "--price", "big=10", "--db", db
    )
    assert bad.exit_code == 2 and "--price" in bad.stderr


def test_rpm_spaces_the_calls(tmp_path: Path, db: str, openai_server: OpenAIServer) -> None:
    suite = live_suite(tmp_path / "s.jsonl", 2)
    result = invoke("grade", str(suite), "-b", "openai:a", "-c", "openai:b", "--rpm", "300", "--db", db,
                    "--json", *live_args(openai_server))  # fmt: skip
    assert result.exit_code == 0 and len(openai_server.requests) == 4
    # 300 calls/min = one call slot every 0.2 s: the 4th call cannot start before 0.6 s
    assert json.loads(result.stdout)["elapsed_s"] >= 0.6


def test_no_progress_bar_or_table_when_not_a_terminal(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 3)
    result = invoke("grade", str(suite), "--db", db)
    assert result.exit_code == 0
    assert "grading" not in result.output and "━" not in result.output and "│" not in result.output


def test_response_text_is_printed_verbatim_never_as_markup(
    tmp_path: Path, db: str, openai_server: OpenAIServer
) -> None:
    openai_server.responder = lambda body: "[bold]not bold[/] [/] [red"
    result = invoke("grade", "--prompt", "x", "-b", "openai:a", "-c", "openai:b", "--db", db,
                    *live_args(openai_server))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "[bold]not bold[/] [/] [red" in result.stdout


def test_a_suite_grouped_easy_first_does_not_prove_what_the_whole_suite_does_not(
    tmp_path: Path, db: str
) -> None:
    # The first 100 cases all match, the last 100 all differ: the mean is 0.5. Graded in the
    # file's order, the running bounds would prove 0.7 on the first group alone; the cases are
    # graded in a seeded random order, so the bounds see draws from the whole suite.
    suite = pair_suite(tmp_path / "s.jsonl", 200, same=100)
    result = invoke("grade", str(suite), "--db", db, "--min-quality", "0.7", "--json")
    assert result.exit_code == 1, result.output  # ruled out, never proven
    (row,) = json.loads(result.stdout)["stats"]
    assert row["verdict"] == "ruled out" and row["lower_bound"] <= 0.5 <= row["upper_bound"]
