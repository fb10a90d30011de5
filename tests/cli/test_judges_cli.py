"""``llm-connect judges anchor|check|accept|list`` end to end (issue 37): a real LLM judge over the
loopback server, anchored, checked, moved, failing, accepted; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from llm_connect.calibration import anchor_store
from llm_connect.ledger import QualityLedger
from tests.cli._util import invoke, live_suite

KEY = "sk-test-0123456789abcdef"
JUDGE = "llm:openai:judge"
GRADER = "llm:openai:judge:rubric-v1"
N = 100


def _judge(shift: float = 0.0):
    """A judge whose grade depends on the case (its question number) and moves by ``shift``."""

    def respond(body: dict[str, Any]) -> str:
        if body.get("response_format") is None:
            return f"answer from {body['model']}"
        text = json.dumps(body["messages"])
        number = int(re.search(r"question (\d+)", text).group(1))  # type: ignore[union-attr]
        score = min(1.0, 0.1 + 0.08 * (number % 10) + shift)
        return json.dumps({"quality_score": score, "notes": "ok"})

    return respond


def _grade(tmp_path: Path, db: str, server: Any) -> None:
    result = invoke(
        "grade", str(live_suite(tmp_path / "s.jsonl", N)), "-b", "openai:big", "-c", "openai:small",
        "--judge", JUDGE, "--db", db, "--base-url", server.base_url, "--api-key", KEY, "--allow-uncalibrated",
    )  # fmt: skip
    assert result.exit_code == 0, result.output


def _check(db: str, server: Any, *extra: str) -> Any:
    return invoke(
        "judges", "check", "--judge", JUDGE, "--task", "qa", "--db", db, "--base-url", server.base_url,
        "--api-key", KEY, *extra,
    )  # fmt: skip


def test_anchor_check_drift_incomplete_and_accept(
    tmp_path: Path, ledger_url: str, openai_server: Any
) -> None:
    openai_server.responder = _judge()
    openai_server.served_models = {"judge": "judge-2026-01-01"}
    _grade(tmp_path, ledger_url, openai_server)

    got = invoke("judges", "anchor", "--judge", JUDGE, "--task", "qa", "--db", ledger_url, "--seed", "3")
    assert got.exit_code == 0, got.output
    assert f"anchor set 1 for {GRADER} on qa: {N} cases (0 labelled by people), seed 3" in got.stdout
    again = invoke("judges", "anchor", "--judge", JUDGE, "--task", "qa", "--db", ledger_url)
    assert again.exit_code == 2 and "--replace" in again.output

    # The same judge, asked again: stable (exit 0), one call per anchored case, stored.
    calls_before = len(openai_server.requests)
    stable = _check(ledger_url, openai_server, "--json")
    assert stable.exit_code == 0, stable.output
    data = json.loads(stable.stdout)
    assert data["status"] == "stable" and data["calls"] == N and data["changed_share"] == 0.0
    assert len(openai_server.requests) - calls_before == N
    assert data["identity"]["judge_model"] == "judge-2026-01-01" and not data["identity_changed"]

    # The provider moves the model behind the name: every grade 0.15 higher, a new dated name.
    openai_server.responder = _judge(shift=0.15)
    openai_server.served_models = {"judge": "judge-2026-03-01"}
    drifted = _check(ledger_url, openai_server)
    assert drifted.exit_code == 1, drifted.output
    assert (
        "drifted" in drifted.stdout
        and "judge_model 'judge-2026-01-01' -> 'judge-2026-03-01'" in drifted.stdout
    )
    assert f"cost: {N} judge call(s)" in drifted.stdout

    # Routing stops counting the drifted judge: named as ignored, the baseline kept.
    routed = invoke("route", "-t", "qa", "-b", "big", "-c", "small", "-j", GRADER, "--allow-uncalibrated",
                    "--db", ledger_url)  # fmt: skip
    assert routed.exit_code == 0, routed.output
    assert f"{GRADER} drifted since" in routed.output and "judges accept" in routed.output
    assert routed.output.splitlines()[0] == "big"

    # A judge server error: the check is stored as incomplete (exit 3), never read as stable.
    openai_server.responder = _judge()
    for _ in range(40):
        openai_server.queue_fault(status=500, path="/chat/completions")
    broken = _check(ledger_url, openai_server, "--concurrency", "1")
    assert broken.exit_code == 3, broken.output
    assert "incomplete" in broken.stdout
    with QualityLedger(ledger_url) as ledger:
        store = anchor_store(ledger)
        statuses = [c.status for c in store.checks(1)]
    assert statuses == ["stable", "drifted", "incomplete"]

    # Drifted stays drifted until the user accepts the new behaviour (a new anchor set).
    assert _check(ledger_url, openai_server).exit_code == 1
    accepted = invoke("judges", "accept", "--judge", JUDGE, "--task", "qa", "--db", ledger_url, "--seed", "4")
    assert accepted.exit_code == 0 and "accepted: anchor set 2" in accepted.stdout
    assert _check(ledger_url, openai_server).exit_code == 0
    routed = invoke("route", "-t", "qa", "-b", "big", "-c", "small", "-j", GRADER, "--allow-uncalibrated",
                    "--db", ledger_url)  # fmt: skip
    assert routed.exit_code == 0 and "drifted since" not in routed.output, routed.output
    # ... and the decision says the grades it counts were made by the model before the change
    said = " ".join(routed.output.split())
    assert (
        f"{GRADER}'s judge changed under its name (judge_model 'judge-2026-01-01' -> 'judge-2026-03-01'): "
        "check 5"
        in said
        and "while its grades on qa were made by the old one" in said
    ), said

    # The report shows each anchor set's checks as a timeline.
    page = tmp_path / "report.html"
    assert invoke("report", "-o", str(page), "--db", ledger_url).exit_code == 0
    html = page.read_text(encoding="utf-8")
    section = html[html.index('<section id="judge-checks">') :]
    section = section[: section.index("</section>")]
    first, second = section.split('data-anchor="2"')
    assert re.findall(r'data-status="([a-z ]+)"', first) == ["stable", "drifted", "incomplete", "drifted"]
    assert re.findall(r'data-status="([a-z ]+)"', second) == ["stable"] and "#1 (replaced)" in first

    listed = invoke("judges", "list", "--db", ledger_url, "--json")
    rows = json.loads(listed.stdout)
    assert [(r["judge"], r["task"], r["grades"], r["anchor_id"], r["last_check"]) for r in rows] == [
        (GRADER, "qa", N, 2, "stable")
    ]


def test_an_unknown_judge_or_task_is_a_usage_error_and_writes_nothing(
    tmp_path: Path, openai_server: Any
) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    openai_server.responder = _judge()
    _grade(tmp_path, db, openai_server)
    for args in (("--judge", "llm:openai:other", "--task", "qa"), ("--judge", JUDGE, "--task", "nope")):
        got = invoke("judges", "anchor", *args, "--db", db)
        assert got.exit_code == 2 and "no grades by judge" in got.output and args[1] in got.output
        checked = invoke("judges", "check", *args, "--db", db)
        assert checked.exit_code == 2
    with QualityLedger(db) as ledger:
        assert anchor_store(ledger).anchors() == []
    missing = invoke("judges", "check", "--judge", JUDGE, "--task", "qa", "--db", db)
    assert missing.exit_code == 2 and "has no anchor set on task 'qa'" in missing.output


def _questions(path: Path, start: int, n: int) -> Path:
    rows = [{"id": f"q{i}", "prompt": f"question {i}", "task": "qa"} for i in range(start, start + n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_grade_checks_anchored_judges_during_the_run_and_on_a_new_identity(
    tmp_path: Path, openai_server: Any
) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    openai_server.responder = _judge()
    openai_server.served_models = {"judge": "judge-2026-01-01"}
    _grade(tmp_path, db, openai_server)
    assert invoke("judges", "anchor", "--judge", JUDGE, "--task", "qa", "--db", db).exit_code == 0
    common = ("-b", "openai:big", "-c", "openai:small", "--judge", JUDGE, "--db", db, "--base-url",
              openai_server.base_url, "--api-key", KEY, "--allow-uncalibrated", "--json")  # fmt: skip

    # Same judge, a new run of new cases with a check every 50: two checks, both stable.
    calm = invoke(
        "grade", str(_questions(tmp_path / "b.jsonl", 100, 100)), *common, "--check-judges-every", "50"
    )
    assert calm.exit_code == 0, calm.output
    checks = json.loads(calm.stdout)["judge_checks"]
    assert [(c["why_run"], c["status"], c["calls"]) for c in checks] == [
        ("after 50 graded cases", "stable", N),
        ("after 100 graded cases", "stable", N),
    ]

    # The provider swaps the model behind the name: no --check-judges-every, yet the new served
    # model in this run's grades triggers one check at the end, which finds the drift, and the
    # run's routing already ignores the judge.
    openai_server.responder = _judge(shift=0.15)
    openai_server.served_models = {"judge": "judge-2026-03-01"}
    moved = invoke("grade", str(_questions(tmp_path / "c.jsonl", 200, 20)), *common)
    assert moved.exit_code == 0, moved.output
    data = json.loads(moved.stdout)
    assert [(c["why_run"], c["status"]) for c in data["judge_checks"]] == [
        ("the judge's identity changed since its anchor set", "drifted")
    ]
    assert data["judge_checks"][0]["identity_changed"] is True
    reasons = " ".join(d["reason"] for d in data["routing"])
    assert f"{GRADER} drifted since" in reasons


def test_a_new_system_fingerprint_under_the_same_name_is_a_new_identity(
    tmp_path: Path, openai_server: Any
) -> None:
    """The served name stays; the server's fingerprint changes: grade checks the judge at the end
    and the check names the fingerprint's change (the judge grades as before: stable)."""
    db = f"sqlite:///{tmp_path / 'l.db'}"
    openai_server.responder = _judge()
    openai_server.fingerprints = {"judge": "fp_a"}
    _grade(tmp_path, db, openai_server)
    anchored = invoke("judges", "anchor", "--judge", JUDGE, "--task", "qa", "--db", db, "--json")
    assert json.loads(anchored.stdout)["identity"]["system_fingerprint"] == "fp_a"
    openai_server.fingerprints = {"judge": "fp_b"}
    got = invoke(
        "grade", str(_questions(tmp_path / "d.jsonl", 300, 10)), "-b", "openai:big", "-c", "openai:small",
        "--judge", JUDGE, "--db", db, "--base-url", openai_server.base_url, "--api-key", KEY,
        "--allow-uncalibrated",
    )  # fmt: skip
    assert got.exit_code == 0, got.output
    assert "judge check (the judge's identity changed since its anchor set)" in got.stdout
    assert "system_fingerprint 'fp_a' -> 'fp_b'" in got.stdout and ": stable:" in got.stdout
    # judges list shows both fingerprints under the one served name, flagged
    listed = invoke("judges", "list", "--db", db, "--task", "qa")
    assert listed.exit_code == 0 and "IDENTITY CHANGED" in listed.stdout, listed.output
    prints = [line for line in listed.stdout.splitlines() if "fingerprint" in line]
    assert [("fp_a" in p, "fp_b" in p) for p in prints] == [(True, False), (False, True)], listed.stdout


