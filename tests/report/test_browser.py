"""The report in a real browser: the offline file and the ``view`` server in headless Chromium.

Each test checks the console holds no error and that the page asked for
nothing beyond the file itself (or the view server's own 127.0.0.1 address)
and ``data:`` URLs, and saves PNG screenshots of what it looked at under its
tmp dir (copied to /tmp/report-screens for a person to look at).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_connect.ledger import QualityLedger
from tests.report.conftest import (
    BAD,
    GOOD,
    GOOD_FAILS,
    JUDGES,
    PWNED_CASE,
    RUN_ID,
    TASKS,
    add_calibration_and_stability,
    assert_no_console_errors,
    assert_offline,
    drain_logs,
    fill_report_ledger,
    network_requests,
    screenshot,
)

pytestmark = pytest.mark.browser

SECTIONS = ("routing", "evidence", "charts", "distributions", "calibration", "stability", "cases")
TOTAL = len(TASKS) * 2 * len(JUDGES) * 80  # grades in the report ledger


# -- helpers ----------------------------------------------------------------------------------


def by_css(driver: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def wait_for(driver: Any, condition: Any, what: str, timeout: float = 15.0) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d), message=what)


_ROWS_JS = """
return Array.from(document.querySelectorAll('#cases .case-row'))
  .filter(function (r) { return r.getClientRects().length > 0; })
  .map(function (r) { return {task: r.dataset.task, candidate: r.dataset.candidate, judge: r.dataset.judge,
                              score: r.dataset.score}; });
"""


_RUNS_JS = """
return Array.from(document.querySelectorAll('#cases .case-row .case-run'))
  .filter(function (r) { return r.getClientRects().length > 0; }).length;
