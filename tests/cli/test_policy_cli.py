"""The routing policy on the command line: one set of options, refused values named, kept by a run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.cli._util import invoke, live_suite, pair_suite
from tests.fixtures.structured_output import judge_responder


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


BAD = [
    (["--min-quality", "1.5"], "--min-quality: must lie in 0..1, not 1.5"),
    (["--confidence", "1"], "--confidence: must lie strictly between 0 and 1"),
    (["--min-samples", "1"], "--min-samples: must be an int >= 2, not 1"),
    (["--target", "people"], "--target: must be one of judge, human, not 'people'"),
    (["--min-stability", "maybe"], "--min-stability: must be SAFE, RISKY or None"),
    (["--prefer", "speed"], "--prefer: must be one of cost, latency, not 'speed'"),
]
CASES = [
    (command, args, named)
    for command in ("route", "report", "grade", "ledger summary")
    for args, named in BAD
    # ledger summary takes the bound's settings only
    if command != "ledger summary" or args[0] in ("--min-quality", "--confidence", "--min-samples")
]


@pytest.mark.parametrize(("command", "args", "named"), CASES)
def test_a_bad_policy_option_is_a_usage_error_naming_it(
    tmp_path: Path, db: str, command: str, args: list[str], named: str
) -> None:
    extra = {
        "route": ["-t", "qa", "-b", "big", "-c", "small", "-j", "exact"],
        "report": ["-o", str(tmp_path / "r.html")],
        "grade": [str(pair_suite(tmp_path / "s.jsonl", 3, same=2))],
        "ledger summary": [],
    }[command]
    result = invoke(*command.split(), *extra, *args, "--db", db)
    assert result.exit_code == 2, result.output
    assert f"error: {named}" in result.output
    assert not (tmp_path / "ledger.db").exists() or command != "grade"  # refused before the ledger


def test_resume_refuses_a_different_policy_setting_and_restores_it(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 40, same=40)
    first = invoke(
        "grade",
        str(suite),
        "--db",
        db,
        "--run-id",
        "r1",
        "--confidence",
        "0.9",
        "--prefer",
        "latency",
        "--json",
    )
    assert first.exit_code == 0, first.output
    (decision,) = json.loads(first.stdout)["routing"]
    assert decision["parameters"]["confidence"] == 0.9 and decision["parameters"]["prefer"] == "latency"
    changed = invoke("grade", "--resume", "r1", "--db", db, "--confidence", "0.95")
    assert changed.exit_code == 2
    assert "--confidence 0.95 differs from the run's 0.9" in changed.output
    again = invoke("grade", "--resume", "r1", "--db", db, "--json")
    assert again.exit_code == 0, again.output
    (resumed,) = json.loads(again.stdout)["routing"]
    assert resumed["parameters"]["confidence"] == 0.9 and resumed["parameters"]["prefer"] == "latency"


def test_the_report_a_grade_writes_decides_as_the_grade_did(
    tmp_path: Path, db: str, openai_server: Any
) -> None:
    """The issue's case, as a new user ran it: 60 cases, an uncalibrated LLM judge answering 1.0,
    --allow-uncalibrated --min-quality 0.5 --report --json. Before, the JSON routed to the
    candidate while the report of the same command said no routing judge was usable."""
    openai_server.responder = judge_responder(1.0, lambda body: f"answer from {body['model']}")
    report = tmp_path / "r.html"
    result = invoke(
        "grade", str(live_suite(tmp_path / "s.jsonl", 60)), "-b", "openai:big", "-c", "openai:small",
        "--judge", "llm:openai:judge", "--allow-uncalibrated", "--min-quality", "0.5", "--report", str(report),
        "--json", "--db", db, "--base-url", openai_server.base_url, "--api-key", "sk-test-0123456789abcdef",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (decision,) = json.loads(result.stdout)["routing"]
    assert decision["model"] == "small"
    html = report.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="decisions">(.*?)</script>', html, re.S)
    assert found is not None
    (shown,) = json.loads(found.group(1))
    keys = ("task", "model", "reason", "candidates", "used_grader_ids", "parameters")
    assert {k: shown[k] for k in keys} == {k: decision[k] for k in keys}
    assert "no routing judge is usable" not in html and "small" in html
