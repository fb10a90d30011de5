"""``view``'s Label page in headless Chromium: five cases labelled by keyboard, un-blinded by the server.

The test reads which answer the page showed first, labels by the keys 1 / 2 / 3, and checks
that the ledger holds the side that answer belongs to (from the texts the report ledger was
filled with). Writes without the token or from another Origin are refused; the page asks for
nothing beyond 127.0.0.1 and logs no console error; screenshots go to /tmp/report-screens.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_connect.ledger import QualityLedger, SampledCase, SamplingStore
from llm_connect.report import ReportServer, serve
from tests.report.conftest import assert_no_console_errors, assert_offline, report_items, screenshot
from tests.report.test_browser import by_css, wait_for
from tests.report.test_label import own, request

pytestmark = pytest.mark.browser

ANNOTATOR = "Ana Tester"
KEYS = ("1", "3", "2", "1", "3")
PREFERENCE = {"1": "first", "2": "tie", "3": "second"}


@pytest.fixture
def label_server(report_ledger: QualityLedger) -> Iterator[ReportServer]:
    server = serve(report_ledger, port=0, label=True)
    try:
        yield server
    finally:
        server.shutdown()


def texts() -> dict[tuple[str, str, str], tuple[str, str]]:
    """(task, case id, candidate) -> (baseline text, candidate text) of the report ledger."""
    out = {}
    for item in report_items():
        result = item.result
        key = (item.task, item.case_id or "", result.candidate_response.requested_model or "")
        out[key] = (result.baseline_response.text, result.candidate_response.text)
    return out


_SHOWN_JS = """
var art = document.getElementById('label-case');
if (art.hidden || !art.dataset.ref) { return null; }
return {ref: art.dataset.ref, task: art.dataset.task, case_id: art.dataset.case,
        first: document.querySelector('#answer-1 .answer').textContent,
        second: document.querySelector('#answer-2 .answer').textContent,
        done: document.getElementById('label-done-count').textContent,
        enabled: !document.getElementById('choose-1').disabled};
"""


def shown(driver: Any, done: int, after: str | None = None) -> dict[str, Any]:
    """The case on the page once ``done`` labels are counted and a case other than ``after`` is ready."""
    state: dict[str, Any] = {}

    def ready(d: Any) -> bool:
        case = d.execute_script(_SHOWN_JS)
        state["case"] = case
        return bool(case and case["enabled"] and case["done"] == str(done) and case["ref"] != after)

    wait_for(driver, ready, f"label {done} was not saved or no next case came")
    return state["case"]  # type: ignore[no-any-return]


def sign_in(page: Any, server: ReportServer) -> None:
    """Open the Label page and give the annotator's name."""
    assert server.label_url is not None
    page.get(server.label_url)
    who = by_css(page, "#annotator-name")
    wait_for(page, lambda d: who.is_displayed(), "the page did not ask for the annotator's name")
    who.send_keys(ANNOTATOR)
    by_css(page, "#who-start").click()