def _two_judges(shift_new: float) -> Any:
    """The old judge ('judge') as _judge(); the new one ('judge2') the same, moved by ``shift_new``."""
    old, new = _judge(), _judge(shift=shift_new)

    def respond(body: dict[str, Any]) -> str:
        return new(body) if body.get("model") == "judge2" else old(body)

    return respond


def test_bridge_says_whether_a_new_judge_may_stand_for_the_old_one(
    tmp_path: Path, openai_server: Any
) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    openai_server.responder = _two_judges(0.0)
    _grade(tmp_path, db, openai_server)
    assert (
        invoke("judges", "anchor", "--judge", JUDGE, "--task", "qa", "--db", db, "--size", "40").exit_code
        == 0
    )
    common = (
        "--from",
        JUDGE,
        "--task",
        "qa",
        "--db",
        db,
        "--base-url",
        openai_server.base_url,
        "--api-key",
        KEY,
    )
    before = len(openai_server.requests)

    same = invoke("judges", "bridge", *common, "--to", "llm:openai:judge2", "--sample", "60", "--json")
    assert same.exit_code == 0, same.output
    data = json.loads(same.stdout)
    assert (data["verdict"], data["cases"], data["anchored"], data["calls"]) == (
        "interchangeable",
        100,
        40,
        100,
    )
    assert data["mean_abs_diff"] == 0.0 and data["spearman"] == 1.0 and data["kappa"] is None  # not verdicts
    assert len(openai_server.requests) - before == 100

    openai_server.responder = _two_judges(0.1)
    moved = invoke("judges", "bridge", *common, "--to", "llm:openai:judge2", "--sample", "60")
    assert moved.exit_code == 1, moved.output
    assert "not interchangeable" in moved.stdout and "none of the old judge's is reused" in moved.stdout
    with QualityLedger(db) as ledger:  # nothing written: the grades are the first run's alone
        assert {r.grader_id for r in ledger.results()} == {GRADER}
    itself = invoke("judges", "bridge", *common, "--to", JUDGE)
    assert itself.exit_code == 2 and "is the judge being replaced" in itself.output


