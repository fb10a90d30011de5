"""Storing a decision: a failure stores nothing, names the input, and leaves the pool clean."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from llm_connect.errors import LedgerError
from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger
from llm_connect.routing import Router, RoutingDecision

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


def _decide(router: Router) -> RoutingDecision:
    return router.decide(
        "support", baseline="gpt-4o", candidates=["mini", "nano"], grader_id=["exact", "embedding"]
    )


@pytest.mark.postgres
def test_a_failed_decision_write_stores_nothing_and_leaves_the_ledger_usable(
    postgres_url: str, make_result: MakeResult
) -> None:
    with QualityLedger(postgres_url) as ledger:
        _grade(ledger, make_result, "mini", 40)
        decision = _decide(Router(ledger))
        before = len(ledger.decisions())
        # The server refuses the decision row: a task longer than its column (VARCHAR(200)).
        bad = RoutingDecision.from_dict({**decision.to_dict(), "task": "t" * 250})
        with pytest.raises(LedgerError, match="recording a routing decision failed on postgresql"):
            ledger.record_decision(bad)
        assert len(ledger.decisions()) == before
        # The pooled connection went back clean: the next decisions are stored.
        for _ in range(3):
            again = _decide(Router(ledger))
            assert ledger.decisions()[-1] == again
