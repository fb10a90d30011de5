"""Browser fixtures for the report tests: headless Debian Chromium through chromium-driver (Selenium).

The browser never reaches the network: every host name resolves to nothing
except 127.0.0.1 (``--host-resolver-rules``), so an accidental external request
fails on this machine instead of leaving it, and the page's requests are still
read back from the DevTools performance log (:func:`network_requests`,
:func:`assert_offline`). Chromium, chromium-driver or selenium missing skips the
browser tests with the reason and the install command (``scripts/test`` installs
the Debian packages itself when it runs as root where apt-get exists); with
``LLM_CONNECT_REQUIRE_BROWSER=1`` (``.ci/run`` sets it) it is a failure instead.
A browser that is installed but does not start always fails.

``report_ledger`` builds a small, realistic SQLite ledger: two tasks, a
baseline and two candidates (``gpt-4o-mini`` proven, ``llama-3.1-8b`` ruled
out, yet failing two cases per task), two judges, 80 cases per task, texts
that differ by a few words, tool calls on some cases and one answer holding
``<script>`` markup.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.types import LLMResponse, RunConfig, ToolCall, Usage
from llm_connect.values import GradingResult
from tests.fixtures.skips import skip_or_fail

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
REQUIRE_BROWSER_ENV = "LLM_CONNECT_REQUIRE_BROWSER"
"""Set to ``1`` (``.ci/run`` does) to make a missing browser fail the browser tests instead of skipping them."""

SCREENS_DIR = Path("/tmp/report-screens")
"""Where the tests copy their section screenshots for a person to look at (never committed)."""

# Everything resolves to "not found" except the loopback address the view server listens on.
HOST_RULES = "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"

PWNED_TEXT = (
    "Run this in the console: <script>window.__pwned=1</script> and then close the tag with "
    '</script><img src="x" onerror="window.__pwned=2"> before saving.'
)
"""A candidate answer holding markup: the report must show it as text and run none of it."""
PWNED_CASE = "support-007"

BASELINE = "gpt-4o"
GOOD = "gpt-4o-mini"
BAD = "llama-3.1-8b"
JUDGES = ("embedding:all-MiniLM-L6-v2", "vrty:1.0.1")
TASKS = ("support", "billing")
CASES_PER_TASK = 80
RUN_ID = "nightly-2026-01-12"
GOOD_FAILS = (11, 53)
"""Cases where the proven candidate still fails (0.72 on both judges), in every task."""


# -- the browser ------------------------------------------------------------------------------


def chromium_options(*, javascript: bool = True, user_data_dir: str | None = None) -> Any:
    """Selenium options for headless Debian Chromium, offline, console and network logged."""
    from selenium.webdriver.chrome.options import Options

    options = Options()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # the tests run as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={user_data_dir or tempfile.mkdtemp(prefix='llmc-chromium-')}",
        f"--host-resolver-rules={HOST_RULES}",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-extensions",
        "--disable-sync",
        "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider",
        "--metrics-recording-only",
        "--mute-audio",
    ):
        options.add_argument(arg)
    if not javascript:
        options.add_argument("--blink-settings=scriptEnabled=false")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return options


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (what is missing and how to install it), or ``None``."""
    packages = {"chromium": CHROMIUM, "chromium-driver": CHROMEDRIVER}
    missing = {name: path for name, path in packages.items() if not _executable(path)}
    if missing:
        return (
            f"{' and '.join(missing)} not installed (no {', '.join(missing.values())}): "
            "apt-get install chromium chromium-driver (scripts/test does it when run as root)"
        )
    if importlib.util.find_spec("selenium") is None:
        return "selenium not installed: pip install -e '.[dev]'"
    return None


def require_browser() -> None:
    """Skip the calling test when the browser is missing; fail instead under ``LLM_CONNECT_REQUIRE_BROWSER=1``."""
    reason = browser_missing()
    if reason is None:
        return
    skip_or_fail(REQUIRE_BROWSER_ENV, reason, tests="browser tests")


def start_chromium(*, javascript: bool = True) -> Any:
    """A new headless Chromium driven by ``/usr/bin/chromedriver``.

    Skips when either is missing, or fails under ``LLM_CONNECT_REQUIRE_BROWSER=1`` (:func:`require_browser`).
    """
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="llmc-chromium-")
    driver = webdriver.Chrome(
        service=Service(CHROMEDRIVER), options=chromium_options(javascript=javascript, user_data_dir=profile)
    )
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    driver._llmc_profile = profile  # removed with the driver
    return driver


def stop_chromium(driver: Any) -> None:
    profile = getattr(driver, "_llmc_profile", None)
    try:
        driver.quit()
    finally:
        if profile:
            shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the session (each test gets it on a blank page through ``page``)."""
    driver = start_chromium()
    try:
        yield driver
    finally:
        stop_chromium(driver)


@pytest.fixture
def page(browser: Any) -> Any:
    """The session's browser on ``about:blank`` with its console and network logs emptied."""
    browser.get("about:blank")
    drain_logs(browser)
    return browser


