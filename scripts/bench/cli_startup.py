"""How long the CLI takes to start: ``--help``, ``route``, ``ledger summary`` vs ``import sqlalchemy``.

Usage: python scripts/bench/cli_startup.py [--rounds 15] [--importtime 8] [--keep DIR] [--base TREE]

Targets: ``llm-connect --help``, ``llm-connect route`` and ``llm-connect ledger summary`` on a
small SQLite ledger (50 grades) within 1.5x of ``python -c "import sqlalchemy"``, measured side
by side on the same machine (issue 36, item 6); ``llm-connect --help`` under 0.3 s (issue 4).

A fresh SQLite ledger gets 50 grades (1 task, 1 candidate, 1 judge, 50 cases)
through ``QualityLedger.record_batch``. Then every command runs once per round,
the commands alternating, ``--rounds`` rounds; the median wall time of each is
printed with its ratio to the baseline. Last, each command runs ``--importtime-runs`` times
under ``python -X importtime`` and its largest cumulative imports are listed, medians, against
the baseline's ``import sqlalchemy`` (packages, modules imported after their package,
``llm_connect`` modules; heaviest first, nested ones count in their importer too).

The CLI runs as ``python -m llm_connect`` with this interpreter (the code the ``llm-connect``
console script runs), from a temporary directory, on the tree this script is in, or the one
``$PYTHONPATH`` names. ``--base TREE`` (``git worktree add /tmp/base HEAD``) also runs each
command on that tree, in the same rounds: before and after a change, side by side.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

GRADES = 50
TASK, BASELINE, CANDIDATE, JUDGE = "qa", "big-model", "small-model", "exact"


def build(url: str, grades: int = GRADES) -> None:
    """``grades`` grades of one candidate against the baseline, one judge, one task."""
    from llm_connect.grading import GradingResult
    from llm_connect.ledger import QualityLedger, RecordItem
    from llm_connect.types import LLMResponse, RunConfig, Usage

    rng = random.Random(36)
    items = []
    for i in range(grades):
        score = 1.0 if rng.random() < 0.9 else 0.0
        result = GradingResult(
            quality_score=score,
            notes="match" if score else "differs",
            grader_id=JUDGE,
            baseline_response=LLMResponse(f"answer {i}", BASELINE, "openai", 900.0, Usage(40, 60), 0.01),
            candidate_response=LLMResponse(
                f"answer {i}" if score else f"other {i}", CANDIDATE, "openai", 300.0, Usage(40, 60), 0.001
            ),
            prompt=f"question {i}",
            run_config=RunConfig(temperature=0.0),
        )
        items.append(RecordItem(result, task=TASK, run_id="bench", case_id=f"c{i}"))
    with QualityLedger(url) as ledger:
        ledger.record_batch(items)


def commands(url: str) -> list[tuple[str, list[str]]]:
    cli = [sys.executable, "-m", "llm_connect"]
    return [
        ("llm-connect --help", [*cli, "--help"]),
        ("llm-connect ledger summary", [*cli, "ledger", "summary", "--db", url]),
        (
            "llm-connect route",
            [*cli, "route", "--db", url, "-t", TASK, "-b", BASELINE, "-c", CANDIDATE, "-j", JUDGE],
        ),
    ]


def run_once(cmd: Sequence[str], env: Mapping[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr.decode()}")
    return elapsed


def importtime(cmd: Sequence[str], env: Mapping[str, str], runs: int) -> dict[str, float]:
    """Median cumulative import time, in seconds, over ``runs`` runs: packages, their modules
    imported after the package had loaded (``sqlalchemy.orm``, ``numpy.ma``, ``typer._adapters``),
    and our modules."""
    seen: dict[str, list[float]] = {}
    for _ in range(runs):
        done = subprocess.run(
            [cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True, text=True, env=env, check=False
        )
        loaded: set[str] = set()
        for line in done.stderr.splitlines():  # a module's line comes when it has loaded
            if not line.startswith("import time:") or "cumulative" in line:
                continue
            _, cumulative, name = line[len("import time:") :].split("|")
            module = name.strip()
            package = module.partition(".")[0]
            if (
                module == package
                or package == "llm_connect"
                or (package in loaded and module.count(".") == 1)
            ):
                seen.setdefault(module, []).append(int(cumulative) / 1e6)
            loaded.add(module)
    # a module some runs did not import (a cache already warm) counts 0 in those
    return {m: statistics.median(v + [0.0] * (runs - len(v))) for m, v in seen.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="runs of each command, alternating")
    parser.add_argument("--importtime", type=int, default=8, help="imports listed per command (0: none)")
    parser.add_argument("--importtime-runs", type=int, default=5, help="-X importtime runs per command")
    parser.add_argument("--keep", type=Path, help="write the ledger here (default: a temporary directory)")
    parser.add_argument(
        "--base", type=Path, help="also run each command on this tree (a worktree of HEAD), alternating"
    )
    args = parser.parse_args()
    keep = args.keep.resolve() if args.keep else None
    tree = os.environ.get("PYTHONPATH") or str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": tree, "NO_COLOR": "1", "LLM_CONNECT_DEBUG": ""}
    trees = [("", env)]
    if args.base is not None:
        trees.append((" (base)", {**env, "PYTHONPATH": str(args.base.resolve())}))
    sys.path.insert(0, tree.split(os.pathsep)[0])  # build() writes with the same tree
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # so that ``-m llm_connect`` finds the trees above, not the current directory
        folder = keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        db = folder / "startup.db"
        db.unlink(missing_ok=True)
        url = f"sqlite:///{db}"
        build(url)
        runs = [('python -c "import sqlalchemy"', [sys.executable, "-c", "import sqlalchemy"], env)]
        runs += [(label + suffix, cmd, e) for label, cmd in commands(url) for suffix, e in trees]
        for _, cmd, e in runs:  # warm the page cache and .pyc files
            run_once(cmd, e)
        times: dict[str, list[float]] = {label: [] for label, _, _ in runs}
        load_before = os.getloadavg()[0]
        for _ in range(args.rounds):
            for label, cmd, e in runs:
                times[label].append(run_once(cmd, e))
        load_after = os.getloadavg()[0]
        base = statistics.median(times[runs[0][0]])
        print(
            f"{tree}: {args.rounds} rounds, {GRADES} grades, {os.cpu_count()} cores, "
            f"load average {load_before:.2f} -> {load_after:.2f}"
        )
        print(f"{'command':40} {'median s':>9} {'min s':>7} {'x baseline':>11}")
        for label, _, _ in runs:
            med = statistics.median(times[label])
            print(f"{label:40} {med:9.3f} {min(times[label]):7.3f} {med / base:11.2f}")
        verdicts = [
            f"{label}: {'within' if statistics.median(times[label]) <= 1.5 * base else 'ABOVE'}"
            for label, _ in commands(url)
        ]
        print("target <= 1.5x baseline: " + "; ".join(verdicts))
        help_median = statistics.median(times["llm-connect --help"])
        verdict = "within" if help_median < 0.3 else "ABOVE"
        print(f"llm-connect --help median {help_median:.3f} s: {verdict} the 0.3 s target (issue 4)")
        if args.importtime > 0:
            imports = {label: importtime(cmd, e, args.importtime_runs) for label, cmd, e in runs}
            scale = imports[runs[0][0]].get("sqlalchemy") or 1.0
            print(f"\nheaviest cumulative imports, medians of {args.importtime_runs} runs of -X importtime")
            print(f"(x: against the baseline's own `import sqlalchemy`, {scale:.3f} s)")
            for label, _, _ in runs:
                print(f"\n{label}:")
                for name, seconds in sorted(imports[label].items(), key=lambda kv: -kv[1])[: args.importtime]:
                    print(f"  {seconds:7.3f} s  {seconds / scale:5.2f}x  {name}")


if __name__ == "__main__":
    main()