def test_grade_flags_a_new_served_model_without_an_anchor_set(tmp_path: Path, openai_server: Any) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    openai_server.responder = _judge()
    openai_server.served_models = {"judge": "judge-2026-01-01"}
    _grade(tmp_path, db, openai_server)
    openai_server.served_models = {"judge": "judge-2026-03-01"}
    args = ("-b", "openai:big", "-c", "openai:small", "--judge", JUDGE, "--db", db, "--base-url",
            openai_server.base_url, "--api-key", KEY, "--allow-uncalibrated")  # fmt: skip
    got = invoke("grade", str(_questions(tmp_path / "e.jsonl", 400, 5)), *args)
    assert got.exit_code == 0, got.output
    assert (
        f"judge identity: {GRADER} on qa answered as judge-2026-03-01 in this run; its earlier grades were "
        "served by judge-2026-01-01"
    ) in " ".join(got.stdout.split())
    # The decision's evidence says so too: the grades it counts mix two served models.
    routed = invoke("route", "-t", "qa", "-b", "big", "-c", "small", "-j", GRADER, "--allow-uncalibrated",
                    "--db", db, "--json")  # fmt: skip
    assert routed.exit_code == 0, routed.output
    (change,) = json.loads(routed.stdout)["identity_changes"]
    assert (change["grader_id"], change["reference"], change["grades_newer"]) == (
        GRADER, "its first grade on the task", True
    )  # fmt: skip
    assert (change["before"]["judge_model"], change["now"]["judge_model"]) == (
        "judge-2026-01-01",
        "judge-2026-03-01",
    )
    assert "judges anchor --judge" in json.loads(routed.stdout)["reason"]
    again = invoke("grade", str(_questions(tmp_path / "f.jsonl", 500, 5)), *args, "--json")
    # the earlier grades name the new model too now: nothing new to flag in this run's output,
    assert json.loads(again.stdout)["judge_identity_changes"] == []
    assert json.loads(again.stdout)["judge_checks"] == []  # no anchor set: nothing to check
    # while the decision still counts grades of both models until an anchor set vouches for one
    with QualityLedger(db) as ledger:
        store = anchor_store(ledger)
        assert list(store.identity_changes([GRADER, "exact"], "qa")) == [GRADER]


