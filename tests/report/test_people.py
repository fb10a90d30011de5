"""The report shows each judge's agreement with people beside its calibration, and the labels status
(issue 22, item 5): in the HTML on both backends, and in headless Chromium with a screenshot."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest

from llm_connect.calibration import calibrate
from llm_connect.labels import HumanLabel, label_status
from llm_connect.ledger import QualityLedger
from llm_connect.report import render_report, write_report
from tests.calibration import _people as p
from tests.report.conftest import assert_no_console_errors, assert_offline, screenshot


def _world(ledger: QualityLedger, server: Any) -> Any:
    """24 cases graded by a pairwise judge (8 of them order-biased) and the truth reference; two
    annotators label every case, the second disagreeing with the first on three of them."""
    kinds = ["first"] * 6 + ["second"] * 2 + ["quality"] * 12 + ["tie"] * 4
    better = ["candidate"] * 6 + ["baseline"] * 2 + ["candidate"] * 8 + ["baseline"] * 4 + ["tie"] * 4
    cases = p.make_cases(kinds, better, start=900)
    server.responder = p.responder
    judge = p.pairwise_judge(server.base_url)
    p.grade(ledger, judge, cases)
    p.grade_truth(ledger, cases)
    labels = [HumanLabel(p.TASK, c.case_id, p.CANDIDATE, "ana", preference=c.better) for c in cases]
    labels += [
        HumanLabel(p.TASK, c.case_id, p.CANDIDATE, "bo", preference="tie" if i in (8, 9, 10) else c.better)
        for i, c in enumerate(cases)
    ]
    ledger.record_labels(labels)
    return calibrate(ledger, judge=judge.grader_id, against=[p.TRUTH_ID, "human"])


def _section(page: str, name: str) -> str:
    match = re.search(rf'<section id="{name}".*?</section>', page, re.DOTALL)
    assert match, f"no section #{name}"
    return match.group(0)


def test_the_calibration_shows_agreement_with_people_and_the_labels_status(
    ledger: QualityLedger, openai_server: Any
) -> None:
    report = _world(ledger, openai_server)
    assert report.human is not None
    a = report.human.agreement
    page = render_report(ledger)
    cal = _section(page, "calibration")
    people = re.search(r'<div class="people" data-status="(\w[\w ]*)">(.*?)</div>', cal, re.DOTALL)
    assert people and people.group(1) == report.human.status
    shown = {
        key: html.unescape(text)
        for key, text in re.findall(
            r'<tr data-figure="(\w+)"><td>[^<]*</td><td class="num"[^>]*>([^<]*)</td>', cal
        )
    }
    for key in ("agreement", "agreement_non_tie", "cohen_kappa", "position_consistency", "first_shown_rate"):
        est = getattr(a, key)
        assert shown[key] == f"{est.value:.3f} [{est.ci_low:.3f}, {est.ci_high:.3f}]"
    length = a.length_preference
    assert shown["difference"].startswith(f"{length.difference.value:.3f} [")
    # beside the calibration against the other judge, in the same article
    assert 'class="cal-side"' in cal and f"<td>{p.TRUTH_ID}</td>" in cal
    assert cal.index(f"<td>{p.TRUTH_ID}</td>") < cal.index('class="people"')

    labels = _section(page, "labels")
    (status,) = label_status(ledger, task=p.TASK)
    row = re.search(r'<tr data-task="qa" data-candidate="okapi-small">(.*?)</tr>', labels, re.DOTALL)
    assert row is not None
    cells = [
        re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.DOTALL)
    ]
    assert status.kappa is not None and status.observed_agreement is not None
    assert cells == [
        p.TASK, p.CANDIDATE, str(status.cases_graded), "24", "2", "48", "24",
        f"{status.kappa:.3f} (cohen)", f"{status.observed_agreement:.3f}",
    ]  # fmt: skip
    assert '<a href="#labels">Labels</a>' in page


def test_without_labels_there_is_no_people_table_and_no_labels_section(
    ledger: QualityLedger, openai_server: Any
) -> None:
    cases = p.make_cases(["quality"] * 12, ["candidate"] * 12, start=950)
    openai_server.responder = p.responder
    p.grade(ledger, p.pairwise_judge(openai_server.base_url), cases)
    p.grade_truth(ledger, cases)
    calibrate(ledger, judge=p.TRUTH_ID, against=["human"])  # stored, insufficient data, no labels
    page = render_report(ledger)
    assert 'id="labels"' not in page and 'href="#labels"' not in page
    people = re.search(r'<div class="people" data-status="([^"]+)">', page)
    assert people and people.group(1) == "insufficient data"


@pytest.mark.browser
def test_the_people_sections_in_a_browser(
    sqlite_url: str, openai_server: Any, page: Any, tmp_path: Path
) -> None:
    with QualityLedger(sqlite_url) as ledger:
        _world(ledger, openai_server)
        info = write_report(ledger, tmp_path / "report.html")
    url = info.path.resolve().as_uri()
    page.get(url)
    from selenium.webdriver.common.by import By

    people = page.find_element(By.CSS_SELECTOR, "section#calibration .people")
    refs = page.find_element(By.CSS_SELECTOR, "section#calibration .cal-side > table")
    assert people.is_displayed() and "Against people" in people.text and "position consistency" in people.text
    # beside: the people table starts right of the references table, on the same line
    assert people.location["x"] > refs.location["x"] + refs.size["width"] - 1
    assert abs(people.location["y"] - refs.location["y"]) < 60
    labels = page.find_element(By.CSS_SELECTOR, "section#labels")
    assert labels.is_displayed() and "okapi-small" in labels.text and "(cohen)" in labels.text
    screenshot(page, tmp_path, "people-calibration", "section#calibration")
    screenshot(page, tmp_path, "people-labels", "section#labels")
    assert_no_console_errors(page)
    assert_offline(page, [url])
