"""Judges biased on purpose (scripted behind the loopback server) are flagged by the matching probe."""

from __future__ import annotations

from typing import Any

import pytest

from llm_connect.calibration import calibrate, fill_missing_grades
from llm_connect.ledger import QualityLedger
from tests.calibration import _world as w

PROBES = ["position", "length", "self_preference"]


def _world(ledger: QualityLedger, server: Any, mode: str, n: int = 60) -> Any:
    pairs = w.make_pairs(n)
    w.record_oracle(ledger, pairs)
    server.responder = w.judge_responder(mode)
    judge = w.llm_judge(server.base_url)
    fill_missing_grades(ledger, [judge])
    return judge


@pytest.mark.parametrize(
    ("mode", "flagged"), [("length", "length"), ("first", "position"), ("self", "self_preference")]
)
def test_a_biased_judge_is_flagged_by_the_matching_probe_only(
    ledger: QualityLedger, openai_server: Any, mode: str, flagged: str
) -> None:
    judge = _world(ledger, openai_server, mode)
    report = calibrate(ledger, judge=judge.grader_id, against=["oracle"], judge_adapter=judge, probes=PROBES)
    probes = {"position": report.position, "length": report.length, "self_preference": report.self_preference}
    assert {name for name, probe in probes.items() if probe is not None and probe.flagged} == {flagged}
    assert not report.passed and report.verdict.startswith("fail: ")
    words = {
        "length": "length bias",
        "position": "position consistency",
        "self_preference": "self-preference",
    }
    assert words[flagged] in report.verdict
    stored = ledger.latest_calibration(judge.grader_id)
    assert stored is not None and not stored.passed and stored.verdict == report.verdict


def test_pairs_are_matched_by_digests_when_texts_are_not_stored(ledger_url: str, openai_server: Any) -> None:
    openai_server.responder = w.judge_responder("length")
    judge = w.llm_judge(openai_server.base_url)
    pairs = w.make_pairs(40)
    with QualityLedger(ledger_url, store_text=False) as private:
        w.record_oracle(private, pairs)
        for p in reversed(pairs):  # a different order than the reference's grades
            private.record(w.as_result(judge, p), task=w.TASK)
        report = calibrate(private, judge=judge.grader_id, against=["oracle"])
        assert next(iter(private.results(limit=1))).candidate_text is None
    assert report.reference("oracle:v1").agreement.n == 40
    # lengths fall back to the recorded completion tokens, and still show the length bias
    assert report.length is not None and report.length.unit == "completion_tokens"
    assert report.length.flagged


def test_an_unbiased_judge_is_flagged_by_no_probe(ledger: QualityLedger, openai_server: Any) -> None:
    judge = _world(ledger, openai_server, "fair")
    report = calibrate(ledger, judge=judge.grader_id, against=["oracle"], judge_adapter=judge, probes=PROBES)
    for probe in (report.position, report.length, report.self_preference):
        assert probe is not None and probe.status == "ok" and not probe.flagged
    assert report.verdict == "pass"
