"""The quality gate's rule: passed only on proof, failed on a rule-out, not settled otherwise."""

from __future__ import annotations

from llm_connect.routing import GATE_FAILED, GATE_NOT_SETTLED, GATE_PASSED, more_cases, quality_gate
from llm_connect.values import GraderEvidence


def ev(status: str, *, n: int = 40, needed: int | None = None, mean: float = 0.95) -> GraderEvidence:
    return GraderEvidence(
        grader_id="exact", n=n, mean=mean, lower_bound=mean - 0.1, passed=status == "proven", why="",
        upper_bound=min(1.0, mean + 0.1), status=status, cases_needed=needed,
    )  # fmt: skip


def test_every_item_proven_passes() -> None:
    gate = quality_gate([("t", "a", ev("proven")), ("t", "b", ev("proven"))], min_quality=0.9)
    assert gate.outcome == GATE_PASSED and gate.passed and gate.checked == 2 and gate.lines() == []


def test_one_rule_out_fails_whatever_else() -> None:
    gate = quality_gate([("t", "a", ev("ruled out", mean=0.5)), ("t", "b", ev("undecided"))], min_quality=0.9)
    assert gate.outcome == GATE_FAILED and len(gate.ruled_out) == 1 and len(gate.unsettled) == 1
    assert "ruled out" in gate.lines()[0]


def test_unsettled_or_empty_is_not_settled() -> None:
    items = [("t", "a", ev("proven")), ("t", "b", ev("insufficient", n=3, needed=60))]
    gate = quality_gate(items, min_quality=0.9)
    assert gate.outcome == GATE_NOT_SETTLED and not gate.passed
    assert gate.lines() == ["b on exact in t: mean 0.950 vs 0.9, bounds [0.850, 1.000], 3 cases; about 57 more "
                            "cases would settle it"]  # fmt: skip
    empty = quality_gate([], min_quality=0.9)
    assert empty.outcome == GATE_NOT_SETTLED and "nothing proves" in empty.lines()[0]


def test_more_cases_is_the_difference_from_the_total() -> None:
    assert more_cases(ev("undecided", n=40, needed=100)) == 60
    assert more_cases(ev("undecided", n=40, needed=None)) is None  # too close to call
    assert more_cases(ev("proven", n=40, needed=100)) is None  # settled


def test_a_gate_on_what_people_would_say_counts_labels_not_cases() -> None:
    none_yet = GraderEvidence(
        grader_id="exact", n=0, mean=None, lower_bound=None, passed=False, why="no human labels yet",
        status="insufficient", target="human", labels_used=0, labels_pending=12,
    )  # fmt: skip
    waiting = GraderEvidence(
        grader_id="exact", n=300, mean=0.72, lower_bound=0.61, passed=False, why="", upper_bound=0.83,
        status="undecided", target="human", labels_used=58, more_labels=40, more_cases=200,
    )  # fmt: skip
    gate = quality_gate([("qa", "small", none_yet), ("qa", "mid", waiting)], min_quality=0.7)
    assert gate.outcome == GATE_NOT_SETTLED and gate.by_people
    assert "more labels would settle it" in gate.headline()
    assert gate.lines() == [
        "small on exact in qa, by what people would say: no human labels yet, 12 chosen cases awaiting labels",
        "mid on exact in qa, by what people would say: estimate 0.720 vs 0.7, bounds [0.610, 0.830], 58 labels; "
        "about 40 more labels (and 200 more cases) would settle it",
    ]
    assert gate.to_dict()["not_settled"][1]["more_labels_needed"] == 40
    assert not quality_gate([("qa", "a", ev("undecided"))], min_quality=0.9).by_people
