"""``llm-connect report`` and ``view`` on the command line."""

from __future__ import annotations

from pathlib import Path

from llm_connect.ledger import QualityLedger
from tests.cli._util import invoke, write_suite
from tests.report.test_report import fill_ledger, table_counts


def _ledger(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with QualityLedger(url) as ledger:
        fill_ledger(ledger)
    return url


def test_report_writes_the_file_and_says_what_it_holds(tmp_path: Path) -> None:
    url = _ledger(tmp_path)
    out = tmp_path / "report.html"
    with QualityLedger(url) as ledger:
        before = table_counts(ledger)
    result = invoke(
        "report", "--db", url, "-o", str(out), "--run", "r1", "--task", "support", "--max-cases", "20"
    )
    assert result.exit_code == 0, result.output
    assert str(out) in result.stdout
    assert "16 of 160 grades" in result.output and "truncated" in result.output
    assert "support: keep the baseline gpt-4o" in result.output or "support: route to" in result.output
    html = out.read_text(encoding="utf-8")
    assert '<section id="routing">' in html and 'id="truncated"' in html
    with QualityLedger(url) as ledger:
        assert table_counts(ledger) == before


def test_an_unknown_run_or_an_empty_selection_is_exit_2_and_no_file(tmp_path: Path) -> None:
    url = _ledger(tmp_path)
    out = tmp_path / "report.html"
    result = invoke("report", "--db", url, "-o", str(out), "--run", "r1", "--run", "ghost")
    assert result.exit_code == 2 and "'ghost'" in result.output
    result = invoke("report", "--db", url, "-o", str(out), "--task", "nowhere")
    assert result.exit_code == 2 and "selection is empty" in result.output and "nowhere" in result.output
    result = invoke("report", "--db", url, "-o", str(out), "--since", "not a date")
    assert result.exit_code == 2 and "ISO 8601" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.db"] or not out.exists()
    assert not out.exists() and not list(tmp_path.glob(".report.html.*"))


def test_a_ledger_that_needs_migrating_is_not_touched(tmp_path: Path) -> None:
    import sqlite3

    empty = tmp_path / "empty.db"
    result = invoke("report", "--db", f"sqlite:///{empty}", "-o", str(tmp_path / "r.html"))
    assert result.exit_code == 2 and "db upgrade" in result.output
    with sqlite3.connect(empty) as conn:  # not migrated: no table was created
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []
    assert not (tmp_path / "r.html").exists()


def test_both_commands_are_listed_and_documented() -> None:
    result = invoke("--help")
    assert "report" in result.output and "view" in result.output
    result = invoke("view", "--help")
    assert result.exit_code == 0 and "--port" in result.output and "read-only" in result.output
    result = invoke("report", "--help")
    assert result.exit_code == 0 and "--max-cases" in result.output and "--since" in result.output


def test_a_baseline_model_named_baseline_is_not_said_twice(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path / "suite.jsonl",
        [
            {
                "id": f"c{i}",
                "prompt": f"q{i}",
                "task": "qa",
                "baseline_response": "a",
                "candidate_response": "b",
            }
            for i in range(3)
        ],
    )  # no model names: the sides are recorded as "baseline" and "candidate"
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    graded = invoke("grade", str(suite), "--db", url)
    assert graded.exit_code == 0, graded.output
    assert "task qa: keep the baseline" in graded.stdout and "baseline baseline" not in graded.stdout
    out = tmp_path / "report.html"
    result = invoke("report", "--db", url, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "  qa: keep the baseline\n" in result.stderr and "baseline baseline" not in result.output
    assert 'keep the <strong class="model">baseline</strong>' in out.read_text(encoding="utf-8")
