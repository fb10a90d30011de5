"""``llm-connect ledger|route|db``: read the ledger, route on it, manage its schema."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from llm_connect.ledger import QualityLedger, head_revision
from tests.cli._util import invoke, pair_suite


@pytest.fixture
def graded(tmp_path: Path, ledger_url: str) -> str:
    """A ledger (SQLite and PostgreSQL) holding one recorded run ``r1`` of 6 cases."""
    suite = pair_suite(tmp_path / "s.jsonl", 6, same=6)
    result = invoke("grade", str(suite), "--db", ledger_url, "--run-id", "r1")
    assert result.exit_code == 0, result.output
    return ledger_url


def test_summary_json_matches_the_grades(graded: str) -> None:
    result = invoke("ledger", "summary", "--db", graded, "--json")
    assert result.exit_code == 0
    (row,) = json.loads(result.stdout)
    assert (row["task"], row["baseline_model"], row["candidate_model"], row["n"], row["mean"]) == (
        "qa", "big", "small", 6, 1.0,
    )  # fmt: skip
    assert row["n_grades"] == 6 and row["verdict"] == "insufficient" and row["lower_bound"] < 0.9


def test_show_lists_grades_of_a_run(graded: str) -> None:
    result = invoke("ledger", "show", "--db", graded, "--run-id", "r1", "--json", "--limit", "4")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    every = json.loads(invoke("ledger", "show", "--db", graded, "--run-id", "r1", "--json").stdout)
    assert len(every) == 6 and {r["case_id"] for r in every} == {f"c{i}" for i in range(6)}
    assert rows == every[-4:]  # the newest four (graded in a seeded random order, not the file's)
    text = invoke("ledger", "show", "--db", graded)
    assert text.exit_code == 0 and text.stdout.splitlines()[0].split("\t")[:3] == ["id", "run", "case"]


def test_sql_runs_read_only_queries(graded: str) -> None:
    result = invoke("ledger", "sql", "SELECT candidate_model, COUNT(*) AS n FROM grades GROUP BY 1", "--db", graded,
                    "--json")  # fmt: skip
    assert result.exit_code == 0
    assert json.loads(result.stdout) == [{"candidate_model": "small", "n": 6}]
    view = invoke("ledger", "sql", "select n, mean_quality from quality_summary", "--db", graded)
    assert view.exit_code == 0 and view.stdout.splitlines()[1].startswith("6\t1")


def _count(url: str) -> int:
    with QualityLedger(url) as ledger:
        return ledger.count()


@pytest.mark.parametrize(
    "statement", ["DELETE FROM grades", "UPDATE grades SET quality_score = 0", "DROP TABLE grades"]
)
def test_sql_refuses_to_write(graded: str, statement: str) -> None:
    result = invoke("ledger", "sql", statement, "--db", graded)
    assert result.exit_code == 2 and "query failed" in result.stderr
    assert _count(graded) == 6


def test_sql_refuses_several_statements(graded: str) -> None:
    result = invoke("ledger", "sql", "SELECT 1; DELETE FROM grades", "--db", graded)
    assert result.exit_code == 2 and "one SQL statement" in result.stderr
    assert _count(graded) == 6


def test_export_csv_and_jsonl(graded: str, tmp_path: Path) -> None:
    out = tmp_path / "grades.csv"
    result = invoke("ledger", "export", str(out), "--format", "csv", "--db", graded, "--run-id", "r1")
    assert result.exit_code == 0 and "wrote 6 grade(s)" in result.stderr
    with out.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6 and {r["candidate_model"] for r in rows} == {"small"}
    jl = tmp_path / "grades.jsonl"
    assert invoke("ledger", "export", str(jl), "--db", graded).exit_code == 0
    assert len(jl.read_text(encoding="utf-8").splitlines()) == 6
    assert invoke("ledger", "export", str(jl), "--format", "xml", "--db", graded).exit_code == 2


def test_export_takes_the_file_as_o_like_labels_export(graded: str, tmp_path: Path) -> None:
    out = tmp_path / "grades.csv"
    result = invoke("ledger", "export", "-o", str(out), "--db", graded)
    assert result.exit_code == 0 and f"wrote 6 grade(s) to {out}" in result.stderr, result.output
    with out.open(newline="", encoding="utf-8") as fh:  # csv from the extension
        assert len(list(csv.DictReader(fh))) == 6
    jl = tmp_path / "grades.jsonl"
    assert invoke("ledger", "export", "--output", str(jl), "--db", graded).exit_code == 0
    assert len(jl.read_text(encoding="utf-8").splitlines()) == 6
    both = invoke("ledger", "export", str(jl), "-o", str(out), "--db", graded)
    assert both.exit_code == 2 and "give the output file once" in both.stderr
    neither = invoke("ledger", "export", "--db", graded)
    assert neither.exit_code == 2 and "give the output file: llm-connect ledger export FILE" in neither.stderr


def test_failures_says_when_there_are_none(graded: str) -> None:
    plain = invoke("ledger", "failures", "--db", graded)
    assert plain.exit_code == 0 and plain.stdout == "" and plain.stderr == "no failures\n"
    one_run = invoke("ledger", "failures", "--run-id", "r1", "--db", graded)
    assert one_run.exit_code == 0 and one_run.stderr == "no failures in run r1\n"
    as_json = invoke("ledger", "failures", "--db", graded, "--json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout) == [] and as_json.stderr == ""


def test_failures_lists_a_runs_failures(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    with QualityLedger(db) as ledger:
        ledger.record_failure(run_id="r9", case_id="c1", task="qa", stage="candidate", error_type="ServerError",
                              message="503 from server", adapter_id="openai:x")  # fmt: skip
    result = invoke("ledger", "failures", "--run-id", "r9", "--db", db, "--json")
    assert result.exit_code == 0
    assert [(f["case_id"], f["error_type"]) for f in json.loads(result.stdout)] == [("c1", "ServerError")]


def test_route_decides_and_stores_the_decision(graded: str, tmp_path: Path) -> None:
    bulk = pair_suite(tmp_path / "bulk.jsonl", 60, same=60, task="bulk")
    assert invoke("grade", str(bulk), "--db", graded).exit_code == 0
    result = invoke("route", "--task", "bulk", "-b", "big", "-c", "small", "--judge", "exact",
                    "--db", graded, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    decision = json.loads(result.stdout)
    assert decision["model"] == "small" and decision["decision_id"] is not None
    few = invoke("route", "--task", "qa", "-b", "big", "-c", "small", "-j", "exact", "--min-samples", "5",
                 "--db", graded, "--json")  # fmt: skip
    assert json.loads(few.stdout)["model"] == "big"  # 6 perfect cases prove nothing at 95%
    strict = invoke("route", "--task", "qa", "-b", "big", "-c", "small", "-j", "exact", "--db", graded)
    assert strict.exit_code == 0 and strict.stdout.splitlines()[0] == "big"  # 6 cases < 30 needed
    # The per-judge line says the status: too few cases is not settled, not a failure.
    assert "  small  insufficient  exact: insufficient evidence" in strict.stdout
    assert " fail " not in strict.stdout
    proven = invoke("route", "--task", "bulk", "-b", "big", "-c", "small", "--judge", "exact", "--db", graded)
    assert "  small  proven  exact:" in proven.stdout
    assert invoke("route", "--task", "qa", "-b", "big", "-c", "small", "--db", graded).exit_code == 2


def test_db_upgrade_and_current(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'fresh.db'}"
    before = invoke("db", "current", "--db", db, "--json")
    assert before.exit_code == 0 and json.loads(before.stdout)["current"] is None
    up = invoke("db", "upgrade", "--db", db)
    assert up.exit_code == 0 and head_revision() in up.stdout
    after = json.loads(invoke("db", "current", "--db", db, "--json").stdout)
    assert after == {"url": db, "current": head_revision(), "head": head_revision(), "up_to_date": True}
    assert "up to date" in invoke("db", "upgrade", "--db", db).stdout


def test_unusable_database_url_exits_2(tmp_path: Path) -> None:
    result = invoke("ledger", "summary", "--db", "mysql://nobody@localhost/x")
    assert result.exit_code == 2 and "unsupported database" in result.stderr
    missing_dir = invoke("db", "upgrade", "--db", f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    assert missing_dir.exit_code == 2


def test_commands_close_the_ledgers_they_open(graded: str) -> None:
    """A command run in-process (a test's CliRunner, a program calling the app) releases the
    ledger connections it opened when it ends, whether it succeeds or fails; none is left to
    the garbage collector ('deleted while still open')."""
    import gc
    import warnings

    gc.collect()  # earlier tests' garbage is theirs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert invoke("ledger", "summary", "--db", graded).exit_code == 0
        assert invoke("ledger", "show", "--db", graded, "--limit", "2").exit_code == 0
        assert (
            invoke("route", "-t", "qa", "-b", "big", "-c", "small", "-j", "exact", "--db", graded).exit_code
            == 0
        )
        assert invoke("ledger", "sql", "DELETE FROM grades", "--db", graded).exit_code == 2
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
