"""case_stats, the per-case running totals, kept by every write: equal to a recomputation (both backends)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger, RecordItem

MakeResult = Callable[..., GradingResult]


def _cases(ledger: QualityLedger) -> list[tuple[Any, ...]]:
    with ledger.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.exec_driver_sql(
                "SELECT task, baseline_model, grader_id, candidate_model, case_key, n, sum_quality, delta_n, "
                "delta_sum, first_id FROM case_stats ORDER BY 1, 2, 3, 4, 5"
            ).all()
        ]


def _scored(make_result: MakeResult, score: float, cand: float, base: float, **kw: Any) -> GradingResult:
    details = {"judge_spec": {"name": "vrty", "args": {}}, "candidate_score": cand, "baseline_score": base}
    return make_result(score, grader_id="vrty", details=details, **kw)


def test_case_totals_after_mixed_writes_equal_a_rebuild(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    big = 60
    # A run of cases x candidates x graders, one with score deltas.
    ledger.record_batch(
        [
            RecordItem(
                make_result(c / big, candidate_model=m, grader_id=g, prompt=f"p{c}")
                if g == "exact"
                else _scored(make_result, c / big, c / big, 0.5, candidate_model=m, prompt=f"p{c}"),
                "t",
                run_id="r1",
                case_id=str(c),
            )
            for c in range(big)
            for m in ("m1", "m2")
            for g in ("exact", "vrty")
        ]
    )
    # A second run over some of the same cases, and new ones, in one big batch that also repeats
    # run r1's keys (stored already: skipped) and repeats one new key within the batch.
    again = [
        RecordItem(make_result(0.25, prompt=f"p{c}", candidate_model="m1"), "t", "r2", str(c))
        for c in range(big)
    ]
    repeated = [
        RecordItem(make_result(c / big, candidate_model="m1", prompt=f"p{c}"), "t", "r1", str(c))
        for c in range(5)
    ]
    ledger.record_batch([*again, *repeated, again[3]])
    # Small batches (PostgreSQL: executemany): keyless grades (the case is the prompt), the same
    # prompt twice in one batch, a case that only has keyless grades, a delta out of range (None).
    keyless = [
        make_result(0.5, prompt="p1", candidate_model="m1"),
        make_result(0.75, prompt="p1", candidate_model="m1"),
    ]
    ledger.record_many([*keyless, make_result(0.125, prompt="free text")], task="t")
    ledger.record_many(
        [_scored(make_result, 0.5, 1.0, 0.5, prompt="p2", candidate_model="m2")],
        task="t",
        run_id="r3",
        case_id="2",
    )
    ledger.record(_scored(make_result, 0.5, 1.0, -1.0, prompt="p7"), task="t", run_id="r3", case_id="7")
    ledger.record(make_result(0.75, prompt="p2", baseline_model="b2"), task="u", run_id="r3", case_id="2")
    ledger.record_batch(  # a small batch with a stored key (skipped) and a new one
        [
            RecordItem(make_result(0.75, prompt="p2", baseline_model="b2"), "u", "r3", "2"),
            RecordItem(make_result(0.5, prompt="p3", baseline_model="b2"), "u", "r3", "3"),
        ]
    )
    # A big keyless batch: many grades of few cases.
    ledger.record_many(
        [make_result(i / 100, prompt=f"q{i % 3}", grader_id="g3") for i in range(big)], task="t"
    )

    incremental = _cases(ledger)
    ledger.rebuild_stats()
    rebuilt = _cases(ledger)
    assert len(incremental) == len(rebuilt) > big
    assert [(r[:6], r[7], r[9]) for r in incremental] == [(r[:6], r[7], r[9]) for r in rebuilt]
    assert [pytest.approx((r[6], r[8])) for r in incremental] == [(r[6], r[8]) for r in rebuilt]
    by_key = {r[:5]: r for r in incremental}
    assert by_key[("t", "gpt-4o", "exact", "m1", "id:3")][5] == 2  # runs r1 and r2, not the repeats
    assert by_key[("t", "gpt-4o", "vrty", "gpt-4o-mini", "id:7")][5:9] == (1, 0.5, 0, 0.0)  # delta 2.0: None
    n, total, delta_n, delta_sum = by_key[("t", "gpt-4o", "vrty", "m2", "id:2")][5:9]
    assert (n, delta_n) == (2, 2) and (total, delta_sum) == pytest.approx((2 / big + 0.5, 2 / big))
    assert by_key[("t", "gpt-4o", "exact", "m1", "sha256:" + _sha("p1"))][5:7] == (
        2,
        1.25,
    )  # twice in a batch
    assert by_key[("t", "gpt-4o", "g3", "gpt-4o-mini", "sha256:" + _sha("q0"))][5] == len(range(0, big, 3))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
