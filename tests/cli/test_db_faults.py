"""Riding out the database (issue 39): real faults under real runs.

* a PostgreSQL restart in the middle of a shared run of two workers: both finish (exit 0),
  every case once, no model call made twice (the pause is said on stderr and in ``--json``);
* a PostgreSQL stopped longer than ``--db-patience``: exit 3 naming how long it was away, with
  the resume command; the resume finishes the run asking no model again for what was answered;
* a SQLite ledger on a small tmpfs that fills up: exit 3, "the ledger's disk is full", the
  answers kept in a journal (the same full disk refuses it: the system's temporary directory
  takes it); more room, and the resume makes no model call for them;
* a read-only ledger file system: exit 3, "the ledger file is read-only", nothing asked of a model;
* ``view``'s Label page: a label sent while PostgreSQL is down is held until it is back and
  stored once; one sent to a full disk answers 503 "the ledger's disk is full", stores nothing,
  and goes in once there is room.

They run as root (CI does): ``mount -t tmpfs`` and ``pg_ctlcluster``. The cluster restarted is
``$LLM_CONNECT_TEST_POSTGRES_CLUSTER`` ("VERSION NAME", default the installed version's
``main``), the one ``$LLM_CONNECT_TEST_POSTGRES_URL`` points at. Where they cannot run they skip
saying why, and fail instead under ``LLM_CONNECT_REQUIRE_DB_FAULTS=1`` (``.ci/run`` sets it).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_connect.ledger import QualityLedger
from llm_connect.report import ReportServer, serve
from tests.cli._util import write_suite
from tests.fixtures.faults import REQUIRE, TESTS, fill, make_room
from tests.fixtures.openai_server import OpenAIServer
from tests.fixtures.skips import skip_or_fail
from tests.report.test_label import fill_queue_ledger, next_case, own, request

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_ENV = "LLM_CONNECT_TEST_POSTGRES_CLUSTER"
RUN_TIMEOUT_S = 180.0


def _default_cluster() -> str:
    versions = sorted(os.listdir("/etc/postgresql")) if os.path.isdir("/etc/postgresql") else []
    return f"{versions[-1]} main" if versions else "15 main"


class Cluster:
    """The test PostgreSQL cluster, restarted or stopped with ``pg_ctlcluster``."""

    def __init__(self, spec: str) -> None:
        self.version, self.name = spec.split()

    def ctl(self, action: str, *extra: str) -> None:
        cmd = ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, action, *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0 and not (action == "start" and self.online()):
            raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.returncode}")

    def online(self) -> bool:
        cmd = ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, "status"]
        return subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    spec = os.environ.get(CLUSTER_ENV) or _default_cluster()
    if os.geteuid() != 0 or shutil.which("pg_ctlcluster") is None:
        skip_or_fail(REQUIRE, "they need root and pg_ctlcluster", tests=TESTS)
    found = Cluster(spec)
    if not found.online():
        skip_or_fail(REQUIRE, f"the PostgreSQL cluster {spec!r} ({CLUSTER_ENV}) is not running", tests=TESTS)
    try:
        yield found
    finally:
        found.ctl("start")  # whatever happened, the others' tests find it running


def suite(path: Path, n: int) -> Path:
    return write_suite(path, [{"id": f"c{i:03d}", "prompt": f"question {i}", "task": "qa"} for i in range(n)])


def grade(
    server: OpenAIServer, url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``llm-connect grade ARGS --db URL`` in a subprocess, against the loopback model server."""
    cmd = [
        sys.executable, "-m", "llm_connect", "grade", *args, "--db", url, "--base-url", server.base_url,
        "--api-key", "sk-test-secret-key-123456", "--json",
    ]  # fmt: skip
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.Popen(
        cmd, cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def calls(server: OpenAIServer) -> collections.Counter[tuple[str, str]]:
    """(model, prompt) -> chat requests answered."""
    return collections.Counter(
        (r.body["model"], r.body["messages"][-1]["content"])
        for r in server.requests_to("/chat/completions")
        if r.body is not None
    )


def wait_for_calls(server: OpenAIServer, n: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while len(server.requests) < n and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before the fault"


def test_a_postgres_restart_pauses_a_shared_run_and_it_goes_on(
    tmp_path: Path, postgres_url: str, cluster: Cluster, openai_server: OpenAIServer
) -> None:
    openai_server.delay_s = 0.05
    n = 120
    path = suite(tmp_path / "s.jsonl", n)
    args = (str(path), "--shared", "--run-id", "restart-1", "-b", "openai:big", "-c", "openai:small")
    workers = [grade(openai_server, postgres_url, *args, "--concurrency", "4") for _ in range(2)]
    wait_for_calls(openai_server, 60, workers[0])
    cluster.ctl("restart", "-m", "fast")  # what an operator does: every connection is cut
    outs = [w.communicate(timeout=RUN_TIMEOUT_S) for w in workers]
    for w, (_, err) in zip(workers, outs, strict=True):
        assert w.returncode == 0, err
    with QualityLedger(postgres_url) as ledger:
        grades = list(ledger.results(run_id="restart-1"))
        status = ledger.run_status("restart-1")
    assert sorted(g.case_id for g in grades) == [f"c{i:03d}" for i in range(n)]  # every case once
    assert status.done == n and status.claimed == 0 and status.pending == 0
    assert set(calls(openai_server).values()) == {1}  # nothing asked twice: no lease lapsed
    assert sum(json.loads(out)["cases_done"] for out, _ in outs) == n
    # The pause is said: the workers that met it name how long the database was away.
    paused = [json.loads(out) for out, _ in outs if json.loads(out)["db_pauses"]]
    assert paused and all(p["db_unreachable_s"] > 0 for p in paused)
    assert any("was unreachable for" in err for _, err in outs)


def test_a_postgres_away_past_the_patience_stops_with_3_and_the_resume_pays_nothing_twice(
    tmp_path: Path, postgres_url: str, cluster: Cluster, openai_server: OpenAIServer
) -> None:
    openai_server.delay_s = 0.05
    n = 60
    path = suite(tmp_path / "s.jsonl", n)
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    args = (str(path), "--run-id", "away-1", "-b", "openai:big", "-c", "openai:small", "--concurrency", "2")
    proc = grade(openai_server, postgres_url, *args, "--db-patience", "2", env=env)
    wait_for_calls(openai_server, 20, proc)
    cluster.ctl("stop", "-m", "fast")
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        cluster.ctl("start")
    assert proc.returncode == 3, err
    assert "was unreachable for" in err and "--db-patience" in err, err
    assert "continue it with: llm-connect grade --resume away-1 --db " in err
    stopped = json.loads(out)
    assert stopped["cause"] == "unreachable" and stopped["exit_code"] == 3
    journal = stopped["journal"]
    assert journal is None or journal.startswith(str(tmp_path / "state"))  # named, under the state dir
    if journal is not None:
        assert "sk-test-secret" not in Path(journal).read_text()
    before = sum(calls(openai_server).values())
    resumed = grade(openai_server, postgres_url, "--resume", "away-1", env=env)
    out, err = resumed.communicate(timeout=RUN_TIMEOUT_S)
    assert resumed.returncode == 0, err
    with QualityLedger(postgres_url) as ledger:
        grades = list(ledger.results(run_id="away-1"))
    assert sorted(g.case_id for g in grades) == [f"c{i:03d}" for i in range(n)]
    assert set(calls(openai_server).values()) == {1}  # what was answered before is not asked again
    assert json.loads(out)["model_calls"] == 2 * n - before


def test_a_full_disk_stops_with_3_keeps_the_answers_and_the_resume_asks_for_none_of_them(
    tmp_path: Path, tmpfs: Path, openai_server: OpenAIServer
) -> None:
    openai_server.delay_s = 0.1
    n = 60
    path = write_suite(
        tmp_path / "s.jsonl",
        [
            {"id": f"c{i:03d}", "prompt": f"question {i} " + "lorem ipsum " * 40, "task": "qa"}
            for i in range(n)
        ],
    )
    url = f"sqlite:///{tmpfs / 'ledger.db'}"
    QualityLedger(url).close()  # the schema first: the run's own writes fill the disk
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"TMPDIR": str(temp)}
    args = (str(path), "--run-id", "full-1", "-b", "openai:big", "-c", "openai:small", "--concurrency", "2")
    proc = grade(openai_server, url, *args, env=env)
    wait_for_calls(openai_server, 10, proc)
    fill(tmpfs)
    out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 3, err
    assert "the ledger's disk is full" in err
    assert f"continue it with: llm-connect grade --resume full-1 --db {url}" in err
    stopped = json.loads(out)
    assert stopped["cause"] == "disk_full" and stopped["journaled"] >= 1
    # The same full disk refused the journal beside the ledger: the temporary directory kept it.
    assert stopped["journal"].startswith(str(temp / "llm-connect-journal"))
    assert "not beside the ledger" in stopped["journal"] and "No space left" in stopped["journal"]
    kept = Path(stopped["journal"].split(" (")[0]).read_text()
    assert "sk-test-secret" not in kept
    journaled = {json.loads(line)["case_id"] for line in kept.splitlines()}
    # More room, and the resume.
    make_room(tmpfs)
    answered = set(calls(openai_server))
    resumed = grade(openai_server, url, "--resume", "full-1", env=env)
    out, err = resumed.communicate(timeout=RUN_TIMEOUT_S)
    assert resumed.returncode == 0, err
    assert json.loads(out)["cases_done"] == n
    with QualityLedger(url) as ledger:
        grades = list(ledger.results(run_id="full-1"))
    assert sorted(g.case_id for g in grades) == [f"c{i:03d}" for i in range(n)]
    counts = calls(openai_server)
    assert set(counts.values()) == {1}  # no answer paid for twice
    assert {p.split(" ")[1] for _, p in answered} >= {str(int(c[1:])) for c in journaled}
    assert not list((temp / "llm-connect-journal").glob("*"))  # recorded, then removed


def test_a_read_only_ledger_stops_with_3_saying_so_before_any_model_call(
    tmp_path: Path, tmpfs: Path, openai_server: OpenAIServer
) -> None:
    path = suite(tmp_path / "s.jsonl", 4)
    url = f"sqlite:///{tmpfs / 'ledger.db'}"
    QualityLedger(url).close()
    # As root, chmod 0444 stops no write: a read-only file system does.
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    try:
        args = (str(path), "--run-id", "ro-1", "-b", "openai:big", "-c", "openai:small")
        proc = grade(openai_server, url, *args, env={"TMPDIR": str(tmp_path)})
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(tmpfs)], check=True)
    assert proc.returncode == 3, err
    assert "the ledger file is read-only" in err  # found opening it, or at the run's first write
    if out:  # the run had begun: nothing of it was recorded, so the same command starts it again
        assert json.loads(out)["cause"] == "read_only"
        assert "nothing of the run was recorded: run the same command again" in err
    assert not openai_server.requests_to("/chat/completions")
    again = grade(openai_server, url, *args)
    _, err = again.communicate(timeout=RUN_TIMEOUT_S)
    assert again.returncode == 0, err


