"""Running a README's commands as a reader would, and reading what they print.

Every command runs from a work directory that holds ``examples`` (a link to the repository's)
and the default ledger ``llm_connect.db``, as a reader running the READMEs from the repository
root would have. ``llm-connect`` runs in-process (the real Typer app through Click's runner:
one process keeps the embedding model loaded across commands); ``python`` scripts and
``llm-connect view``, which serves until stopped, run as processes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import Result

from tests.cli._util import invoke
from tests.docs._commands import ROOT, Command, line_of, prose

# A run's header, a stats line and a routing line, as `llm-connect grade` prints them piped.
HEADER = re.compile(
    r"^run (?P<run_id>run-\d{8}-\d{6}-[0-9a-f]{6}) · (?P<cases>\d+) cases · (?P<rest>.*)$", re.M
)
STATS = re.compile(
    r"^(?P<task>\S+)  (?:recorded:)?(?P<candidate>\S+)  judge=(?P<judge>\S+)  "
    r"cases=(?P<n>\d+)(?: \((?P<grades>\d+) grades\))?  "
    r"mean=(?P<mean>[\d.]+) \[(?P<lo>[\d.]+), (?P<hi>[\d.]+)\]  delta=(?P<delta>-|[-+][\d.]+ \[[^\]]*\])  "
    r"cost=(?P<cost>\S+)  latency=(?P<latency>\S+)  verdict=(?P<verdict>.+)$",
    re.M,
)
DECISION = re.compile(r"^task (?P<task>\S+): (?P<decision>.+)$", re.M)
VERDICT = re.compile(
    r"^(?:proven|ruled out|insufficient|undecided)(?: \(~\d+ more cases\)| \(diagnostic\))?$"
)


@dataclass(frozen=True)
class Stat:
    task: str
    candidate: str
    judge: str
    n: int
    mean: float
    lo: float
    hi: float
    delta: str
    verdict: str


def stats(output: str) -> dict[tuple[str, str, str], Stat]:
    """(task, candidate, judge) -> the figures of its line."""
    out: dict[tuple[str, str, str], Stat] = {}
    for m in STATS.finditer(output):
        stat = Stat(
            m["task"], m["candidate"], m["judge"], int(m["n"]), float(m["mean"]), float(m["lo"]),
            float(m["hi"]), m["delta"], m["verdict"],
        )  # fmt: skip
        out[(stat.task, stat.candidate, stat.judge)] = stat
    return out


def decisions(output: str) -> dict[str, str]:
    """task -> what to route, from the ``task T: ...`` lines."""
    return {m["task"]: m["decision"] for m in DECISION.finditer(output)}


def header(output: str) -> re.Match[str]:
    match = HEADER.search(output)
    assert match is not None, output
    return match


def llm(command: Command | Sequence[str], *extra: str, env: Mapping[str, str] | None = None) -> Result:
    """Run ``llm-connect`` with the command's words (plus ``extra``) in-process."""
    argv = list(command.argv if isinstance(command, Command) else command)
    assert argv[0] == "llm-connect", argv
    return invoke(*argv[1:], *extra, env=dict(env) if env is not None else None)


def substitute(command: Command, values: Mapping[str, str | Sequence[str]]) -> list[str]:
    """The command's words with each placeholder word replaced (a sequence replaces it by several)."""
    out: list[str] = []
    for word in command.argv:
        value = values.get(word, word)
        out += [value] if isinstance(value, str) else list(value)
    assert out != list(command.argv), f"no placeholder of {values} in {command.text}"
    return out


def claim(path: Path, fragment: str) -> str:
    """``fragment`` as the README says it (whitespace-normalised), or a failure naming it."""
    if re.sub(r"\s+", " ", fragment) not in prose(path):
        raise AssertionError(
            f"{path.relative_to(ROOT)} does not say {fragment!r}: a claim this test checks (change both together)"
        )
    return f"{path.relative_to(ROOT)}:{line_of(path, fragment)} says {fragment!r}"


def _decimals(quoted: str) -> int:
    return len(quoted.split(".")[1]) if "." in quoted else 0


