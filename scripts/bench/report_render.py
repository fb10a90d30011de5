"""Benchmark: how long a report of 10,000 grades takes to load in headless Chromium.

Builds a fresh SQLite ledger of 2 tasks x 2 candidates x 2 judges x 1,250
cases = 10,000 grades (answers of ~60-110 words with a few words changed
between baseline and candidate, notes, metadata, a tool call on every tenth
case), writes the report twice with ``write_report`` (the default ``max_cases``,
and every grade embedded), then opens each file ``--rounds`` times in headless
Debian Chromium (``/usr/bin/chromium`` through ``/usr/bin/chromedriver``,
Selenium, no network) and prints, from the Navigation Timing entry,
``domContentLoadedEventEnd`` and ``loadEventEnd`` (ms from navigation start;
the case browser fills its first page of rows in a script before both), the
first contentful paint, the time a search typed into the case browser takes
(filtering the embedded grades in the page), and the page's console errors. The issue's target is
under 2 s. ``--file`` measures existing report files instead.

    python scripts/bench/report_render.py [--grades 10000] [--rounds 5] [--file report.html ...]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


_TIMING_JS = """
var nav = performance.getEntriesByType('navigation')[0];
var fcp = performance.getEntriesByType('paint')
  .filter(function (p) { return p.name === 'first-contentful-paint'; });
return {dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd, fcp: fcp.length ? fcp[0].startTime : null,
        rows: document.querySelectorAll('#cases .case-row').length,
        count: (document.getElementById('case-count') || {}).textContent};
"""


_FILTER_JS = """
var box = document.getElementById('f-search');
var times = [];
arguments[0].forEach(function (term) {
  var t = performance.now();
  box.value = term;
  box.dispatchEvent(new Event('input'));
  times.push(performance.now() - t);
});
return times;
"""


def start_chromium(profile: str) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-extensions",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def measure(driver: Any, path: Path, rounds: int) -> dict[str, Any]:
    runs = []
    errors = 0
    for _ in range(rounds):
        driver.get("about:blank")
        driver.get_log("browser")
        driver.get(path.resolve().as_uri())  # returns once the load event has fired
        for _ in range(200):
            timing = driver.execute_script(_TIMING_JS)
            if timing["load"]:
                break
            time.sleep(0.02)
        errors += sum(1 for e in driver.get_log("browser") if e.get("level") == "SEVERE")
        runs.append(timing)
    # The case browser filters the embedded grades in the page: a search, cold then warm.
    search_ms = driver.execute_script(_FILTER_JS, ["refund", "refund policy", ""])
    errors += sum(1 for e in driver.get_log("browser") if e.get("level") == "SEVERE")
    return {"runs": runs, "console_errors": errors, "search_ms": search_ms}


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grades", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--file", type=Path, action="append", default=[], help="measure this report file")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="report-render-"))
    try:
        files: list[tuple[str, Path]] = [(str(f), f) for f in args.file]
        if not files:
            from llm_connect.report import write_report

            t0 = time.perf_counter()
            from report_size import build

            from llm_connect.ledger import QualityLedger

            url = f"sqlite:///{work / 'bench.db'}"
            build(url, args.grades)  # the same 10,000-grade ledger report_size.py measures
            ledger = QualityLedger(url)
            print(f"ledger: {args.grades} grades in {time.perf_counter() - t0:.1f} s")
            try:
                for label, max_cases in (
                    ("max_cases default", None),
                    (f"max_cases={args.grades}", args.grades),
                ):
                    target = work / f"report-{max_cases or 'default'}.html"
                    t0 = time.perf_counter()
                    info = write_report(ledger, target, max_cases=max_cases)
                    print(
                        f"{label}: {info.bytes / 1e6:.2f} MB, {info.cases_embedded} of {info.grades} "
                        f"grades embedded, written in {time.perf_counter() - t0:.1f} s"
                    )
                    files.append((label, target))
            finally:
                ledger.close()
        profile = tempfile.mkdtemp(prefix="report-render-chromium-")
        driver = start_chromium(profile)
        try:
            print(f"chromium: {driver.capabilities.get('browserVersion')}, {args.rounds} loads per file")
            for label, path in files:
                result = measure(driver, path, args.rounds)
                runs = result["runs"]
                loads = [r["load"] for r in runs]
                print(
                    f"{label} ({path.stat().st_size / 1e6:.2f} MB): "
                    f"loadEventEnd median {median(loads):.0f} ms "
                    f"(min {min(loads):.0f}, max {max(loads):.0f}); domContentLoadedEventEnd median "
                    f"{median([r['dcl'] for r in runs]):.0f} ms; first contentful paint median "
                    f"{median([r['fcp'] for r in runs if r['fcp'] is not None]):.0f} ms; "
                    f"{runs[-1]['rows']} rows shown (#case-count {runs[-1]['count']}); search typed "
                    f"(first, second, cleared): {', '.join(f'{t:.0f}' for t in result['search_ms'])} ms; "
                    f"console errors: {result['console_errors']}"
                )
        finally:
            driver.quit()
            shutil.rmtree(profile, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