@pytest.fixture(scope="session")
def browser_without_js() -> Iterator[Any]:
    """A second headless Chromium with JavaScript disabled (``--blink-settings=scriptEnabled=false``)."""
    driver = start_chromium(javascript=False)
    try:
        yield driver
    finally:
        stop_chromium(driver)


# -- what the page did -----------------------------------------------------------------------


def drain_logs(driver: Any) -> None:
    """Forget the console and network entries logged so far."""
    driver.get_log("browser")
    driver.get_log("performance")


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """The SEVERE console entries logged since the last read (reading empties the log)."""
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def assert_no_console_errors(driver: Any) -> None:
    errors = console_errors(driver)
    assert not errors, "console errors:\n" + "\n".join(str(e.get("message")) for e in errors)


def network_requests(driver: Any) -> list[str]:
    """Every URL the page asked for since the last read (``Network.requestWillBeSent``)."""
    urls = []
    for entry in driver.get_log("performance"):
        try:
            message = json.loads(entry["message"])["message"]
        except (KeyError, TypeError, ValueError):
            continue
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def assert_offline(driver: Any, allowed_prefixes: Sequence[str]) -> list[str]:
    """Fail on any request since the last read other than ``data:`` URLs and the allowed prefixes.

    Give the report file's own ``file://`` URL, or ``http://127.0.0.1:PORT/`` for the
    view server; returns the URLs seen (so a test can check the page did load).
    """
    urls = network_requests(driver)
    allowed = ("data:", "about:blank", *allowed_prefixes)
    outside = [u for u in urls if not u.startswith(allowed)]
    assert not outside, f"requests beyond {list(allowed_prefixes)}: {outside}"
    return urls


def screenshot(driver: Any, tmp_path: Path, name: str, selector: str | None = None) -> Path:
    """A PNG of one element (default ``section#NAME``) under ``tmp_path/screens``, copied to /tmp/report-screens."""
    from selenium.webdriver.common.by import By

    element = driver.find_element(By.CSS_SELECTOR, selector or f"section#{name}")
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", element)
    target = tmp_path / "screens" / f"{name}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    assert element.screenshot(str(target)), f"no screenshot of {selector or name}"
    SCREENS_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copy(target, SCREENS_DIR / target.name)
    return target


# -- a ledger worth looking at ----------------------------------------------------------------

_ANSWERS = {
    "support": (
        "To reset your password open Settings, choose Security and click Reset password; "
        "a link arrives by email within five minutes.",
        "Order {n} ships from the Leeds warehouse and should arrive in two to three working days; "
        "you will get a tracking number by email.",
        "You can return an unused item within 30 days: print the prepaid label from your account "
        "and drop the parcel at any post office.",
    ),
    "billing": (
        "Invoice {n} was charged to the card ending 4242 on the first of the month; the receipt is "
        "under Billing, then History.",
        "A refund of the duplicate charge was issued today and takes five to ten business days to "
        "appear on your statement.",
        "Switching to the annual plan saves two months; the difference is prorated on your next invoice.",
    ),
}

# Word swaps that make a candidate's answer differ from the baseline's by a few words.
_CLOSE = (("five minutes", "a few minutes"), ("two to three", "2-3"), ("any post office", "a post office"),
          ("first of the month", "1st of the month"), ("five to ten", "5-10"), ("saves two months", "saves 2 months"))  # fmt: skip
_FAR = "I am not sure about that. Please contact support or check the help center for more information."


def _candidate_text(baseline: str, model: str, i: int) -> str:
    if model == GOOD and i in GOOD_FAILS:
        return baseline.split(";")[0].split(":")[0] + ", but I cannot check the details of your account."
    if model == GOOD:
        text = baseline
        for old, new in _CLOSE:
            text = text.replace(old, new)
        return text if text != baseline else baseline.replace(" and ", " & ", 1)
    # The weak candidate: half its answers drop the content, the rest reword it loosely.
    if i % 2 == 0:
        return _FAR
    return baseline.replace("you will", "maybe you'll").replace("within", "in about").rsplit(";", 1)[0] + "."


def _score(model: str, judge: str, i: int) -> float:
    if model == GOOD and i in GOOD_FAILS:
        return 0.72
    if model == GOOD:
        top = 1.0 if judge.startswith("embedding") else 0.995
        return round(top - 0.03 * ((i * 7) % 5) / 4, 4)  # 0.965 .. 1.0: proven with 80 cases
    if i % 2 == 0:
        return round(0.18 + 0.05 * (i % 5), 4)  # 0.18 .. 0.38: failures
    return round(0.62 + 0.04 * (i % 6), 4)  # 0.62 .. 0.82


