"""How long ``llm-connect --help`` takes, against ``python -c pass`` measured in the same run.

Usage: python scripts/bench/cli_help.py [--repeat 15]

Target (issue 4): ``llm-connect --help`` under 0.3 s wall on the project machine.
Prints the median wall time of each command and the ratio.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wall(cmd: list[str], repeat: int) -> list[float]:
    times, _ = measure(cmd, repeat)
    return times


def measure(cmd: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """Wall times and CPU times (user + sys of the child) of ``repeat`` runs."""
    times, cpus = [], []
    for _ in range(repeat):
        cpu0 = _child_cpu()
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
        cpus.append(_child_cpu() - cpu0)
    return times, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    script = Path(sys.executable).with_name("llm-connect")
    cli = [str(script)] if script.exists() else [shutil.which("llm-connect") or "llm-connect"]
    wall([*cli, "--help"], 2)  # warm the page cache and .pyc files
    rows = []
    for label, cmd in (
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("llm-connect --version", [*cli, "--version"]),
        ("llm-connect --help", [*cli, "--help"]),
        ("llm-connect grade --help", [*cli, "grade", "--help"]),
    ):
        times, cpus = measure(cmd, args.repeat)
        rows.append((label, statistics.median(times), min(times), statistics.median(cpus)))
    base = rows[0][1]
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"{'command':28} {'median s':>9} {'min s':>7} {'cpu s':>7} {'x python':>9}")
    for label, med, low, cpu in rows:
        print(f"{label:28} {med:9.3f} {low:7.3f} {cpu:7.3f} {med / base:9.1f}")
    help_median = rows[2][1]
    verdict = "within" if help_median < 0.3 else "ABOVE"
    print(f"llm-connect --help median {help_median:.3f} s: {verdict} the 0.3 s target")


if __name__ == "__main__":
    main()
