"""`llm-connect calibrate` through Typer's runner (in process, so the loopback server's responder applies)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llm_connect.cli import app
from llm_connect.ledger import QualityLedger
from tests.calibration import _world as w

SECRET = "sk-test-calibrate-0123456789"


@pytest.fixture
def world(sqlite_url: str, openai_server: Any) -> tuple[str, Any]:
    with QualityLedger(sqlite_url) as ledger:
        w.record_oracle(ledger, w.make_pairs(60))
    return sqlite_url, openai_server


def _run(url: str, server: Any, *args: str) -> Any:
    base = ["calibrate", "--db", url, "--base-url", server.base_url, "--api-key", SECRET]
    return CliRunner().invoke(app, [*base, *args])


def test_one_command_grades_what_is_missing_calibrates_and_stores(world: tuple[str, Any]) -> None:
    url, server = world
    server.responder = w.judge_responder("fair")
    judge_spec = f"llm:openai:{w.JUDGE_MODEL}"
    result = _run(
        url,
        server,
        "--judge",
        judge_spec,
        "--against",
        "oracle",
        "--probe",
        "position",
        "--probe",
        "length",
        "--json",
        "--grade-missing",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["verdict"] == "pass" and out["passed"] is True
    assert out["grading"]["graded"] == {f"{judge_spec}:rubric-v1": 60, "oracle:v1": 0}
    assert out["probes"]["position"]["n"] == 50 and out["probes"]["self_preference"] is None
    # every model call was a judge call: 60 grades + 50 swapped, no baseline or candidate call
    calls = server.requests_to("/chat/completions")
    assert len(calls) == 110
    assert all(c.body["messages"][0]["content"].startswith("You are an impartial evaluator") for c in calls)
    with QualityLedger(url) as ledger:
        rows = list(ledger.results(grader_id=f"{judge_spec}:rubric-v1"))
        assert {(r.run_id, r.task) for r in rows} == {("run-1", w.TASK)}
        stored = ledger.latest_calibration(f"{judge_spec}:rubric-v1")
        assert stored is not None and stored.passed and stored.id == out["calibration_id"]
        everything = json.dumps([r.to_dict() for r in ledger.results()]) + json.dumps(dict(stored.figures))
    assert SECRET not in everything and SECRET not in result.output


def test_rerun_with_the_grader_id_calls_no_model_again(world: tuple[str, Any]) -> None:
    url, server = world
    server.responder = w.judge_responder("fair")
    first = _run(
        url, server, "--judge", f"llm:openai:{w.JUDGE_MODEL}", "--against", "oracle", "--probe", "position",
        "--grade-missing",
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    before = len(server.requests_to("/chat/completions"))
    assert before == 110
    # the stored grades and the response cache (swapped gradings included) answer everything
    again = _run(
        url,
        server,
        "--judge",
        f"llm:openai:{w.JUDGE_MODEL}:rubric-v1",
        "--against",
        "oracle:v1",
        "--probe",
        "position",
    )
    assert again.exit_code == 0, again.output
    assert len(server.requests_to("/chat/completions")) == before
    assert "graded 0 missing pair(s)" in again.stdout
    uncached = _run(
        url,
        server,
        "--judge",
        f"llm:openai:{w.JUDGE_MODEL}",
        "--against",
        "oracle",
        "--probe",
        "position",
        "--no-cache",
    )
    assert uncached.exit_code == 0
    assert len(server.requests_to("/chat/completions")) == before + 50


def test_human_output_table_and_plots(world: tuple[str, Any], tmp_path: Path) -> None:
    url, server = world
    server.responder = w.judge_responder("length")
    png = tmp_path / "scatter.png"
    result = _run(
        url, server, "--judge", f"llm:openai:{w.JUDGE_MODEL}", "--against", "oracle", "--plot", str(png),
        "--grade-missing",
    )  # fmt: skip
    assert result.exit_code == 1, result.output  # a length-following judge fails its calibration
    for text in ("Spearman", "kappa", "oracle:v1", "Bias probes", "length", "FLAGGED", "verdict: fail"):
        assert text in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = tmp_path / "scatter.html"
    html = _run(
        url,
        server,
        "--judge",
        f"llm:openai:{w.JUDGE_MODEL}",
        "--against",
        "oracle",
        "--no-grade",
        "--plot",
        str(page),
    )
    assert html.exit_code == 1
    text = page.read_text()
    assert "data:image/png;base64," in text and "length bias" in text


def test_real_reference_judges_are_built_from_their_specs(world: tuple[str, Any]) -> None:
    url, server = world
    server.responder = w.judge_responder("fair")
    result = _run(
        url,
        server,
        "--judge",
        f"llm:openai:{w.JUDGE_MODEL}",
        "--against",
        "vrty",
        "--against",
        "oracle",
        "--json",
        "--no-store",
        "--grade-missing",
    )
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    vrty_ids = [gid for gid in out["grading"]["graded"] if gid.startswith("vrty")]
    assert len(vrty_ids) == 1 and out["grading"]["graded"][vrty_ids[0]] == 60
    assert [r["reference"] for r in out["references"]] == [vrty_ids[0], "oracle:v1"]
    assert out["calibration_id"] is None
    with QualityLedger(url) as ledger:
        assert ledger.calibrations() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--against", "oracle", "--plot", "out.pdf"], "must end in .png or .html"),
        (["--against", "nosuchjudge"], "unknown judge 'nosuchjudge'"),
        (["--against", "oracle", "--probe", "verbosity"], "unknown probe"),
        (["--against", "oracle", "--scale", "linear"], "scale must be one of"),
    ],
)
def test_usage_errors_exit_2_with_a_message(world: tuple[str, Any], args: list[str], message: str) -> None:
    url, server = world
    server.responder = w.judge_responder("fair")
    result = _run(url, server, "--judge", f"llm:openai:{w.JUDGE_MODEL}", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert server.requests == []  # rejected before any judge call


def test_judge_failures_are_listed_and_exit_3(world: tuple[str, Any]) -> None:
    url, server = world
    fair = w.judge_responder("fair")
    replies = iter(range(10_000))

    def flaky(body: dict[str, Any]) -> str:
        return "no grade here" if next(replies) % 10 == 0 else fair(body)

    server.responder = flaky
    result = _run(
        url, server, "--judge", f"llm:openai:{w.JUDGE_MODEL}", "--against", "oracle", "--grade-missing"
    )
    assert result.exit_code == 3, result.output
    assert "JudgeOutputError" in result.output
    with QualityLedger(url) as ledger:
        assert ledger.count(grader_id=f"llm:openai:{w.JUDGE_MODEL}:rubric-v1") == 54


def test_help_is_reachable_and_light() -> None:
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['llm-connect', 'calibrate', '--help']\n"
        "try:\n    runpy.run_module('llm_connect', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('HEAVY', sorted(m for m in ('scipy', 'openai', 'matplotlib', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "--against" in out and "--probe" in out
    assert "HEAVY []" in out


@pytest.mark.embeddings
@pytest.mark.slow
def test_embedding_and_vrty_references_with_the_real_minilm_weights(world: tuple[str, Any]) -> None:
    url, server = world
    server.responder = w.judge_responder("fair")
    result = _run(
        url,
        server,
        "--judge",
        f"llm:openai:{w.JUDGE_MODEL}",
        "--against",
        "embedding",
        "--against",
        "vrty",
        "--json",
        "--grade-missing",
    )
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    graded = out["grading"]["graded"]
    assert graded["embedding:all-MiniLM-L6-v2"] == 60 and out["grading"]["errors"] == {}
    refs = {r["reference"]: r for r in out["references"]}
    assert (
        refs["embedding:all-MiniLM-L6-v2"]["n"] == 60 and refs["embedding:all-MiniLM-L6-v2"]["status"] != ""
    )


def test_the_installed_command_calibrates_from_stored_grades(world: tuple[str, Any]) -> None:
    url, server = world
    server.responder = w.judge_responder("fair")
    with QualityLedger(url) as ledger:
        judge = w.llm_judge(server.base_url)
        for p in w.make_pairs(60):
            ledger.record(w.as_result(judge, p), task=w.TASK)
    exe = Path(sys.executable).with_name("llm-connect")
    cmd = [
        str(exe),
        "calibrate",
        "--judge",
        judge.grader_id,
        "--against",
        "oracle:v1",
        "--no-grade",
        "--json",
        "--db",
        url,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["verdict"] == "pass" and out["grading"] is None
