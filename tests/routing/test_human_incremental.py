"""A Router kept between ``decide(target="human")`` calls gives the evidence of a full read and a
fresh computation, whatever arrived in between (contracts/routing.md, H19), on SQLite and
PostgreSQL.

After every step (new cases, the sampler's decisions, labels arriving late, a second
annotator, a replicate of an old case, a label replaced, a label of a case the sampler did not
choose, a sampled case graded against the baseline only later) the evidence of one Router kept
throughout equals, field for field, ``_human_group.full_read`` (every sampled case read with
SQL of its own, the labels through ``LabelStore.case_values``, the bound computed afresh).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from llm_connect.grading import GradingResult
from llm_connect.labels import choose_for_labels
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.ledger._design import DesignReader
from llm_connect.routing import Router
from tests.routing._human_group import BASE, CAND, GRADER, OTHER, full_read, label_at_random


def test_a_kept_router_equals_a_full_read_after_every_change(
    ledger: QualityLedger, make_result: Callable[..., GradingResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """H19: appended cases and labels continue the kept arrays and running sums; a replicate,
    a replaced label, a late label before the running sums' end, or a case graded against the
    baseline only after it was sampled read or compute again; every figure equals the full
    computation's."""
    task, rng = "qa", np.random.default_rng(3)
    full_reads: list[str] = []
    design = DesignReader.design

    def counted(self: DesignReader, *args: str) -> object:
        full_reads.append(args[0])
        return design(self, *args)

    monkeypatch.setattr(DesignReader, "design", counted)
    router = Router(ledger)
    pending: list[str] = []
    judge: dict[int, float] = {}

    def grade(
        cases: range, baseline: str = BASE, quality: Callable[[int], float] | None = None, run: str = "r1"
    ) -> None:
        items = []
        for i in cases:
            judge.setdefault(i, float(rng.choice([0.0, 0.5, 1.0])))
            q = judge[i] if quality is None else quality(i)
            items.append(
                RecordItem(
                    make_result(q, candidate_model=CAND, baseline_model=baseline, grader_id=GRADER),
                    task,
                    run,
                    f"c{i:04d}",
                )
            )
        ledger.record_batch(items)

    def label(case_ids: list[str], annotator: str = "ana", replace: bool = False) -> None:
        label_at_random(ledger, task, case_ids, rng, annotator, replace)

    router_reads: list[int] = []  # full reads by the Router (the sampler's are its own)

    def check(step: str) -> None:
        before = len(full_reads)
        d = router.decide(
            task, baseline=BASE, candidates=[CAND], grader_id=GRADER, min_quality=0.6, target="human"
        )
        router_reads.append(len(full_reads) - before)
        got = d.candidates[0].graders[0]
        assert got == full_read(ledger, task, got.alpha), step

    check("nothing graded")
    n = 0
    for batch in range(12):
        size = int(rng.integers(10, 60))
        grade(range(n, n + size))
        n += size
        queue = choose_for_labels(ledger, task=task, candidate=CAND, grader_id=GRADER, rate=0.3, seed=batch)
        pending = queue  # every chosen case still without a label
        check(f"batch {batch}: graded and sampled, labels pending")
        # Labels arrive late and out of order: some of the oldest pending first, others later.
        ready = [c for c in pending if rng.random() < 0.6]
        if ready:
            label(ready)
            pending = [c for c in pending if c not in ready]
        check(f"batch {batch}: labels arrived")
        if batch == 3:
            label(ready[:3], annotator="bo")  # a second annotator changes the majority
            check("second annotator")
        if batch == 5:
            grade(range(2, 4), quality=lambda i: 1.0 - judge[i], run="r2")  # replicates of old cases
            check("replicates of old cases")
        if batch == 7:
            label(ready[:2], replace=True)  # replaced labels (possibly different)
            check("replaced labels")
        if batch == 8:
            # A case graded against another baseline first is sampled, then graded against ours.
            grade(range(n, n + 5), baseline=OTHER, run="r3")
            grade(range(n + 5, n + 15))
            n += 15
            choose_for_labels(ledger, task=task, candidate=CAND, grader_id=GRADER, rate=0.3, seed=99)
            check("sampled on another baseline, later cases on ours")
            grade(range(n - 15, n - 10))
            check("graded against the baseline after it was sampled")
        if batch == 9:
            # A label of a case never sampled for this grader: left out.
            grade(range(n, n + 1))
            n += 1
            label([f"c{n - 1:04d}"])
            check("label of an unsampled case")
    label(pending)
    check("every pending label")
    # Read in full: the first decision, after the replicates, and after the case graded late.
    assert sum(router_reads) == 3
    fresh = Router(ledger).decide(
        task, baseline=BASE, candidates=[CAND], grader_id=GRADER, min_quality=0.6, target="human"
    )
    assert fresh.candidates[0].graders[0] == full_read(ledger, task, fresh.candidates[0].graders[0].alpha)
