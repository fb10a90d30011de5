"""``llm-connect watch`` (issue 38, item 2): production calls followed as files grow, a sampled share
graded in shadow against the loopback OpenAI-compatible server, as a run of the watch's own; bad
lines and judge failures named and settled; rotation and truncation picked up; SIGTERM and
Ctrl-C stop cleanly and a restart grades no call twice; a candidate that got worse is rolled back
and the hook is called."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger
from llm_connect.traffic import sampled
from tests.cli._util import invoke

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-watch"
JUDGE_ID = "llm:openai:judge:rubric-v1"


def _line(i: int, *, model: str = "big", task: str | None = "qa", answer: str | None = None) -> str:
    meta = {} if task is None else {"task": task}
    text = answer if answer is not None else f"echo: question {i}"
    return (
        json.dumps(
            {
                "id": f"req-{i}",
                "request": {"model": model, "messages": [{"role": "user", "content": f"question {i}"}]},
                "response": {
                    "model": model,
                    "choices": [{"message": {"role": "assistant", "content": text}}],
                },
                "metadata": meta,
            }
        )
        + "\n"
    )


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)


def _args(log: Path, db: str, server: Any, *extra: str) -> list[str]:
    return [
        "watch", str(log), "-b", "openai:big", "-c", "openai:small", "--task-from", "task",
        "--sample-rate", "1", "--db", db, "--base-url", server.base_url, "--api-key", KEY,
        "--concurrency", "2", "--name", "w", *extra,
    ]  # fmt: skip


def _graded(db: str) -> list[str]:
    with QualityLedger(db) as ledger:
        return [r.case_id for r in ledger.results(run_id="watch-w")]


def _chat(server: Any, model: str | None = None) -> list[Any]:
    return [
        r
        for r in server.requests_to("/chat/completions")
        if model is None or (r.body or {}).get("model") == model
    ]


def test_growth_a_partial_line_and_a_bad_line(tmp_path: Path, ledger_url: str, openai_server: Any) -> None:
    log = tmp_path / "calls.jsonl"
    partial = _line(4)
    log.write_text("".join(_line(i) for i in range(3)) + "not json\n" + _line(3, task=None) + partial[:25])
    first = invoke(*_args(log, ledger_url, openai_server, "-j", "exact", "--once"))
    assert first.exit_code == 0, first.output
    assert "skipped: " in first.stderr and "not valid JSON" in first.stderr and ":4" in first.stderr
    assert "no task" in first.stderr and "req-3" in first.stderr
    assert sorted(_graded(ledger_url)) == ["req-0", "req-1", "req-2"]
    assert len(_chat(openai_server)) == 3  # the candidate asked once per call (the baseline served)

    _append(log, partial[25:] + _line(5))  # the partial line is complete now, and one more
    second = invoke(*_args(log, ledger_url, openai_server, "-j", "exact", "--once"))
    assert second.exit_code == 0, second.output
    assert "2 graded" in second.stdout and "not valid JSON" not in second.stderr
    assert sorted(_graded(ledger_url)) == ["req-0", "req-1", "req-2", "req-4", "req-5"]
    assert len(_chat(openai_server)) == 5
    with QualityLedger(ledger_url) as ledger:
        rows = list(ledger.results(run_id="watch-w"))
        run = ledger.run("watch-w")
    assert {(r.baseline_model, r.candidate_model, r.task) for r in rows} == {("big", "small", "qa")}
    assert run is not None and run.config is not None and run.config["candidate"] == "openai:small"

    again = invoke(*_args(log, ledger_url, openai_server, "-j", "exact", "--once"))
    assert again.exit_code == 0 and "0 call(s) read" in again.stdout
    assert len(_chat(openai_server)) == 5


def test_a_judge_failure_is_a_failed_case_never_a_grade(
    tmp_path: Path, sqlite_url: str, openai_server: Any
) -> None:
    def respond(body: dict[str, Any]) -> str:
        system = " ".join(
            str(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "system"
        )
        if body.get("response_format") is not None or "quality_score" in system:
            return "I would rather not grade this."
        return "echo"

    openai_server.responder = respond
    log = tmp_path / "calls.jsonl"
    log.write_text(_line(0) + _line(1))
    args = _args(log, sqlite_url, openai_server, "-j", "llm:openai:judge", "--once", "--max-retries", "0")
    done = invoke(*args)
    assert done.exit_code == 3, done.output
    assert "failed: " in done.stderr and "judge" in done.stderr and "2 failed" in done.stdout
    with QualityLedger(sqlite_url) as ledger:
        assert list(ledger.results(run_id="watch-w")) == []
        assert {(f.case_id, f.stage) for f in ledger.failures("watch-w")} == {
            ("req-0", "judge"),
            ("req-1", "judge"),
        }
    calls = len(_chat(openai_server))
    again = invoke(*args)  # failed calls are settled: not asked again
    assert again.exit_code == 0 and "0 call(s) read" in again.stdout and len(_chat(openai_server)) == calls


def test_sampling_grades_the_same_calls_whatever_the_batches(
    tmp_path: Path, sqlite_url: str, openai_server: Any
) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text("".join(_line(i) for i in range(40)))
    args = _args(log, sqlite_url, openai_server, "-j", "exact", "--once", "--sample-rate", "0.3")
    assert invoke(*args).exit_code == 0
    expected = sorted(f"req-{i}" for i in range(40) if sampled(f"req-{i}", 0.3))
    assert sorted(_graded(sqlite_url)) == expected and 0 < len(expected) < 40
    other = sqlite_url.replace(".db", "-other.db")
    log2 = tmp_path / "again.jsonl"
    for i in range(40):  # line by line this time: the same calls are chosen
        _append(log2, _line(i))
        if i % 7 == 0:
            assert (
                invoke(
                    *_args(log2, other, openai_server, "-j", "exact", "--once", "--sample-rate", "0.3")
                ).exit_code
                == 0
            )
    assert (
        invoke(*_args(log2, other, openai_server, "-j", "exact", "--once", "--sample-rate", "0.3")).exit_code
        == 0
    )
    assert sorted(_graded(other)) == expected


def test_rotation_and_truncation_are_picked_up(tmp_path: Path, sqlite_url: str, openai_server: Any) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text(_line(0))
    args = _args(log, sqlite_url, openai_server, "-j", "exact", "--once")
    assert invoke(*args).exit_code == 0
    _append(log, _line(1))
    log.rename(tmp_path / "calls.jsonl.1")  # rotated while nothing followed it
    log.write_text(_line(2) + _line(3))
    rotated = invoke(*args)
    assert rotated.exit_code == 0 and "rotated" in rotated.stderr, rotated.output
    assert sorted(_graded(sqlite_url)) == ["req-0", "req-1", "req-2", "req-3"]
    with log.open("r+b") as fh:  # copytruncate
        fh.truncate(0)
    log.write_text(_line(4))
    cut = invoke(*args)
    assert cut.exit_code == 0 and "truncated" in cut.stderr, cut.output
    assert sorted(_graded(sqlite_url)) == ["req-0", "req-1", "req-2", "req-3", "req-4"]
    assert len(_chat(openai_server)) == 5


def test_a_pattern_picks_up_the_files_that_appear(
    tmp_path: Path, sqlite_url: str, openai_server: Any
) -> None:
    """``watch 'logs/app-*.jsonl'`` (quoted: the watch expands it at every look): a dated file
    that appears while the watch is down is read from its start at the next start."""
    (tmp_path / "app-1.jsonl").write_text(_line(0))
    args = _args(tmp_path / "app-*.jsonl", sqlite_url, openai_server, "-j", "exact", "--once")
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    assert _graded(sqlite_url) == ["req-0"]
    (tmp_path / "app-2.jsonl").write_text(_line(1) + _line(2))
    _append(tmp_path / "app-1.jsonl", _line(3))
    second = invoke(*args)
    assert second.exit_code == 0, second.output
    assert "app-2.jsonl: new since the watch stopped" in second.stderr
    assert sorted(_graded(sqlite_url)) == ["req-0", "req-1", "req-2", "req-3"]
    assert len(_chat(openai_server)) == 4  # no call graded twice
    assert "offsets of 2 file(s) stored" in second.stdout


def _start(args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "llm_connect", *args], cwd=ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _stop_when(proc: subprocess.Popen[str], ready: Callable[[], bool], sig: int) -> tuple[int, str, str]:
    deadline = time.monotonic() + 120
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the watch did not get going"
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_sigterm_and_ctrl_c_stop_cleanly_and_a_restart_grades_no_call_twice(
    tmp_path: Path, ledger_url: str, openai_server: Any
) -> None:
    openai_server.delay_s = 0.1  # calls in flight when the signal comes
    log = tmp_path / "calls.jsonl"
    log.write_text("".join(_line(i) for i in range(40)))
    args = _args(log, ledger_url, openai_server, "-j", "exact", "--poll", "0.1")
    code, out, err = _stop_when(_start(args), lambda: len(_chat(openai_server)) >= 3, signal.SIGTERM)
    assert code == 0, err
    assert "stopping:" in err and "(run watch-w)" in out
    first = _graded(ledger_url)
    assert 0 < len(first) < 40 and len(_chat(openai_server)) == len(first)  # in-flight calls were recorded

    _append(log, "".join(_line(i) for i in range(40, 50)))
    code, _, err = _stop_when(
        _start(args), lambda: len(_chat(openai_server)) >= len(first) + 3, signal.SIGINT
    )
    assert code == 130, err

    done = invoke(*args, "--once")
    assert done.exit_code == 0, done.output
    graded = _graded(ledger_url)
    assert sorted(graded) == sorted(f"req-{i}" for i in range(50)) and len(graded) == len(set(graded))
    # every call's candidate asked once in all, over three processes
    assert sorted((r.body or {})["messages"][-1]["content"] for r in _chat(openai_server)) == sorted(
        f"question {i}" for i in range(50)
    )
    with QualityLedger(ledger_url) as ledger:
        run = ledger.run("watch-w")
    assert run is not None and run.status == "completed"


def _seed(
    db: str, make_result: Callable[..., GradingResult], *, n: int = 300, seed: int = 3, tiers: bool = False
) -> None:
    """``n`` cases where the candidate matched the baseline, graded by the judge (with ``tiers``,
    metadata ``tier`` alternating gold and silver)."""
    from llm_connect.ledger import RecordItem

    rng = random.Random(seed)
    with QualityLedger(db) as ledger:
        ledger.record_batch(
            [
                RecordItem(
                    make_result(
                        1.0 if rng.random() < 0.995 else 0.5,
                        grader_id=JUDGE_ID,
                        baseline_model="big",
                        candidate_model="small",
                        prompt=f"seed {i}",
                        asks_llm=True,
                    ),
                    "qa",
                    "seed",
                    f"seed-{i}",
                    (),
                    metadata={"tier": "gold" if i % 2 else "silver"} if tiers else None,
                )
                for i in range(n)
            ]
        )


def test_a_candidate_that_got_worse_is_rolled_back_and_the_hook_called(
    tmp_path: Path, ledger_url: str, openai_server: Any, make_result: Callable[..., GradingResult]
) -> None:
    from tests.fixtures.structured_output import judge_responder

    _seed(ledger_url, make_result)
    routed = invoke(
        "route",
        "-t",
        "qa",
        "-b",
        "big",
        "-c",
        "small",
        "-j",
        JUDGE_ID,
        "--allow-uncalibrated",
        "--db",
        ledger_url,
    )
    assert routed.exit_code == 0 and routed.stdout.splitlines()[0] == "small", routed.output

    openai_server.responder = judge_responder(0.05, lambda body: "the baseline's answer")
    log = tmp_path / "calls.jsonl"  # production now served by the candidate, and badly
    log.write_text("".join(_line(i, model="small", answer="nonsense") for i in range(80)))
    got = tmp_path / "hook.json"
    hook = f"{sys.executable} -c \"import sys; open(sys.argv[1], 'w').write(sys.stdin.read())\" {got}"
    args = _args(log, ledger_url, openai_server, "-j", "llm:openai:judge", "--once", "--allow-uncalibrated")
    done = invoke(*args, "--on-rollback", hook)
    assert done.exit_code == 0, done.output
    assert "rollback: small was rolled back at" in done.stderr and "qa: big serves" in done.stderr
    sent = json.loads(got.read_text(encoding="utf-8"))
    assert sent["model"] == "big" and sent["rollback"]["new"] is True and sent["rollback"]["model"] == "small"
    assert sent["rollback"]["grader_id"] == JUDGE_ID and sent["decision_id"] > 0
    # shadow grading asked the baseline (production was the candidate's answer), once per call
    assert len(_chat(openai_server, "big")) == 80
    with QualityLedger(ledger_url) as ledger:
        rows = list(ledger.results(run_id="watch-w"))
        latest = ledger.decisions("qa", limit=1)[-1]
    assert len(rows) == 80 and {r.candidate_model for r in rows} == {"small"}
    assert latest.model == "big" and latest.rollback is not None


def test_with_slices_the_slice_that_got_worse_is_rolled_back_alone(
    tmp_path: Path, sqlite_url: str, openai_server: Any, make_result: Callable[..., GradingResult]
) -> None:
    """``watch --slice-by meta:tier``: each tier watched on its own cases; the tier whose answers got
    worse goes back to the baseline, the other keeps the candidate, and the hook hears of it."""
    from tests.fixtures.structured_output import judge_responder

    _seed(sqlite_url, make_result, n=400, seed=4, tiers=True)
    route = ("route", "-t", "qa", "-b", "big", "-c", "small", "-j", JUDGE_ID, "--allow-uncalibrated")
    routed = invoke(*route, "--slice-by", "meta:tier", "--db", sqlite_url, "--json")
    assert routed.exit_code == 0, routed.output
    assert {s["name"]: s["model"] for s in json.loads(routed.stdout)["slices"]["slices"]} == {
        "gold": "small", "silver": "small"
    }  # fmt: skip

    judge = judge_responder(1.0, lambda body: "the baseline's answer")

    def respond(body: dict[str, Any]) -> Any:  # the judge marks the gold tier's answers down
        answer = judge(body)
        if isinstance(answer, dict) and "gold" in json.dumps(body.get("messages")):
            return {"quality_score": 0.05, "notes": "loopback judge"}
        return answer

    openai_server.responder = respond
    log = tmp_path / "calls.jsonl"
    lines = []
    for i in range(60):
        tier = "gold" if i % 2 else "silver"
        line = json.loads(_line(i, model="small"))
        line["request"]["messages"][0]["content"] = f"question {i} for {tier}"
        line["metadata"]["tier"] = tier
        lines.append(json.dumps(line) + "\n")
    log.write_text("".join(lines))
    got = tmp_path / "hook.json"
    hook = (  # one line per call: the tier's rollback and, later, the whole task's
        f"{sys.executable} -c \"import sys; open(sys.argv[1], 'a').write(sys.stdin.read().replace(chr(10), ' ') "
        f'+ chr(10))" {got}'
    )
    args = _args(log, sqlite_url, openai_server, "-j", "llm:openai:judge", "--once", "--allow-uncalibrated")
    done = invoke(*args, "--slice-by", "meta:tier", "--on-rollback", hook)
    assert done.exit_code == 0, done.output
    assert "rollback (slice gold): small was rolled back at" in done.stderr, done.stderr
    assert "rollback (slice silver)" not in done.stderr
    sent = [json.loads(line) for line in got.read_text(encoding="utf-8").splitlines()]
    gold = [next(s for s in p["slices"]["slices"] if s["name"] == "gold") for p in sent]
    assert gold[0]["rollback"]["new"] is True  # the first call is the tier's own
    assert gold[0]["model"] == "big" and gold[0]["rollback"]["model"] == "small"
    with QualityLedger(sqlite_url) as ledger:
        stored = ledger.decisions("qa", limit=1)[-1]
    assert stored.decision_id is not None
    again = invoke(*route, "--slice-by", "meta:tier", "--db", sqlite_url, "--json")
    now = {s["name"]: s["model"] for s in json.loads(again.stdout)["slices"]["slices"]}
    assert now == {"gold": "big", "silver": "small"}, again.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--sample-rate", "0"), "--sample-rate"),
        (("-c", "recorded:production"), "live spec"),
        (("--task-from", "len:x"), "--task-from"),
        (("--name", "a b"), "--name"),
    ],
)
def test_usage_errors_exit_2_before_anything_runs(
    tmp_path: Path, sqlite_url: str, openai_server: Any, extra: tuple[str, ...], message: str
) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text(_line(0))
    result = invoke(*_args(log, sqlite_url, openai_server, "-j", "exact", "--once"), *extra)
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert _chat(openai_server) == []


def test_another_candidate_under_the_same_name_is_refused(
    tmp_path: Path, sqlite_url: str, openai_server: Any
) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text(_line(0))
    assert invoke(*_args(log, sqlite_url, openai_server, "-j", "exact", "--once")).exit_code == 0
    other = invoke(*_args(log, sqlite_url, openai_server, "-j", "exact", "--once"), "-c", "openai:tiny")
    assert other.exit_code == 2 and "another --name" in other.stderr