def test_a_check_of_cases_whose_texts_were_pruned_names_them(tmp_path: Path, openai_server: Any) -> None:
    import sqlite3

    db_path = tmp_path / "l.db"
    db = f"sqlite:///{db_path}"
    openai_server.responder = _judge()
    _grade(tmp_path, db, openai_server)
    assert (
        invoke("judges", "anchor", "--judge", JUDGE, "--task", "qa", "--db", db, "--size", "5").exit_code == 0
    )
    with QualityLedger(db) as ledger:
        anchored = [c.case_id for c in anchor_store(ledger).active_anchor(GRADER, "qa").cases]  # type: ignore[union-attr]
    with sqlite3.connect(db_path) as conn:  # what pruning the texts leaves: the digests, no text
        conn.execute("UPDATE grades SET prompt = NULL, baseline_text = NULL, candidate_text = NULL WHERE case_id = ?",
                     (anchored[2],))  # fmt: skip
    got = _check(db, openai_server)
    assert got.exit_code == 2 and "1 anchored case(s) lost their stored texts" in got.output
    assert anchored[2] in got.output and "--replace" in got.output
    with QualityLedger(db) as ledger:
        assert anchor_store(ledger).checks(1) == []  # nothing stored


def test_bridge_gives_kappa_for_judges_that_give_verdicts(tmp_path: Path, openai_server: Any) -> None:
    """Both judges grade 0 / 0.5 / 1 (as pairwise judges do); the new one flips a verdict in ten:
    kappa with its interval is reported beside Spearman, and the flips make it not interchangeable."""

    def verdicts(body: dict[str, Any]) -> str:
        if body.get("response_format") is None:
            return f"answer from {body['model']}"
        number = int(re.search(r"question (\d+)", json.dumps(body["messages"])).group(1))  # type: ignore[union-attr]
        score = (0.0, 0.5, 1.0)[number % 3]
        if body.get("model") == "judge2" and number % 10 == 0:
            score = 1.0 - score
        return json.dumps({"quality_score": score, "notes": "ok"})

    db = f"sqlite:///{tmp_path / 'l.db'}"
    openai_server.responder = verdicts
    _grade(tmp_path, db, openai_server)
    got = invoke(
        "judges", "bridge", "--from", JUDGE, "--to", "llm:openai:judge2", "--task", "qa", "--db", db,
        "--base-url", openai_server.base_url, "--api-key", KEY, "--json",
    )  # fmt: skip
    data = json.loads(got.stdout)
    assert got.exit_code == 1 and data["verdict"] == "not interchangeable"
    assert 0.7 < data["kappa"] < 1.0 and data["kappa_low"] <= data["kappa"] <= data["kappa_high"] <= 1.0