_COST = {BASELINE: 0.0042, GOOD: 0.00025, BAD: 0.00009}
_LATENCY = {BASELINE: 1450.0, GOOD: 610.0, BAD: 380.0}
_SERVED = {BASELINE: "gpt-4o-2024-08-06", GOOD: "gpt-4o-mini-2024-07-18", BAD: "llama3"}
_ENDPOINT = {
    BASELINE: "https://api.openai.com/v1",
    GOOD: "https://api.openai.com/v1",
    BAD: "http://gpu-box:8080/v1",
}


def _response(model: str, text: str, i: int, tools: tuple[ToolCall, ...] = ()) -> LLMResponse:
    return LLMResponse(
        text=text,
        model=_SERVED[model],
        provider="openai",
        latency_ms=_LATENCY[model] + 13.0 * (i % 7),
        usage=Usage(prompt_tokens=180 + i, completion_tokens=len(text.split()) + 4),
        cost_usd=_COST[model] * (1.0 + 0.01 * (i % 5)),
        tool_calls=tools,
        finish_reason="tool_calls" if tools else "stop",
        requested_model=model,
        endpoint=_ENDPOINT[model],
    )


def report_items(cases_per_task: int = CASES_PER_TASK, run_id: str = RUN_ID) -> list[RecordItem]:
    """The grades of the report ledger (see the module docstring), in recording order."""
    items = []
    config = RunConfig(temperature=0.0)
    for task in TASKS:
        for i in range(cases_per_task):
            case_id = f"{task}-{i:03d}"
            prompt = f"[{task}] customer question #{i}: " + (
                "where is my order?" if i % 3 == 1 else "how do I?"
            )
            baseline_text = _ANSWERS[task][i % 3].format(n=f"A-{1000 + i}")
            tools: tuple[ToolCall, ...] = ()
            if i % 8 == 3:
                tools = (ToolCall("lookup_order", json.dumps({"order_id": f"A-{1000 + i}"})),)
            baseline = _response(BASELINE, baseline_text, i, tools)
            for model in (GOOD, BAD):
                text = _candidate_text(baseline_text, model, i)
                if model == GOOD and case_id == PWNED_CASE:
                    text = PWNED_TEXT
                cand_tools = tools
                if tools and model == BAD:
                    cand_tools = (ToolCall("lookup_order", json.dumps({"order": f"A{1000 + i}"})),)
                candidate = _response(model, text, i, cand_tools)
                for judge in JUDGES:
                    score = _score(model, judge, i)
                    if model == GOOD and case_id == PWNED_CASE:
                        score = 0.96
                    notes = (
                        f"{judge.split(':')[0]} {score:.2f}: "
                        + ("same content, a few words differ" if score >= 0.9 else "misses the answer")
                        + (" <b>not bold</b>" if i == 5 else "")
                    )
                    result = GradingResult(
                        score,
                        notes,
                        judge,
                        baseline,
                        candidate,
                        details={"judge_spec": judge.split(":")[0], "case": i},
                        prompt=prompt,
                        run_config=config,
                    )
                    items.append(
                        RecordItem(
                            result,
                            task,
                            run_id,
                            case_id,
                            tags=("tools",) if tools else (),
                            metadata={"customer_tier": "gold" if i % 4 == 0 else "standard"},
                        )
                    )
    return items


def fill_report_ledger(ledger: QualityLedger) -> QualityLedger:
    """Record :func:`report_items` in ``ledger`` (in one batch, and the last few one by one)."""
    items = report_items()
    ledger.record_batch(items[:-8])
    for item in items[-8:]:  # the single-grade path too
        ledger.record(item.result, task=item.task, run_id=item.run_id, case_id=item.case_id, tags=item.tags)
    return ledger


def add_calibration_and_stability(ledger: QualityLedger) -> None:
    """A real calibration (vrty against embedding, from the stored grades) and one stability analysis."""
    from llm_connect.calibration import calibrate

    calibrate(ledger, judge=JUDGES[1], against=[JUDGES[0]], task="support", probes=["length"], n_boot=200)
    ledger.record_stability(
        task="support",
        model=GOOD,
        adapter_id=f"openai:{GOOD}",
        prompt_sha256="3" * 64,
        runs=20,
        successful_runs=19,
        overall_score=0.81,
        verdict="RISKY",
        report={
            "fingerprints": [
                {
                    "name": "VERBOSITY_DRIFT",
                    "severity": "MEDIUM",
                    "evidence": "answer length cv 0.41 <over 0.3>",
                }
            ]
        },
    )


@pytest.fixture
def report_ledger(tmp_path: Path) -> Iterator[QualityLedger]:
    """The report ledger on SQLite under ``tmp_path`` (2 tasks x 2 candidates x 2 judges x 80 cases)."""
    ledger = QualityLedger(f"sqlite:///{tmp_path / 'report.db'}")
    try:
        yield fill_report_ledger(ledger)
    finally:
        ledger.close()
