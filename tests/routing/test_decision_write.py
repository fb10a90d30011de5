"""Storing a decision with its evidence: one transaction, all or nothing (both backends).

On PostgreSQL the decision and its evidence snapshots are sent in one round trip
(psycopg pipeline mode, ``llm_connect/ledger/_pipeline.py``); these tests hold
that path to what the ORM path promised: the row and every snapshot land
together, a failure stores neither and names the input, and the pooled
connection is clean afterwards.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import text

from llm_connect.errors import LedgerError
from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger
from llm_connect.routing import Router, RoutingDecision
from llm_connect.routing._evidence import candidate_alpha, snapshot_settings

MakeResult = Callable[..., GradingResult]


def _grade(ledger: QualityLedger, make_result: MakeResult, model: str, n: int, score: float = 0.98) -> None:
    ledger.record_many(
        [
            make_result(score, candidate_model=model, grader_id=g, prompt=f"case {i}")
            for i in range(n)
            for g in ("exact", "embedding")
        ],
        task="support",
    )


def _snapshots(ledger: QualityLedger) -> int:
    with ledger.engine.connect() as conn:
        return int(conn.execute(text("SELECT COUNT(*) FROM evidence_snapshots")).scalar_one())


def _decide(router: Router) -> RoutingDecision:
    return router.decide(
        "support", baseline="gpt-4o", candidates=["mini", "nano"], grader_id=["exact", "embedding"]
    )


def test_a_decision_and_its_evidence_are_stored_together(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    _grade(ledger, make_result, "mini", 40)
    _grade(ledger, make_result, "nano", 10, score=0.5)
    first = _decide(Router(ledger))
    assert first.decision_id is not None
    assert ledger.decisions() == [first]
    assert _snapshots(ledger) == 4  # 2 candidates x 2 graders
    stored = ledger.evidence_snapshots(
        task="support",
        baseline_model="gpt-4o",
        settings=snapshot_settings(
            min_quality=0.9,
            confidence=0.95,
            min_samples=30,
            fixed_n=False,
            alpha=candidate_alpha(0.95, 2),
        ),
    )
    assert {pair: snap[1]["n"] for pair, snap in stored.items()} == {
        ("mini", "exact"): 40,
        ("mini", "embedding"): 40,
        ("nano", "exact"): 10,
        ("nano", "embedding"): 10,
    }
    # A new router (a new process) reuses the stored evidence: same figures, a new decision row.
    second = _decide(Router(ledger))
    assert second.decision_id is not None and second.decision_id > first.decision_id
    assert second.candidates == first.candidates
    # New grades change one group's version: its snapshot is written over, not added.
    _grade(ledger, make_result, "nano", 5, score=0.6)
    third = _decide(Router(ledger))
    nano = {g.grader_id: g for g in third.evidence_for("nano").graders}
    # same prompts: the 5 new grades are replicates of 5 cases
    assert [(nano[g].n, nano[g].n_grades) for g in ("exact", "embedding")] == [(10, 15), (10, 15)]
    assert _snapshots(ledger) == 4
    assert [d.decision_id for d in ledger.decisions()] == [
        first.decision_id,
        second.decision_id,
        third.decision_id,
    ]


@pytest.mark.postgres
def test_a_failed_decision_write_stores_nothing_and_leaves_the_ledger_usable(
    postgres_url: str, make_result: MakeResult
) -> None:
    with QualityLedger(postgres_url) as ledger:
        _grade(ledger, make_result, "mini", 40)
        decision = _decide(Router(ledger))
        before = (len(ledger.decisions()), _snapshots(ledger))
        # The server refuses the decision row after the snapshot upsert was sent: a task longer
        # than its column (VARCHAR(200)). Neither may land.
        bad = RoutingDecision.from_dict({**decision.to_dict(), "task": "t" * 250})
        snapshots = [("other", "exact", (40, 39.0, 38.1), {"n": 40})]
        with pytest.raises(LedgerError, match="recording a routing decision failed on postgresql"):
            ledger.record_decision(bad, evidence_snapshots=snapshots, snapshot_settings="s")
        assert (len(ledger.decisions()), _snapshots(ledger)) == before
        # The pooled connection went back clean: the next decisions are stored.
        for _ in range(3):
            again = _decide(Router(ledger))
            assert ledger.decisions()[-1] == again


def test_a_router_asks_the_store_only_for_groups_it_has_not_computed(
    ledger: QualityLedger, make_result: MakeResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Routing code asking after every batch pays no snapshot read for the groups that just
    changed (it recomputes them); a new router still reuses what earlier decisions stored."""
    reads: list[str] = []
    real = ledger.evidence_snapshots

    def counted(**kwargs: str) -> object:
        reads.append(kwargs["task"])
        return real(**kwargs)

    monkeypatch.setattr(ledger, "evidence_snapshots", counted)
    _grade(ledger, make_result, "mini", 40)
    _grade(ledger, make_result, "nano", 10, score=0.5)
    router = Router(ledger)
    _decide(router)
    assert len(reads) == 1  # new to this router: the store is asked
    _grade(ledger, make_result, "mini", 5, score=0.9)
    changed = _decide(router)
    assert len(reads) == 1  # a changed group it computed before: recomputed, store not asked
    mini = {g.grader_id: g for g in changed.evidence_for("mini").graders}
    assert [mini[g].n_grades for g in ("exact", "embedding")] == [45, 45]
    fresh = _decide(Router(ledger))
    assert len(reads) == 2 and fresh.candidates == changed.candidates  # stored by `changed`