def rounds_to(value: float, quoted: str) -> bool:
    """``value`` written to the precision of ``quoted`` is ``quoted`` (half a unit of its last digit)."""
    return abs(value - float(quoted)) <= 0.5 * 10.0 ** -_decimals(quoted) + 1e-9


def about(value: float, quoted: str) -> bool:
    """About ``quoted``: within one unit of its last digit."""
    return abs(value - float(quoted)) <= 10.0 ** -_decimals(quoted) + 1e-9


def block_after(path: Path, fragment: str, info: str = "text") -> list[str]:
    """The lines of the first ```info block after ``fragment``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = line_of(path, fragment)
    for i in range(start, len(lines)):
        if lines[i].strip() == f"```{info}":
            end = lines.index("```", i + 1)
            return lines[i + 1 : end]
    raise AssertionError(f"no ```{info} block after {fragment!r} in {path.relative_to(ROOT)}")


def shown_output_matches(shown: Sequence[str], output: str) -> list[str]:
    """The lines of a README's output block that the real output lacks, in order.

    ``...`` in a shown line stands for what the README left out (a line of its own: any lines);
    a run id and the run's wall time may differ. Every other character must be what the
    command printed, on one line, in the order shown.
    """
    actual = output.splitlines()
    missing: list[str] = []
    at = 0
    for line in shown:
        if line.strip() == "...":
            continue
        pattern = "".join(
            _loose(part) if i % 2 else re.escape(part) for i, part in enumerate(_PLACES.split(line))
        )
        for i in range(at, len(actual)):
            if re.fullmatch(pattern, actual[i]):
                at = i + 1
                break
        else:
            missing.append(line)
    return missing


# What may differ between a README's output block and a real run: left-out text, the run id,
# the wall time at the end of the header.
_PLACES = re.compile(r"(\.\.\.|run-\d{8}-\d{6}-[0-9a-f]{6}|· \d+(?:\.\d+)?s$)")


def _loose(part: str) -> str:
    if part == "...":
        return ".*"
    if part.startswith("run-"):
        return r"run-\d{8}-\d{6}-[0-9a-f]{6}"
    return r"· \d+(?:\.\d+)?s"


def case_means(db: Path, candidate: str, judge: str, tasks: Sequence[str] | None = None) -> list[float]:
    """Per-case mean grades (several grades of one case averaged, as routing does)."""
    query = "SELECT AVG(quality_score) FROM grades WHERE candidate_model = ? AND grader_id = ?"
    args: list[str] = [candidate, judge]
    if tasks is not None:
        query += f" AND task IN ({', '.join('?' for _ in tasks)})"
        args += list(tasks)
    with closing(sqlite3.connect(db)) as con:
        rows = con.execute(query + " GROUP BY task, case_id", args).fetchall()
    return [float(r[0]) for r in rows]


def mean_of(db: Path, candidate: str, judge: str, tasks: Sequence[str] | None = None) -> float:
    return statistics.fmean(case_means(db, candidate, judge, tasks))


@contextmanager
def serving(command: Command, *extra: str) -> Iterator[str]:
    """Run ``llm-connect view ...`` as a process until it printed what it serves; yield that, then
    stop it with Ctrl-C (SIGINT), as a reader would."""
    assert command.argv[:2] == ("llm-connect", "view"), command.text
    proc = subprocess.Popen(
        [sys.executable, "-m", "llm_connect", *command.argv[1:], *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("label cases at") or "read-only" in line:
                break
        yield "".join(lines)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode in (0, 130), err


def http(url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """GET ``url`` (POST ``body`` as JSON when given): the status and the parsed JSON or text answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            status, raw, kind = answer.status, answer.read(), answer.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        with exc:
            status, raw, kind = exc.code, exc.read(), exc.headers.get_content_type()
    return status, json.loads(raw) if kind == "application/json" else raw.decode()


def make_workdir(path: Path, ledger: Path | None = None) -> Path:
    """``path`` with ``examples`` linked to the repository's, and a copy of ``ledger`` as its default ledger."""
    (path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    if ledger is not None:
        for suffix in ("", "-wal", "-shm"):
            source = ledger.with_name(ledger.name + suffix)
            if source.exists():
                shutil.copyfile(source, path / f"llm_connect.db{suffix}")
    return path