"""


def visible_runs(driver: Any) -> int:
    """How many grades (``.case-run``, one per run of a case) the shown cards hold."""
    return int(driver.execute_script(_RUNS_JS))


def visible_rows(driver: Any) -> list[dict[str, Any]]:
    """Every shown case card (``.case-row`` of ``#cases``) with its data attributes (score as a float)."""
    rows = driver.execute_script(_ROWS_JS)
    for row in rows:
        row["score"] = float(row["score"])
    return rows  # type: ignore[no-any-return]


def case_count(driver: Any) -> int:
    return int(by_css(driver, "#case-count").text.strip())


def rows_settled(driver: Any, check: Any) -> list[dict[str, Any]]:
    """Wait until the shown cards pass ``check`` and ``#case-count`` says how many grades they hold."""
    state: dict[str, Any] = {}

    def ready(d: Any) -> bool:
        rows = visible_rows(d)
        state["rows"] = rows
        try:
            count = case_count(d)
        except ValueError:
            return False
        return bool(rows) and count == visible_runs(d) and bool(check(rows))

    wait_for(driver, ready, "the case rows did not settle", timeout=20)
    return state["rows"]  # type: ignore[no-any-return]


def select(driver: Any, selector: str, value: str) -> None:
    from selenium.webdriver.support.select import Select

    Select(by_css(driver, selector)).select_by_value(value)


def type_into(driver: Any, selector: str, text: str) -> None:
    field = by_css(driver, selector)
    field.clear()
    field.send_keys(text)


def check_sections(driver: Any, tmp_path: Path, prefix: str, expected: tuple[str, ...] = SECTIONS) -> None:
    """Every expected section is present, visible and has text; a screenshot of each."""
    for name in expected:
        section = by_css(driver, f"section#{name}")
        assert section.is_displayed(), f"section#{name} is not visible"
        assert section.text.strip(), f"section#{name} shows no text"
        screenshot(driver, tmp_path, f"{prefix}-{name}", f"section#{name}")


def check_filters(driver: Any) -> None:
    """The case browser's controls are the ones the contract names, with its values."""

    def options(selector: str) -> list[str]:
        return [
            o.get_attribute("value") for o in by_css(driver, selector).find_elements("css selector", "option")
        ]

    assert set(options("select#f-task")) == {"", *TASKS}
    assert set(options("select#f-candidate")) == {"", GOOD, BAD}
    assert set(options("select#f-judge")) == {"", *JUDGES}
    assert set(options("select#f-sort")) == {"score-asc", "score-desc"}
    for name in ("f-min", "f-max"):
        field = by_css(driver, f"input#{name}")
        assert (field.get_attribute("type"), field.get_attribute("min"), field.get_attribute("max")) == (
            "number",
            "0",
            "1",
        )
    assert by_css(driver, "input#f-failures").get_attribute("type") == "checkbox"
    assert by_css(driver, "input#f-search").get_attribute("type") in ("text", "search")


def pwned_not_run(driver: Any) -> None:
    assert driver.execute_script("return typeof window.__pwned") == "undefined", "the <script> answer ran"


def open_pwned_case(driver: Any, tmp_path: Path, prefix: str) -> None:
    """Search for the answer holding markup, open its row: it shows as text and nothing of it runs."""
    type_into(driver, "#f-search", "__pwned")
    rows = rows_settled(driver, lambda rows: len(rows) == len(JUDGES))
    assert {r["candidate"] for r in rows} == {GOOD} and {r["judge"] for r in rows} == set(JUDGES)
    row = by_css(driver, "#cases .case-row")
    assert PWNED_CASE in row.text
    row.find_element("css selector", "summary").click()
    wait_for(driver, lambda d: "window.__pwned=1" in row.text, "the opened row shows no answer")
    text = row.text
    assert "<script>window.__pwned=1</script>" in text, text
    assert '</script><img src="x" onerror="window.__pwned=2">' in text, text
    assert not row.find_elements("css selector", "script, img")
    pwned_not_run(driver)
    screenshot(driver, tmp_path, f"{prefix}-case-opened", "#cases")


# -- the browser itself -----------------------------------------------------------------------


def test_the_browser_cannot_reach_the_network_and_the_log_sees_it(page: Any, tmp_path: Path) -> None:
    probe = tmp_path / "probe.html"
    probe.write_text(
        "<!doctype html><title>probe</title><p>probe</p>"
        '<img src="https://cdn.example.net/pixel.png">'
        "<script>window.__fetched = fetch('http://example.com/x').then(function () { return 'reached'; },"
        " function (e) { return 'failed: ' + e; });</script>",
        encoding="utf-8",
    )
    page.get(probe.as_uri())
    outcome = page.execute_async_script("window.__fetched.then(arguments[arguments.length - 1]);")
    assert outcome.startswith("failed"), outcome
    urls = network_requests(page)
    assert probe.as_uri() in urls
    assert "http://example.com/x" in urls and "https://cdn.example.net/pixel.png" in urls
    page.get(probe.as_uri())
    with pytest.raises(AssertionError, match=r"example\.com"):
        assert_offline(page, [probe.as_uri()])


# -- the offline file -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The report of the report ledger with a calibration and a stability analysis: every section."""
    from llm_connect.report import write_report

    where = tmp_path_factory.mktemp("report-file")
    with QualityLedger(f"sqlite:///{where / 'report.db'}") as ledger:
        fill_report_ledger(ledger)
        add_calibration_and_stability(ledger)
        info = write_report(ledger, where / "report.html")
    assert info.grades == TOTAL and not info.truncated
    yield where / "report.html"


def open_file(page: Any, path: Path) -> str:
    url = path.as_uri()
    page.get(url)
    wait_for(page, lambda d: d.execute_script("return document.readyState") == "complete", "page load")
    return url


def test_the_file_opens_offline_with_every_section_and_no_console_error(
    page: Any, report_file: Path, tmp_path: Path
) -> None:
    url = open_file(page, report_file)
    rows = rows_settled(page, lambda rows: len(rows) > 0)
    assert int(by_css(page, "#case-total").text) == TOTAL
    assert len(rows) == case_count(page) <= TOTAL
    assert not page.find_elements("css selector", "#truncated")
    decisions = by_css(page, "section#routing").text
    for task in TASKS:
        assert re.search(rf"{task}: route to {re.escape(GOOD)}", decisions), decisions
    check_sections(page, tmp_path, "file")
    check_filters(page)
    pwned_not_run(page)
    assert_no_console_errors(page)
    assert url in assert_offline(page, [url])


def test_the_summary_is_in_the_static_html(
    browser_without_js: Any, report_file: Path, tmp_path: Path
) -> None:
    driver = browser_without_js
    # JavaScript really is off in this browser: a page's own script does not run.
    probe = tmp_path / "js.html"
    probe.write_text("<!doctype html><title>before</title><script>document.title = 'ran'</script>", "utf-8")
    driver.get(probe.as_uri())
    assert driver.title == "before"
    drain_logs(driver)

    url = open_file(driver, report_file)
    decisions = by_css(driver, "section#routing")
    assert decisions.is_displayed() and f"route to {GOOD}" in decisions.text
    # one sentence per decision; the long reason is behind a closed disclosure that opens without JS
    sentences = decisions.find_elements("css selector", "p.sentence")
    assert len(sentences) == len(TASKS)
    assert all(s.text.startswith(f"Route to {GOOD} instead of") and s.text.endswith(".") for s in sentences)
    assert not any(". " in s.text or ";" in s.text for s in sentences)
    reason = decisions.find_element("css selector", "details.reason")
    assert reason.get_attribute("open") is None and "anytime-valid" not in decisions.text
    reason.find_element("css selector", "summary").click()
    wait_for(driver, lambda d: "anytime-valid" in reason.text, "the disclosure did not open")
    assert "anytime-valid" not in by_css(driver, "section#evidence").text  # never repeated there
    assert by_css(driver, "section#evidence").text.count("ruled out") >= len(TASKS) * len(JUDGES)
    for name in SECTIONS:
        assert by_css(driver, f"section#{name}").text.strip(), f"section#{name} is empty without JavaScript"
    assert not visible_rows(driver)  # the case browser is the only part that needs JavaScript
    assert "needs JavaScript" in by_css(driver, "section#cases").text
    screenshot(driver, tmp_path, "nojs-decisions", "section#routing")
    assert_no_console_errors(driver)
    assert_offline(driver, [url])

    # And in the bytes: the decision's words without any script having run.
    raw = report_file.read_text("utf-8")
    static = html.unescape(
        re.sub(r"<[^>]+>", " ", raw.split('<section id="routing">', 1)[1].split("</section>")[0])
    )
    assert "route to" in static and GOOD in static and "ruled out" in static


def test_an_answer_holding_script_shows_as_text_and_runs_nothing(
    page: Any, report_file: Path, tmp_path: Path
) -> None:
    url = open_file(page, report_file)
    open_pwned_case(page, tmp_path, "file")
    assert_no_console_errors(page)
    assert_offline(page, [url])  # the <img src="x"> of the answer was never requested


def test_a_case_shows_both_answers_with_the_diff_tool_calls_and_served_models(
    page: Any, report_file: Path, tmp_path: Path
) -> None:
    url = open_file(page, report_file)
    select(page, "#f-candidate", GOOD)
    select(page, "#f-judge", JUDGES[0])
    type_into(page, "#f-search", "support-011")  # a failing case of the proven candidate, with a tool call
    rows_settled(page, lambda rows: len(rows) == 1)
    row = by_css(page, "#cases .case-row")
    assert row.get_attribute("data-task") == "support" and float(row.get_attribute("data-score")) < 0.9
    row.find_element("css selector", "summary").click()
    wait_for(page, lambda d: "tool call" in row.text, "the opened row shows no tool call")
    text = row.text
    assert "lookup_order" in text and "A-1011" in text
    assert "gpt-4o-2024-08-06" in text and "gpt-4o-mini-2024-07-18" in text  # served model names
    # the words that differ are marked on both sides alike, neither struck through nor red
    assert not row.find_elements("css selector", "del, ins, s, strike")
    base = row.find_elements("css selector", ".side:first-child mark.diff-base")
    cand = row.find_elements("css selector", ".side:last-child mark.diff-cand")
    assert base and cand
    for mark in (*base, *cand):
        assert mark.value_of_css_property("text-decoration-line") == "none"
        assert mark.value_of_css_property("color") == row.value_of_css_property("color")
    assert base[0].value_of_css_property("background-color") != cand[0].value_of_css_property(
        "background-color"
    )
    assert "highlighted: words that differ" in row.text
    assert [r.get_attribute("data-run") for r in row.find_elements("css selector", ".case-run")] == [RUN_ID]
    screenshot(page, tmp_path, "file-case-tools", "#cases")
    assert_no_console_errors(page)
    assert_offline(page, [url])


def test_filters_change_the_rows(page: Any, report_file: Path, tmp_path: Path) -> None:
    url = open_file(page, report_file)
    everything = rows_settled(page, lambda rows: True)
    assert everything[0]["candidate"] == BAD  # worst first

    select(page, "#f-candidate", GOOD)
    good = rows_settled(page, lambda rows: {r["candidate"] for r in rows} == {GOOD})
    assert by_css(page, "#case-total").text == str(TOTAL // 2)

    by_css(page, "#f-failures").click()
    failing = rows_settled(page, lambda rows: all(r["score"] < 0.9 for r in rows) and len(rows) < len(good))
    assert {r["candidate"] for r in failing} == {GOOD}
    assert len(failing) == case_count(page) == len(TASKS) * len(JUDGES) * len(GOOD_FAILS)

    select(page, "#f-candidate", BAD)
    failing = rows_settled(page, lambda rows: {r["candidate"] for r in rows} == {BAD})
    assert all(r["score"] < 0.9 for r in failing)
    assert by_css(page, "#case-total").text == str(TOTAL // 2)  # every grade of llama fails

    select(page, "#f-task", "billing")
    select(page, "#f-judge", JUDGES[1])
    narrowed = rows_settled(
        page, lambda rows: {(r["task"], r["judge"]) for r in rows} == {("billing", JUDGES[1])}
    )
    assert len(narrowed) < len(failing)

    type_into(page, "#f-min", "0.2")
    type_into(page, "#f-max", "0.3")
    ranged = rows_settled(page, lambda rows: all(0.2 <= r["score"] <= 0.3 for r in rows))
    assert len(ranged) < len(narrowed)
    screenshot(page, tmp_path, "file-cases-filtered", "#cases")

    # Back to everything, then a search term: only the cases that mention it.
    by_css(page, "#f-failures").click()
    for name in ("#f-task", "#f-candidate", "#f-judge"):
        select(page, name, "")
    type_into(page, "#f-min", "0")
    type_into(page, "#f-max", "1")
    rows_settled(page, lambda rows: len(rows) == len(everything))
    type_into(page, "#f-search", "warehouse")
    found = rows_settled(page, lambda rows: 0 < len(rows) < len(everything))
    assert {r["task"] for r in found} == {"support"}  # the shipping answer exists only in support
    assert_no_console_errors(page)
    assert_offline(page, [url])


def test_sorting_orders_the_scores(page: Any, report_file: Path) -> None:
    url = open_file(page, report_file)
    select(page, "#f-sort", "score-desc")
    scores = [r["score"] for r in rows_settled(page, lambda rows: rows[0]["score"] >= rows[-1]["score"])]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
    select(page, "#f-sort", "score-asc")
    scores = [r["score"] for r in rows_settled(page, lambda rows: rows[0]["score"] <= rows[-1]["score"])]
    assert scores == sorted(scores) and scores[0] < scores[-1]
    assert_no_console_errors(page)
    assert_offline(page, [url])


def test_a_truncated_file_says_so_and_omits_sections_without_data(
    page: Any, report_ledger: QualityLedger, tmp_path: Path
) -> None:
    from llm_connect.report import write_report

    info = write_report(report_ledger, tmp_path / "small.html", max_cases=40)
    assert info.truncated
    url = open_file(page, tmp_path / "small.html")
    notice = by_css(page, "#truncated")
    assert notice.is_displayed() and notice.text.strip()
    rows = rows_settled(page, lambda rows: True)
    assert len(rows) <= info.cases_embedded < TOTAL
    assert not page.find_elements("css selector", "#calibration, #stability")
    check_sections(page, tmp_path, "truncated", ("routing", "evidence", "charts", "distributions", "cases"))
    assert_no_console_errors(page)
    assert_offline(page, [url])


# -- the view server --------------------------------------------------------------------------


@pytest.fixture
def view_server(report_ledger: QualityLedger) -> Iterator[Any]:
    from llm_connect.report import serve

    add_calibration_and_stability(report_ledger)
    server = serve(report_ledger, port=0)
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", server.url), server.url
        yield server
    finally:
        server.shutdown()


def test_the_view_server_pages_cases_from_its_api(page: Any, view_server: Any, tmp_path: Path) -> None:
    url = view_server.url
    seen: list[str] = []

    def requests() -> list[str]:
        seen.extend(network_requests(page))
        return seen

    page.get(url)
    first = rows_settled(page, lambda rows: True)
    assert by_css(page, "#case-total").text == str(TOTAL)
    check_sections(page, tmp_path, "view")
    check_filters(page)
    so_far = requests()
    assert url in so_far and any(u.startswith(f"{url}api/cases?") for u in so_far), so_far

    select(page, "#f-candidate", GOOD)
    rows = rows_settled(page, lambda rows: {r["candidate"] for r in rows} == {GOOD})
    assert by_css(page, "#case-total").text == str(TOTAL // 2)
    assert rows != first
    by_css(page, "#f-failures").click()
    failing = rows_settled(page, lambda rows: all(r["score"] < 0.9 and r["candidate"] == GOOD for r in rows))
    assert len(failing) < len(rows)
    select(page, "#f-sort", "score-desc")
    desc = rows_settled(page, lambda rows: True)
    assert [r["score"] for r in desc] == sorted((r["score"] for r in desc), reverse=True)
    api = [u for u in requests() if "/api/cases?" in u]
    assert any("candidate=" + GOOD in u and "failures=1" in u for u in api), api

    # More than a page: "Show more" asks the API for the next one.
    by_css(page, "#f-failures").click()
    select(page, "#f-candidate", "")
    shown = len(rows_settled(page, lambda rows: len(rows) == len(first)))
    more = by_css(page, "#case-more")
    if more.is_displayed():
        more.click()
        rows_settled(page, lambda rows: len(rows) > shown)
        assert any("offset=" + str(shown) in u for u in requests())

    page.get(url)
    rows_settled(page, lambda rows: True)
    open_pwned_case(page, tmp_path, "view")
    assert_no_console_errors(page)
    seen.extend(assert_offline(page, [url]))
    outside = [u for u in seen if not u.startswith((url, "data:", "about:blank"))]
    assert not outside, f"requests beyond {url}: {outside}"
