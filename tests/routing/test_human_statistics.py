"""PostgreSQL: the human target's full read refreshes stale table statistics first.

Without statistics (a ledger just filled, or autovacuum off as on the tests' server) the join of
a group's sampled cases to their grades was planned as a nested loop over every pair: 103.7 s
for a first decision on 20,000 cases. A full read ANALYZEs ``case_stats`` and ``label_sampling``
when PostgreSQL's row estimate lags the live count by half.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from sqlalchemy import text

from llm_connect.grading import GradingResult
from llm_connect.labels import choose_for_labels
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.ledger._design import DesignReader
from tests.routing._human_group import BASE, CAND, GRADER

_ESTIMATES = text(
    "SELECT c.relname, c.reltuples, t.n_live_tup FROM pg_class c JOIN pg_stat_user_tables t "
    "ON t.relid = c.oid WHERE c.relname IN ('case_stats', 'label_sampling') "
    "AND c.relnamespace = to_regnamespace(current_schema())"
)


def _estimates(ledger: QualityLedger) -> dict[str, tuple[float, int]]:
    with ledger.engine.connect() as conn:
        return {str(r[0]): (float(r[1]), int(r[2])) for r in conn.execute(_ESTIMATES)}


@pytest.mark.postgres
def test_a_full_read_analyzes_tables_whose_statistics_lag_their_rows(
    postgres_url: str, make_result: Callable[..., GradingResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    with QualityLedger(postgres_url) as ledger:
        items = [
            RecordItem(make_result(float(i % 2), candidate_model=CAND, baseline_model=BASE, grader_id=GRADER),
                       "qa", "r1", f"c{i:05d}")
            for i in range(1_500)
        ]  # fmt: skip
        ledger.record_batch(items)
        choose_for_labels(ledger, task="qa", candidate=CAND, grader_id=GRADER, rate=0.2, seed=3)
        deadline = time.monotonic() + 30  # the server publishes live counts within about a second
        while min(n for _, n in _estimates(ledger).values()) < 1_500 and time.monotonic() < deadline:
            time.sleep(0.2)
        before = _estimates(ledger)
        assert all(n >= 1_500 and est * 2 < n for est, n in before.values()), before  # stale: never analyzed

        rows, _ = DesignReader(ledger.engine).design("qa", BASE, CAND, GRADER)

        after = _estimates(ledger)
        assert len(rows) == 1_500
        assert all(est >= n / 2 for est, n in after.values()), after