def test_a_watch_on_a_full_disk_stops_with_3_and_the_next_start_pays_for_nothing_twice(
    tmp_path: Path, tmpfs: Path, openai_server: OpenAIServer
) -> None:
    """The watch (issue 38) uses the same path: a full disk stops it with exit 3 naming the
    cause; with room again the next start grades the rest, no call asked twice."""
    openai_server.delay_s = 0.1
    n = 60
    log = tmp_path / "calls.jsonl"
    log.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"req-{i}",
                    "request": {"model": "big", "messages": [{"role": "user", "content": f"question {i} " + "lorem " * 60}]},
                    "response": {"model": "big", "choices": [{"message": {"role": "assistant", "content": f"answer {i}"}}]},
                    "metadata": {"task": "qa"},
                }
            )
            + "\n"
            for i in range(n)
        )
    )  # fmt: skip
    url = f"sqlite:///{tmpfs / 'ledger.db'}"
    QualityLedger(url).close()
    temp = tmp_path / "tmp"
    temp.mkdir()

    def watch() -> subprocess.Popen[str]:
        cmd = [
            sys.executable, "-m", "llm_connect", "watch", str(log), "-b", "openai:big", "-c", "openai:small",
            "--task-from", "task", "--sample-rate", "1", "--once", "--name", "w", "--concurrency", "2", "-j", "exact",
            "--db", url, "--base-url", openai_server.base_url, "--api-key", "sk-test-secret-key-123456",
        ]  # fmt: skip
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TMPDIR": str(temp)}
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    proc = watch()
    wait_for_calls(openai_server, 10, proc)
    fill(tmpfs)
    _, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 3, err
    assert "the ledger's disk is full" in err
    make_room(tmpfs)
    again = watch()
    _, err = again.communicate(timeout=RUN_TIMEOUT_S)
    assert again.returncode == 0, err
    with QualityLedger(url) as ledger:
        graded = sorted(r.case_id for r in ledger.results(run_id="watch-w"))
    assert graded == sorted(f"req-{i}" for i in range(n))
    assert set(calls(openai_server).values()) == {1}  # each call's candidate asked once