def press(driver: Any, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(key).perform()


def test_five_cases_labelled_by_keyboard_are_stored_unblinded(
    page: Any, label_server: ReportServer, report_ledger: QualityLedger, tmp_path: Path
) -> None:
    server = label_server
    assert server.label_url is not None and server.labels is not None
    page.get(server.label_url)
    who = by_css(page, "#annotator-name")
    wait_for(page, lambda d: who.is_displayed(), "the page did not ask for the annotator's name")
    screenshot(page, tmp_path, "label-name", "body")
    who.send_keys(ANNOTATOR)
    by_css(page, "#who-start").click()

    pairs = texts()
    seen: list[dict[str, Any]] = []
    case = shown(page, 0)
    assert by_css(page, "#annotator").text == ANNOTATOR
    assert not by_css(page, "#who").is_displayed() and by_css(page, "#label-case").is_displayed()
    left = int(by_css(page, "#label-left").text)
    for i, key in enumerate(KEYS):
        if i == 1:  # a note: typing 1/2/3 in it labels nothing; Esc leaves the field
            note = by_css(page, "#note")
            note.click()
            note.send_keys("answer 1 is 2-3 words shorter")
            assert by_css(page, "#label-done-count").text == "1"
            screenshot(page, tmp_path, "label-case", "body")
            from selenium.webdriver.common.keys import Keys

            note.send_keys(Keys.ESCAPE)
        seen.append({**case, "key": key, "note": "answer 1 is 2-3 words shorter" if i == 1 else None})
        press(page, key)
        case = shown(page, i + 1, after=case["ref"])
    assert int(by_css(page, "#label-left").text) == left - len(KEYS)
    assert "Saved" in by_css(page, "#label-status").text
    screenshot(page, tmp_path, "label-after-five", "body")

    labels = {(lb.task, lb.case_id): lb for lb in report_ledger.labels() if lb.annotator == ANNOTATOR}
    assert len(labels) == len(KEYS) == len(report_ledger.labels())
    orders = set()
    for case in seen:
        label = labels[(case["task"], case["case_id"])]
        baseline_text, candidate_text = pairs[(label.task, label.case_id, label.candidate)]
        assert {case["first"], case["second"]} == {baseline_text, candidate_text}
        first_is_candidate = case["first"] == candidate_text
        orders.add(first_is_candidate)
        choice = PREFERENCE[case["key"]]
        expected = (
            "tie"
            if choice == "tie"
            else ("candidate" if (choice == "first") == first_is_candidate else "baseline")
        )
        assert label.preference == expected, (case, label)
        assert label.note == case["note"] and label.run_id is not None
    assert orders == {True, False}, "the five cases were all shown in one order: the blinding was not tested"
    # The case never names a model (only the candidate filter lists them).
    shown_case = by_css(page, "#label-case").text
    assert shown_case and not any(m in shown_case for m in ("gpt-4o", "llama", "mini"))

    # Writes without the token, or from another Origin, are refused.
    write = {"ref": case["ref"], "choice": "tie", "annotator": ANNOTATOR}
    assert request(server, "POST", "/api/label", write, own(server))[0] == 403
    foreign = own(server, server.labels.token, Origin="http://evil.example")
    assert request(server, "POST", "/api/label", write, foreign)[0] == 403
    assert len(report_ledger.labels()) == len(KEYS)

    # The report's Label link opens the page again in this tab, with the token it remembered.
    page.get(server.url)
    link = by_css(page, "#label-link")
    link.click()
    wait_for(page, lambda d: d.current_url.endswith("/label"), "the Label link did not open the page")
    shown(page, 0)
    assert_no_console_errors(page)
    assert_offline(page, [server.url])


def test_without_labelling_the_page_has_no_label_link(
    page: Any, report_ledger: QualityLedger, tmp_path: Path
) -> None:
    server = serve(report_ledger, port=0)
    try:
        page.get(server.url)
        wait_for(page, lambda d: d.execute_script("return document.readyState") == "complete", "page load")
        assert not page.find_elements("css selector", "#label-link, a[href='label']")
        assert request(server, "GET", "/label")[0] == 404
        assert request(server, "POST", "/api/label", {"choice": "tie"}, own(server, "x"))[0] == 405
        assert_no_console_errors(page)
        assert_offline(page, [server.url])
    finally:
        server.shutdown()


def test_the_samplers_chosen_cases_come_first_and_are_marked(
    page: Any, label_server: ReportServer, report_ledger: QualityLedger, tmp_path: Path
) -> None:
    # Two cases the label sampler chose (routing on what people would say waits for them): the
    # page serves them first, in the sampler's order, marked, with their count beside the rest.
    SamplingStore(report_ledger.engine).record(
        "billing", "llama-3.1-8b", "vrty:1.0.1",
        [SampledCase("billing-017", 0.5, True), SampledCase("billing-003", 0.5, False),
         SampledCase("billing-042", 0.5, True)],
        strategy="uniform", rate=0.5, floor=0.5, seed=1,
    )  # fmt: skip
    server = label_server
    sign_in(page, server)
    for done, case_id in enumerate(("billing-017", "billing-042")):
        case = shown(page, done)
        assert (case["task"], case["case_id"]) == ("billing", case_id)
        wait_for(page, lambda d: by_css(d, "#case-chosen").is_displayed(), "the chosen case was not marked")
        assert by_css(page, "#label-chosen-left").text == str(2 - done)
        if done == 0:
            screenshot(page, tmp_path, "label-chosen", "body")
        press(page, "2")
    case = shown(page, 2)
    assert case["case_id"] not in ("billing-017", "billing-042")
    assert not by_css(page, "#case-chosen").is_displayed()
    assert not by_css(page, "#label-chosen-wrap").is_displayed()  # none left to wait for
    stored = {(lb.task, lb.case_id, lb.candidate, lb.preference) for lb in report_ledger.labels()}
    assert stored == {
        ("billing", "billing-017", "llama-3.1-8b", "tie"),
        ("billing", "billing-042", "llama-3.1-8b", "tie"),
    }
    assert_no_console_errors(page)


def test_u_brings_back_the_last_case_and_the_next_key_changes_its_label(
    page: Any, label_server: ReportServer, report_ledger: QualityLedger, tmp_path: Path
) -> None:
    # A wrong key is one keypress away: "u" shows the case just labelled again, its choice
    # marked, and the next key replaces that label (the annotator's own), counted once.
    server = label_server
    sign_in(page, server)
    first = shown(page, 0)
    assert not by_css(page, "#back").is_displayed()  # nothing labelled yet
    press(page, "1")
    second = shown(page, 1, after=first["ref"])
    wait_for(page, lambda d: by_css(d, "#back").is_displayed(), "no way back to the last label")
    press(page, "u")
    wait_for(
        page, lambda d: d.execute_script(_SHOWN_JS)["ref"] == first["ref"], "the last case did not come back"
    )
    assert "chosen" in by_css(page, "#choose-1").get_attribute("class")  # what was chosen before
    assert "Changing your label" in by_css(page, "#label-status").text
    screenshot(page, tmp_path, "label-change", "body")
    press(page, "2")
    again = shown(page, 1, after=first["ref"])
    assert again["ref"] == second["ref"]  # the case that was showing comes back next
    assert "Changed" in by_css(page, "#label-status").text
    (label,) = [lb for lb in report_ledger.labels() if lb.annotator == ANNOTATOR]
    assert (label.task, label.case_id, label.preference) == (first["task"], first["case_id"], "tie")
    press(page, "3")
    shown(page, 2, after=second["ref"])
    assert len([lb for lb in report_ledger.labels() if lb.annotator == ANNOTATOR]) == 2
    assert_no_console_errors(page)


def test_a_label_refused_by_a_full_disk_says_so_and_the_case_stays_to_label_again(
    page: Any, tmpfs: Path, tmp_path: Path
) -> None:
    """Issue 39 on the Label page: the ledger's disk fills up under a person labelling. The page
    says "Not saved" with the cause, nothing is stored, the same case stays with its keys live,
    and once there is room the same key stores the label."""
    from selenium.webdriver.common.by import By

    from tests.fixtures.faults import fill, make_room
    from tests.report.test_label import fill_queue_ledger

    ledger = QualityLedger(f"sqlite:///{tmpfs / 'ledger.db'}", patience_s=5)
    server: ReportServer | None = None
    try:
        fill_queue_ledger(ledger)
        server = serve(ledger, port=0, label=True)
        sign_in(page, server)
        case = shown(page, 0)
        fill(tmpfs)
        press(page, "1")
        wait_for(
            page, lambda d: "Not saved" in by_css(d, "#label-status").text, "no 'Not saved' on a full disk"
        )
        said = by_css(page, "#label-status").text
        assert "the ledger's disk is full" in said, said
        assert "; choose again once the ledger's disk has room again" in said
        screenshot(page, tmp_path, "label-disk-full", "body")
        assert shown(page, 0)["ref"] == case["ref"]  # the same case, its keys live again
        assert not page.find_elements(By.CSS_SELECTOR, ".choices button.chosen")  # nothing marked as sent
        assert ledger.labels() == []
        make_room(tmpfs)
        press(page, "1")
        shown(page, 1, after=case["ref"])
        assert "Saved" in by_css(page, "#label-status").text
        assert [(lb.case_id, lb.annotator) for lb in ledger.labels()] == [(case["case_id"], ANNOTATOR)]
    finally:
        if server is not None:
            server.shutdown()
        ledger.close()
