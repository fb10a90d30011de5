"""Hosts and a partition: a shared run's worker loses its network mid-run (issue 14).

Every worker runs on its own "host": a network namespace (``ip netns``) linked to the root
namespace by a veth pair on its own /30 inside a 10.231.X.0/24 no interface or route of this
machine uses. The root namespace is the server host: a throwaway PostgreSQL cluster this test
starts with ``initdb``/``pg_ctl`` listens on the root side of every link (and on 127.0.0.1 for
the test itself), and so does the loopback model server (``tests/fixtures/openai_server.py``
in a subprocess, ``--host 0.0.0.0``, 100 ms per answer; the test reads what it received from
its ``GET /__requests`` endpoint). A worker reaches both through the root-side address of its
own link, as ``ip netns exec NS python -m llm_connect grade ... --shared``.

Scenario: three workers grade a 60-case suite (``--lease-s 3 --concurrency 4``). The first
worker seen holding cases after it has committed one (whichever host that is: the workers start
together and any of them may be first) has its link cut (``ip link set <root side> down``). The
other two must finish the run: every case done and graded exactly once, and a model call made
twice only for a case whose lease expired (claimed more than once). The cut falls wherever the
cut worker happens to be, sometimes inside one of its transactions (a claim or a commit): the
locks that transaction holds on the server must not hold the others up for good. Then the link
comes back: the cut worker's in-flight calls and commits go through once TCP retransmits, and
must change nothing: grades, per-case and per-group stats, failures, skips and case states are
the same row for row, and the run stays completed. The cut worker is killed if it has not
exited 40 s after the link came back.

Runs as root where network namespaces can be created (CI runs as root, and ``.ci/run`` and
``scripts/test`` install iproute2 where apt-get is there); it skips, saying why, only where
``ip netns add`` fails, and fails instead under ``LLM_CONNECT_REQUIRE_NETNS=1`` (``.ci/run`` sets it). initdb refuses to run as root: the cluster runs as the
``postgres`` OS user (through ``runuser``, else ``su``). Everything the test creates
(workers, cluster, model server, namespaces, veths, temporary directories) is removed even when
it fails.
"""

from __future__ import annotations

import collections
import contextlib
import glob
import json
import os
import pwd
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from llm_connect.ledger import FleetStatus, QualityLedger
from tests.fixtures.skips import skip_or_fail

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
N_CASES = 60
LEASE_S = 3
CONCURRENCY = 4
DELAY_MS = 100
MODELS = ("big", "small")
#: Generous: a loaded 2-core machine runs three CLI workers, PostgreSQL and the model server.
RUN_TIMEOUT_S = 120.0
#: How long the cut worker gets to finish after its link is back (TCP retransmits back off
#: exponentially while the link is down, so its connections may take several seconds to resume).
LATE_TIMEOUT_S = 40.0


def sh(
    *cmd: str, check: bool = True, timeout: float = 60.0, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(cmd)} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()}"
        )
    return proc


# -- hosts: network namespaces with a veth link each --------------------------------------------


def netns_problem() -> str | None:
    """Why network namespaces cannot be created here (``None``: they can)."""
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = f"lcw-probe-{uuid.uuid4().hex[:6]}"
    try:
        made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`ip netns add` cannot run: {exc}"
    if made.returncode != 0:
        return f"`ip netns add {probe}` failed: {made.stderr.strip() or f'exit {made.returncode}'}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return None


def free_net() -> str:
    """``10.231.X`` for an X no address or route of this machine mentions."""
    used = (
        sh("ip", "-4", "-o", "addr", "show").stdout + sh("ip", "-4", "route", "show", "table", "all").stdout
    )
    for x in random.sample(range(256), 256):
        if f"10.231.{x}." not in used:
            return f"10.231.{x}"
    raise RuntimeError("every 10.231.X.0/24 is in use on this machine")


@dataclass
class Host:
    """A worker's host: a namespace and its veth link to the root namespace (a /30)."""

    ns: str
    root_if: str
    ns_if: str
    root_addr: str
    ns_addr: str

    def link(self, state: str) -> None:
        """``ip link set <root side> up|down``: connect or cut this host."""
        sh("ip", "link", "set", self.root_if, state)


