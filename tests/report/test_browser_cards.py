"""The report in headless Chromium: re-runs as one card per case, the run's failures, the gate banner.

Screenshots go to /tmp/report-screens (``cards-*``, ``failures-*``) for a person to look at.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llm_connect.ledger import QualityLedger
from tests.report.conftest import (
    JUDGES,
    TASKS,
    assert_no_console_errors,
    assert_offline,
    report_items,
    screenshot,
)
from tests.report.test_browser import by_css, open_file, rows_settled, wait_for

pytestmark = pytest.mark.browser

RUNS = ("nightly-1", "nightly-2")
CASES = 30
GRADES = len(RUNS) * len(TASKS) * 2 * len(JUDGES) * CASES  # 480: more than a page of 200

_CARDS_JS = """
return Array.from(document.querySelectorAll('#cases .case-row')).map(function (card) {
  return {key: [card.dataset.task, card.dataset.candidate, card.dataset.judge, card.dataset.case].join('|'),
          runs: Array.from(card.querySelectorAll('.case-run')).map(function (r) { return r.dataset.run; }),
          heads: card.querySelectorAll('header').length};
});
"""


@pytest.fixture
def rerun_ledger(tmp_path: Path) -> Any:
    ledger = QualityLedger(f"sqlite:///{tmp_path / 'reruns.db'}")
    try:
        for run_id in RUNS:  # the same cases graded again in a second run
            ledger.record_batch(report_items(CASES, run_id=run_id))
        yield ledger
    finally:
        ledger.close()


def _all_cards(page: Any) -> list[dict[str, Any]]:
    more = by_css(page, "#case-more")
    while more.is_displayed():
        before = len(page.execute_script(_CARDS_JS))
        more.click()
        wait_for(
            page, lambda d, n=before: len(d.execute_script(_CARDS_JS)) > n or not more.is_displayed(), "more"
        )
    cards: list[dict[str, Any]] = page.execute_script(_CARDS_JS)
    return cards


def _check_one_card_per_case(page: Any) -> list[dict[str, Any]]:
    cards = _all_cards(page)
    wait_for(page, lambda d: by_css(d, "#case-count").text == str(GRADES), "every grade shown")
    keys = [c["key"] for c in cards]
    assert len(keys) == len(set(keys)) == GRADES // len(RUNS)  # one card per case, no repeated header
    assert all(sorted(c["runs"]) == sorted(RUNS) and c["heads"] == 1 for c in cards)
    assert by_css(page, "#card-count").text == str(len(cards))
    return cards


def test_reruns_are_one_card_per_case_with_the_runs_inside(
    page: Any, rerun_ledger: QualityLedger, tmp_path: Path
) -> None:
    from llm_connect.report import write_report

    write_report(rerun_ledger, tmp_path / "reruns.html")
    url = open_file(page, tmp_path / "reruns.html")
    rows_settled(page, lambda rows: len(rows) > 0)
    _check_one_card_per_case(page)
    card = by_css(page, "#cases .case-row")
    runs = card.find_elements("css selector", ".case-run")
    assert [r.get_attribute("data-run") for r in runs] == list(RUNS)  # in the order they were graded
    for run in runs:
        assert run.text.count("run nightly-") == 1 and "UTC" in run.text
    runs[1].find_element("css selector", "summary").click()
    wait_for(page, lambda d: "Prompt" in runs[1].text, "the second run did not open")
    screenshot(page, tmp_path, "cards-reruns", "#cases")
    assert_no_console_errors(page)
    assert_offline(page, [url])


def test_reruns_paged_by_the_view_server_merge_into_their_cards(
    page: Any, rerun_ledger: QualityLedger, tmp_path: Path
) -> None:
    from llm_connect.report import serve

    server = serve(rerun_ledger, port=0)
    try:
        page.get(server.url)
        rows_settled(page, lambda rows: len(rows) > 0)
        assert by_css(page, "#case-total").text == str(GRADES)
        _check_one_card_per_case(page)
        assert_no_console_errors(page)
        assert_offline(page, [server.url])
    finally:
        server.shutdown()


def test_failures_and_the_gate_banner_are_shown(
    page: Any, rerun_ledger: QualityLedger, tmp_path: Path
) -> None:
    from llm_connect.report import write_report

    cause = "1 validation error:\n  response_format.type: Input should be 'text' or 'json_object' <b>x</b>\n"
    message = ("ServerError: openai:gemma-270m: Error code: 500 - " + cause * 30)[:2000]
    for i in range(2):
        rerun_ledger.record_failure(run_id=RUNS[1], case_id=f"support-9{i}", task="support", stage="judge",
                                    error_type="ServerError", message=message, adapter_id="openai:gemma-270m")  # fmt: skip
    lines = ["gpt-4o-mini on vrty:1.0.1: mean 0.95 against 0.99, about 400 more cases would settle it"]
    write_report(rerun_ledger, tmp_path / "gate.html", run_ids=[RUNS[1]],
                 gate={"outcome": "not settled", "min_quality": 0.99, "lines": lines})  # fmt: skip
    url = open_file(page, tmp_path / "gate.html")
    banner = by_css(page, "#gate")
    assert banner.is_displayed() and banner.get_attribute("data-outcome") == "not settled"
    assert banner.text.startswith("Quality gate: NOT SETTLED") and "passed" not in banner.text.lower()
    screenshot(page, tmp_path, "failures-gate", "header.top")
    section = by_css(page, "section#failures")
    failures = section.find_elements("css selector", "article.failure")
    assert len(failures) == 2
    pre = failures[0].find_element("css selector", "pre.message")
    assert pre.value_of_css_property("white-space") == "pre-wrap"
    assert page.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth", pre)
    assert page.execute_script("return arguments[0].textContent", pre) == message  # whole, as text
    assert not pre.find_elements("css selector", "b")
    for shown in ("support-90", "judge", "openai:gemma-270m", "ServerError"):
        assert shown in failures[0].text
    screenshot(page, tmp_path, "failures-section", "section#failures")
    assert_no_console_errors(page)
    assert_offline(page, [url])
