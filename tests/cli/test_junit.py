"""``llm-connect grade --junit``: a test case per task x candidate x routing judge, for CI systems."""

from __future__ import annotations

from pathlib import Path

import defusedxml.ElementTree as DET
import pytest

from tests.cli._util import invoke, write_suite


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def suite(path: Path, n: int = 80) -> Path:
    # "good" always matches the baseline, "bad" never does; "fuzzy" matches half the time.
    rows = [
        {
            "id": f"c{i}",
            "prompt": f"question {i}",
            "task": "qa",
            "responses": {
                "base": {"text": f"answer {i}", "cost_usd": 0.01},
                "good": {"text": f"answer {i}", "cost_usd": 0.001},
                "bad": {"text": f"wrong {i}", "cost_usd": 0.001},
                "fuzzy": {"text": f"answer {i}" if i % 2 else f"other {i}", "cost_usd": 0.001},
            },
        }
        for i in range(n)
    ]
    return write_suite(path, rows)


def grade(tmp_path: Path, db: str, *extra: str, n: int = 80):  # type: ignore[no-untyped-def]
    return invoke(
        "grade", str(suite(tmp_path / "s.jsonl", n)), "-b", "recorded:base", "-c", "recorded:good",
        "-c", "recorded:bad", "-c", "recorded:fuzzy", "--db", db, *extra,
    )  # fmt: skip


def cases(path: Path) -> dict[str, object]:
    root = DET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite_el,) = root.findall("testsuite")
    return {c.get("name"): c for c in suite_el.findall("testcase")} | {"_suite": suite_el}


def test_one_case_per_candidate_and_routing_judge_failed_when_ruled_out(tmp_path: Path, db: str) -> None:
    out = tmp_path / "results.xml"
    result = grade(tmp_path, db, "--junit", str(out), "--judge", "exact", "--judge", "length:max_words=50")
    assert result.exit_code == 0, result.output  # no --min-quality: the exit code has no gate
    found = cases(out)
    suite_el = found.pop("_suite")
    assert set(found) == {
        f"qa / recorded:{c} / {j}" for c in ("good", "bad", "fuzzy") for j in ("exact", "length")
    }
    good, bad, fuzzy = (found[f"qa / recorded:{c} / exact"] for c in ("good", "bad", "fuzzy"))
    assert good.find("failure") is None and good.find("skipped") is None  # type: ignore[attr-defined]
    failure = bad.find("failure")  # type: ignore[attr-defined]
    assert failure is not None and "ruled out" in failure.get("message")
    assert fuzzy.find("failure") is not None or fuzzy.find("skipped") is not None  # type: ignore[attr-defined]
    props = {p.get("name"): p.get("value") for p in good.iter("property")}  # type: ignore[attr-defined]
    assert props["verdict"] == "proven" and props["cases"] == "80"
    assert suite_el.get("tests") == "6" and int(suite_el.get("failures")) >= 1  # type: ignore[attr-defined]


def test_route_on_limits_the_cases_to_the_routing_judges(tmp_path: Path, db: str) -> None:
    out = tmp_path / "results.xml"
    result = grade(
        tmp_path,
        db,
        "--junit",
        str(out),
        "--judge",
        "exact",
        "--judge",
        "length:max_words=50",
        "--route-on",
        "exact",
    )
    assert result.exit_code == 0, result.output
    assert {name.rsplit(" / ", 1)[-1] for name in cases(out) if name != "_suite"} == {"exact"}


def test_unsettled_evidence_is_skipped_with_the_reason(tmp_path: Path, db: str) -> None:
    out = tmp_path / "results.xml"
    result = grade(tmp_path, db, "--junit", str(out), n=3)
    assert result.exit_code == 0, result.output
    good = cases(out)["qa / recorded:good / exact"]
    skipped = good.find("skipped")  # type: ignore[attr-defined]
    assert skipped is not None and skipped.get("message").startswith("insufficient")


def test_the_gate_and_the_xml_agree(tmp_path: Path, db: str) -> None:
    out = tmp_path / "results.xml"
    result = grade(tmp_path, db, "--junit", str(out), "--min-quality", "0.9")
    assert result.exit_code == 1
    failed = [n for n, c in cases(out).items() if n != "_suite" and c.find("failure") is not None]  # type: ignore[attr-defined]
    assert "qa / recorded:bad / exact" in failed


def test_a_junit_path_in_a_missing_folder_is_a_usage_error_before_any_write(tmp_path: Path, db: str) -> None:
    result = grade(tmp_path, db, "--junit", str(tmp_path / "nope" / "r.xml"))
    assert result.exit_code == 2 and "--junit" in result.stderr
    assert not (tmp_path / "ledger.db").exists()


def test_grade_report_writes_the_runs_html_report(tmp_path: Path, db: str) -> None:
    out = tmp_path / "report.html"
    result = grade(tmp_path, db, "--report", str(out), "--junit", str(tmp_path / "r.xml"))
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    assert 'id="decisions"' in html and "Routed to good instead of base" in html
    assert "report:" in result.stderr and (tmp_path / "r.xml").exists()


def test_a_report_path_in_a_missing_folder_is_a_usage_error(tmp_path: Path, db: str) -> None:
    result = grade(tmp_path, db, "--report", str(tmp_path / "nope" / "r.html"))
    assert result.exit_code == 2 and "--report" in result.stderr
    assert not (tmp_path / "ledger.db").exists()