@pytest.fixture
def hosts() -> Iterator[list[Host]]:
    problem = netns_problem()
    if problem is not None:
        skip_or_fail(
            "LLM_CONNECT_REQUIRE_NETNS",
            f"network namespaces cannot be created here: {problem}",
            tests="the partition test",
        )
    tag = uuid.uuid4().hex[:6]
    net = free_net()
    made: list[Host] = []
    try:
        for n in (1, 2, 3):
            host = Host(
                f"lcw-{tag}-{n}", f"lcw{tag}r{n}", f"lcw{tag}n{n}", f"{net}.{4 * n + 1}", f"{net}.{4 * n + 2}"
            )
            sh("ip", "netns", "add", host.ns)
            made.append(host)
            sh(
                "ip",
                "link",
                "add",
                host.root_if,
                "type",
                "veth",
                "peer",
                "name",
                host.ns_if,
                "netns",
                host.ns,
            )
            sh("ip", "addr", "add", f"{host.root_addr}/30", "dev", host.root_if)
            sh("ip", "link", "set", host.root_if, "up")
            inside = ("ip", "netns", "exec", host.ns)
            sh(*inside, "ip", "link", "set", "lo", "up")
            sh(*inside, "ip", "addr", "add", f"{host.ns_addr}/30", "dev", host.ns_if)
            sh(*inside, "ip", "link", "set", host.ns_if, "up")
        yield made
    finally:
        for host in made:
            # A process of ours still inside keeps the namespace (and its veth) alive.
            for pid in sh("ip", "netns", "pids", host.ns, check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            sh("ip", "link", "del", host.root_if, check=False)
            sh("ip", "netns", "del", host.ns, check=False)


# -- the server host: a throwaway PostgreSQL cluster and the model server ------------------------


def pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found is not None:
        return found
    versions = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: [int(part) if part.isdigit() else 0 for part in Path(p).parts[-3].split(".")],
    )
    if not versions:
        pytest.fail(
            f"{name} is neither on PATH nor in /usr/lib/postgresql/*/bin: the test starts its own cluster"
        )
    return versions[-1]