def _label(server: ReportServer, case: dict[str, object]) -> tuple[int, object]:
    token = (server.label_url or "").split("token=")[1]
    body = {"ref": case["ref"], "choice": "first", "annotator": "ana"}
    return request(server, "POST", "/api/label", body, own(server, token))


def test_a_label_sent_while_postgres_is_down_is_held_until_it_is_back_and_stored_once(
    postgres_url: str, cluster: Cluster
) -> None:
    with QualityLedger(postgres_url, patience_s=60) as ledger:
        fill_queue_ledger(ledger)
        said: list[str] = []
        ledger.patience.on_pause = said.append
        server = serve(ledger, port=0, label=True)
        try:
            case = next_case(server)["case"]
            cluster.ctl("stop", "-m", "fast")
            answer: list[tuple[int, object]] = []
            after: list[tuple[int, object]] = []
            sent = threading.Thread(target=lambda: answer.append(_label(server, case)))
            asked = threading.Thread(  # what the page asks next: the next case, while the database is away
                target=lambda: after.append(request(server, "GET", "/api/label/next?annotator=bo"))
            )
            try:
                sent.start()
                asked.start()
                time.sleep(2.0)  # both wait for the database, neither is refused
                assert not answer and not after
            finally:
                cluster.ctl("start")
            sent.join(timeout=RUN_TIMEOUT_S)
            asked.join(timeout=RUN_TIMEOUT_S)
            assert answer and answer[0][0] == 200, answer
            assert after and after[0][0] == 200, after
            assert any("is unreachable" in line for line in said)  # ``view`` prints these on stderr
            assert any("reachable again after" in line for line in said)
            labels = ledger.labels(task="qa")
        finally:
            server.shutdown()
    assert [(lb.case_id, lb.annotator) for lb in labels] == [(case["case_id"], "ana")]


def test_a_label_sent_to_a_full_disk_answers_503_saying_so_and_goes_in_once_there_is_room(
    tmpfs: Path,
) -> None:
    url = f"sqlite:///{tmpfs / 'ledger.db'}"
    with QualityLedger(url, patience_s=5) as ledger:
        fill_queue_ledger(ledger)
        server = serve(ledger, port=0, label=True)
        try:
            case = next_case(server)["case"]
            fill(tmpfs)
            code, refused = _label(server, case)
            assert code == 503, refused
            assert isinstance(refused, dict) and refused["cause"] == "disk_full"
            assert "the ledger's disk is full" in refused["error"]
            assert "; choose again once the ledger's disk has room again" in (refused["error"])
            make_room(tmpfs)
            assert ledger.labels(task="qa") == []  # nothing half-written
            code, saved = _label(server, case)  # the page sends the kept choice again
            assert code == 200 and saved == {"saved": True, "written": 1, "replaced": 0}, saved
            assert [lb.case_id for lb in ledger.labels(task="qa")] == [case["case_id"]]
        finally:
            server.shutdown()
