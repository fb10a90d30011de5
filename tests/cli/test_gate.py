"""``grade --min-quality``: the gate passes only on proof, fails on a rule-out, else is NOT SETTLED."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.cli._util import invoke, pair_suite


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def test_a_small_suite_below_the_threshold_is_not_settled_and_never_passes(tmp_path: Path, db: str) -> None:
    # The newcomer: 3 cases, mean 0.667, --min-quality 0.99. Nothing is proven or ruled out.
    suite = pair_suite(tmp_path / "s.jsonl", 3, same=2)
    result = invoke("grade", str(suite), "--db", db, "--min-quality", "0.99")
    assert result.exit_code == 5, result.output
    assert "quality gate NOT SETTLED (min 0.99)" in result.stdout
    assert "passed" not in result.stdout
    # per unsettled candidate and judge: the observed mean against Q and how many more cases
    assert "recorded:candidate on exact in qa: mean 0.667 vs 0.99" in result.stdout
    assert "more case" in result.stdout or "too close to call" in result.stdout


def test_allow_unsettled_exits_0_with_the_same_message(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 3, same=2)
    result = invoke("grade", str(suite), "--db", db, "--min-quality", "0.99", "--allow-unsettled")
    assert result.exit_code == 0, result.output
    assert "quality gate NOT SETTLED (min 0.99)" in result.stdout


def test_json_and_junit_say_not_settled(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 3, same=2)
    xml = tmp_path / "r.xml"
    result = invoke("grade", str(suite), "--db", db, "--min-quality", "0.99", "--json", "--junit", str(xml))
    data = json.loads(result.stdout)
    assert data["gate"] == "not settled" and data["exit_code"] == 5 == result.exit_code
    (item,) = data["gate_detail"]["not_settled"]
    assert item["candidate"] == "recorded:candidate" and item["mean"] == pytest.approx(2 / 3)
    assert item["more_cases_needed"] is None or item["more_cases_needed"] > 0
    props = {p.get("name"): p.get("value") for p in ET.parse(xml).getroot().iter("property")}
    assert props["gate"] == "not settled" and props["min_quality"] == "0.99"


def test_proven_everywhere_passes_and_a_rule_out_fails(tmp_path: Path, db: str) -> None:
    good = pair_suite(tmp_path / "good.jsonl", 60, same=60)
    passed = invoke("grade", str(good), "--db", db, "--min-quality", "0.9", "--json")
    assert passed.exit_code == 0 and json.loads(passed.stdout)["gate"] == "passed"
    text = invoke("grade", str(good), "--db", f"sqlite:///{tmp_path / 'b.db'}", "--min-quality", "0.9")
    assert "quality gate passed (min 0.9): every candidate is proven" in text.stdout

    bad = pair_suite(tmp_path / "bad.jsonl", 60, same=20)
    failed = invoke("grade", str(bad), "--db", f"sqlite:///{tmp_path / 'c.db'}", "--min-quality", "0.8")
    assert failed.exit_code == 1
    assert "quality gate FAILED (min 0.8)" in failed.stdout and "ruled out" in failed.stdout
    # --allow-unsettled never lets a ruled-out candidate through
    again = invoke(
        "grade", str(bad), "--db", f"sqlite:///{tmp_path / 'd.db'}", "--min-quality", "0.8",
        "--allow-unsettled", "--json",
    )  # fmt: skip
    assert again.exit_code == 1 and json.loads(again.stdout)["gate"] == "failed"


def test_without_min_quality_there_is_no_gate(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 3, same=2)
    result = invoke("grade", str(suite), "--db", db, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["gate"] is None


def test_routing_lines_are_short_and_verbose_prints_the_reason(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 6, same=5)
    short = invoke("grade", str(suite), "--db", db)
    assert short.exit_code == 0
    assert max(len(line) for line in short.stdout.splitlines() if "task qa" in line or "Keep" in line) <= 110
    assert "Keep big: no candidate is proven at 0.9 yet; small needs about" in short.stdout
    assert "anytime-valid" not in short.stdout.split("task qa")[1]
    long = invoke("grade", str(suite), "--db", f"sqlite:///{tmp_path / 'v.db'}", "--verbose")
    tail = long.stdout.split("task qa")[1]
    assert "anytime-valid" in tail and all(len(line) <= 110 for line in tail.splitlines())


def test_cases_are_explained_and_grades_named(tmp_path: Path, db: str) -> None:
    suite = pair_suite(tmp_path / "s.jsonl", 4, same=4)
    invoke("grade", str(suite), "--db", db)
    again = invoke("grade", str(suite), "--db", db)
    assert "cases=4 (8 grades)" in again.stdout
    assert "cases: distinct cases of the task in the ledger" in again.stdout