def as_postgres(cmd: list[str]) -> list[str]:
    """``cmd`` run as the ``postgres`` OS user when we are root (initdb and postgres refuse root)."""
    if os.geteuid() != 0:
        return cmd
    if shutil.which("runuser") is not None:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return ["su", "postgres", "-s", "/bin/sh", "-c", shlex.join(cmd)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    port: int
    base: Path

    def url(self, host: str) -> str:
        return f"postgresql+psycopg://postgres@{host}:{self.port}/postgres"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join((self.base / "server.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"


@pytest.fixture
def cluster(hosts: list[Host]) -> Iterator[Cluster]:
    """A PostgreSQL cluster listening on 127.0.0.1 and the root side of every link (trust auth)."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    base = Path(tempfile.mkdtemp(prefix="lcw-pg-"))
    data = base / "data"
    try:
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                pytest.fail(
                    "running as root, the test needs the postgres OS user to run initdb and the cluster"
                )
            os.chown(base, owner.pw_uid, owner.pw_gid)
        initdb_cmd = [
            initdb,
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "-N",
        ]
        sh(*as_postgres(initdb_cmd), timeout=180, cwd=str(base))
        port = free_port()
        listen = ",".join(["127.0.0.1", *(h.root_addr for h in hosts)])
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nport = {port}\nlisten_addresses = '{listen}'\nunix_socket_directories = '{base}'\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
            )
        with (data / "pg_hba.conf").open("a") as hba:
            hba.writelines(f"host all all {h.ns_addr}/32 trust\n" for h in hosts)
        start = [pg_ctl, "-D", str(data), "-l", str(base / "server.log"), "-w", "-t", "90", "start"]
        sh(*as_postgres(start), timeout=120, cwd=str(base))
        yield Cluster(port, base)
    finally:
        if (data / "postmaster.pid").exists():
            stop = [pg_ctl, "-D", str(data), "-m", "immediate", "-w", "-t", "60", "stop"]
            sh(*as_postgres(stop), check=False, timeout=90, cwd=str(base))
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class ModelServer:
    port: int

    def base_url(self, host: str) -> str:
        return f"http://{host}:{self.port}/v1"

    def calls(self) -> collections.Counter[tuple[str, str]]:
        """(model, prompt) -> chat requests received, read from the server's ``GET /__requests``."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/__requests", timeout=30) as answer:
            requests = json.load(answer)
        return collections.Counter(
            (r["body"]["model"], r["body"]["messages"][-1]["content"])
            for r in requests
            if urlsplit(r["path"]).path.endswith("/chat/completions")
        )


@pytest.fixture
def model_server(hosts: list[Host]) -> Iterator[ModelServer]:
    """The loopback model server in a subprocess, on every address of the server host."""
    args = ["--host", "0.0.0.0", "--port", "0", "--delay-ms", str(DELAY_MS)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.openai_server", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        port = urlsplit(first).port
        if port is None:
            raise RuntimeError(f"the model server printed {first!r}, not its URL")
        yield ModelServer(port)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()  # not left to the garbage collector ("unclosed file")


# -- workers ------------------------------------------------------------------------------------


@dataclass
class Worker:
    host: Host
    proc: subprocess.Popen[str]
    out: TextIO
    err: TextIO
    worker_id: str | None = None
    """Its id in the run (``fleet_workers``), once it registered."""

    def read(self) -> tuple[str, str]:
        self.out.flush()
        self.err.flush()
        return Path(self.out.name).read_text(), Path(self.err.name).read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.out.close()
        self.err.close()


def start_worker(
    host: Host, suite: Path, run_id: str, cluster: Cluster, server: ModelServer, logs: Path
) -> Worker:
    args = [
        "ip", "netns", "exec", host.ns, sys.executable, "-m", "llm_connect", "grade", str(suite), "--shared",
        "--run-id", run_id, "--db", cluster.url(host.root_addr), "-b", f"openai:{MODELS[0]}",
        "-c", f"openai:{MODELS[1]}", "--base-url", server.base_url(host.root_addr), "--api-key", "sk-test",
        "--lease-s", str(LEASE_S), "--concurrency", str(CONCURRENCY), "--json",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["HF_HUB_OFFLINE"] = "1"
    out = (logs / f"{host.ns}.out").open("w+")
    err = (logs / f"{host.ns}.err").open("w+")
    # `ip netns exec` execs the command: the process's pid is the worker's (fleet_workers.pid).
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
    return Worker(host, proc, out, err)


# -- what the ledger holds ----------------------------------------------------------------------

_PROGRESS = text(
    "SELECT w.pid, w.worker_id, "
    "count(*) FILTER (WHERE c.status = 'done') AS done, count(*) FILTER (WHERE c.status = 'claimed') AS held "
    "FROM fleet_workers w LEFT JOIN run_cases c ON c.run_id = w.run_id AND c.worker_id = w.worker_id "
    "WHERE w.run_id = :run GROUP BY w.pid, w.worker_id"
)
#: What a late write could change (the cluster holds this run only).
_SNAPSHOT = {
    "grades": "SELECT id, run_id, case_id, task, grader_id, baseline_model, candidate_model, quality_score, "
    "baseline_text, candidate_text, notes FROM grades",
    "case_stats": "SELECT * FROM case_stats",
    "grade_stats": "SELECT * FROM grade_stats",
    "run_cases": "SELECT * FROM run_cases",
    "run_failures": "SELECT * FROM run_failures",
    "run_skips": "SELECT * FROM run_skips",
}


def run_status(cluster: Cluster, run_id: str) -> FleetStatus:
    """The run's status, through a ledger closed again (no connection left to the garbage collector)."""
    with QualityLedger(cluster.url("127.0.0.1")) as ledger:
        return ledger.run_status(run_id)


def rows(engine: Engine, sql: str, **params: Any) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(text(sql), params))


def snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    return {name: sorted((tuple(r) for r in rows(engine, sql)), key=repr) for name, sql in _SNAPSHOT.items()}


def wait_for_victim(engine: Engine, run_id: str, workers: list[Worker], cluster: Cluster) -> Worker:
    """The first worker that has committed a case and holds claimed ones (polled)."""
    by_pid = {w.proc.pid: w for w in workers}
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        for w in workers:
            if w.proc.poll() is not None:
                out, err = w.read()
                pytest.fail(f"worker on {w.host.ns} exited {w.proc.returncode} before the cut:\n{err}\n{out}")
        try:
            progress = rows(engine, _PROGRESS.text, run=run_id)
        except SQLAlchemyError:  # the first worker has not created the tables yet
            progress = []
        for pid, worker_id, _done, _held in progress:
            if pid in by_pid:
                by_pid[pid].worker_id = worker_id
        ready = sorted(
            (r for r in progress if r.done >= 1 and r.held >= 1 and r.pid in by_pid), key=lambda r: -r.held
        )
        if ready:
            return by_pid[ready[0].pid]
        time.sleep(0.02)
    pytest.fail(f"no worker committed a case within {RUN_TIMEOUT_S:.0f} s\n{cluster.log_tail()}")


def stall_report(engine: Engine, victim: Worker) -> str:
    """Why the run may not move: the cut worker's sessions the server still keeps, and who waits on a lock.

    A transaction the cut worker had open keeps its row locks until the server ends the session:
    cases it was committing stay locked (claims skip them) and writers of the same stats rows wait.
    """
    kept = rows(
        engine,
        "SELECT state, EXTRACT(EPOCH FROM now() - xact_start)::int AS xact_s, left(query, 60) AS query "
        "FROM pg_stat_activity WHERE client_addr = CAST(:addr AS inet)",
        addr=victim.host.ns_addr,
    )
    waiting = rows(
        engine,
        "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
    )
    return (
        f"sessions of the cut worker the server still keeps: {[tuple(r) for r in kept]}; "
        f"sessions waiting on a lock: {waiting[0].n}"
    )


def wait_exit(worker: Worker, timeout: float) -> bool:
    try:
        worker.proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


# -- the test -----------------------------------------------------------------------------------


def test_a_cut_off_worker_is_taken_over_and_its_late_writes_change_nothing(
    tmp_path: Path, hosts: list[Host], cluster: Cluster, model_server: ModelServer
) -> None:
    started = time.monotonic()
    cases = [{"id": f"c{i:03d}", "prompt": f"question {i}", "task": "qa"} for i in range(N_CASES)]
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    prompt_case = {c["prompt"]: c["id"] for c in cases}
    run_id = f"partition-{uuid.uuid4().hex[:8]}"
    engine = create_engine(cluster.url("127.0.0.1"), poolclass=NullPool)
    workers: list[Worker] = []
    try:
        workers = [start_worker(h, suite, run_id, cluster, model_server, tmp_path) for h in hosts]
        victim = wait_for_victim(engine, run_id, workers, cluster)
        victim.host.link("down")
        cut_at = time.monotonic()
        time.sleep(0.5)  # whatever was already on the wire has arrived
        held_at_cut = {
            r.case_id
            for r in rows(
                engine,
                "SELECT case_id FROM run_cases WHERE run_id = :run AND worker_id = :w AND status = 'claimed'",
                run=run_id,
                w=victim.worker_id,
            )
        }
        assert held_at_cut, "the cut worker held no case when its link went down"
        # Its sessions as the server sees them (a transaction left open by the cut keeps its locks).
        sessions = [
            f"{r.state}: {r.query[:80]}"
            for r in rows(
                engine,
                "SELECT state, query FROM pg_stat_activity WHERE client_addr = CAST(:addr AS inet)",
                addr=victim.host.ns_addr,
            )
        ]

        # The other two finish the run: the cut worker's cases are taken over once their leases lapse.
        others = [w for w in workers if w is not victim]
        for w in others:
            finished = wait_exit(w, max(1.0, cut_at + RUN_TIMEOUT_S - time.monotonic()))
            out, err = w.read()
            assert finished, (
                f"worker on {w.host.ns} did not finish within {RUN_TIMEOUT_S:.0f} s of the cut "
                f"(status: {run_status(cluster, run_id).to_dict()}; "
                f"the cut worker's sessions at the cut: {sessions}; {stall_report(engine, victim)}):\n{err}\n"
                f"PostgreSQL log:\n{cluster.log_tail()}"
            )
            assert w.proc.returncode == 0, f"worker on {w.host.ns} exited {w.proc.returncode}:\n{err}\n{out}"
        finished_at = time.monotonic()
        status = run_status(cluster, run_id)
        assert (status.total, status.done, status.pending, status.claimed, status.failed) == (
            N_CASES,
            N_CASES,
            0,
            0,
            0,
        )

        # Every case graded exactly once (one judge, one candidate: one grade per case).
        per_case = collections.Counter(
            r.case_id for r in rows(engine, "SELECT case_id FROM grades WHERE run_id = :run", run=run_id)
        )
        assert per_case == collections.Counter({c["id"]: 1 for c in cases})
        # The cut worker's cases were taken over: finished by another worker, claimed again.
        final = {
            r.case_id: r
            for r in rows(
                engine, "SELECT case_id, worker_id, attempts FROM run_cases WHERE run_id = :run", run=run_id
            )
        }
        for case_id in held_at_cut:
            assert final[case_id].worker_id != victim.worker_id and final[case_id].attempts >= 2, final[
                case_id
            ]
        reclaimed = {cid for cid, r in final.items() if r.attempts >= 2}
        # A model call made twice only for a case whose lease expired, and at most once per claim.
        calls = model_server.calls()
        assert set(calls) == {(m, c["prompt"]) for m in MODELS for c in cases}
        repeated = {key: n for key, n in calls.items() if n > 1}
        for (model, prompt), n in repeated.items():
            case_id = prompt_case[prompt]
            assert case_id in reclaimed and n <= final[case_id].attempts, (model, prompt, n, final[case_id])

        # The link comes back: the cut worker's late writes change nothing.
        before = snapshot(engine)
        victim.host.link("up")
        back_at = time.monotonic()
        exited = wait_exit(victim, LATE_TIMEOUT_S)
        late_s = time.monotonic() - back_at
        if not exited:
            victim.proc.kill()
            victim.proc.wait(timeout=30)
        out, err = victim.read()
        after = snapshot(engine)
        for table in _SNAPSHOT:
            assert after[table] == before[table], f"{table} changed after the cut worker came back:\n{err}"
        run_row = rows(engine, "SELECT status FROM runs WHERE run_id = :run", run=run_id)
        assert [r.status for r in run_row] == ["completed"], f"{run_row}\n{err}"
        status = run_status(cluster, run_id)
        assert (status.done, status.pending, status.claimed, status.failed) == (N_CASES, 0, 0, 0)

        # After its link came back the cut worker graded the cases it still had (their writes
        # were dropped) and may have called the model for them again: still only reclaimed cases.
        calls = model_server.calls()
        late_repeats = {key: n for key, n in calls.items() if n > 1}
        for (model, prompt), n in late_repeats.items():
            case_id = prompt_case[prompt]
            assert case_id in reclaimed and n <= final[case_id].attempts, (model, prompt, n, final[case_id])

        # What happened, for the log (pytest -s or -rA shows it).
        committed = sum(1 for r in final.values() if r.worker_id == victim.worker_id)
        report = json.loads(out) if exited and out.strip().startswith("{") else {}
        graded = report["cases_done"] - report["cases_skipped"] if report else None
        print(
            f"\npartition: cut {victim.host.ns} ({victim.worker_id}) holding {len(held_at_cut)} cases "
            f"{sorted(held_at_cut)}, sessions {sessions}; the other two finished {finished_at - cut_at:.1f} s "
            f"after the cut; {len(reclaimed)} cases claimed twice, {len(repeated)} (model, prompt) calls "
            f"repeated before the link came back, {len(late_repeats)} after; the cut worker "
            f"{'exited ' + str(victim.proc.returncode) if exited else 'was killed'} {late_s:.1f} s after "
            f"its link came back, having graded {graded} cases of which {committed} were committed "
            f"(the rest were late writes, refused); nothing changed; {time.monotonic() - started:.1f} s"
        )
    finally:
        for w in workers:
            w.stop()
        engine.dispose()
