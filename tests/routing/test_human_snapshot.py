"""A new Router starts ``decide(target="human")`` from the group an earlier decision stored
(issue 23: a decision from a new process stays cheap), and its evidence is that of a full read
and a fresh computation whatever changed since, on SQLite and PostgreSQL.

Every check uses a new Router: it restores the stored arrays and running sums, reads only what
arrived past them, and reads in full only when something before them changed (a re-graded
case, a case sampled earlier graded against the baseline later, a new rule version); a label
replaced or added before the sums' end makes it compute the sums again (never reuse them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from llm_connect.grading import GradingResult
from llm_connect.labels import HumanLabel, choose_for_labels
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.ledger._design import DesignReader
from llm_connect.routing import Router, _human_cache, _ppi, _ppi_running
from tests.routing._human_group import BASE, CAND, GRADER, OTHER, full_read, label_at_random

DECIDE: dict[str, Any] = {
    "baseline": BASE,
    "candidates": [CAND],
    "grader_id": GRADER,
    "target": "human",
    "min_quality": 0.6,
}
"""The decision both restore tests ask a new Router for."""


@pytest.mark.parametrize("store_every", [1, 100_000])
def test_a_new_router_continues_from_the_stored_group_and_equals_a_full_read(
    ledger: QualityLedger,
    make_result: Callable[..., GradingResult],
    monkeypatch: pytest.MonkeyPatch,
    store_every: int,
) -> None:
    """``store_every`` 1: stored at every decision; 100,000: only when none is stored, its sums
    started again or it was invalidated, so a new Router continues over all that came since."""
    monkeypatch.setattr(_human_cache, "_STORE_EVERY", store_every)
    task, rng = "qa", np.random.default_rng(5)
    full_reads: list[str] = []
    starts: list[int] = []
    design, continued = DesignReader.design, _ppi.human_bound_continued

    def counted(self: DesignReader, *args: str) -> object:
        full_reads.append(args[0])
        return design(self, *args)

    def watched(*args: Any, **kwargs: Any) -> Any:
        start = kwargs.get("start")
        starts.append(0 if start is None else start.t)
        return continued(*args, **kwargs)

    monkeypatch.setattr(DesignReader, "design", counted)
    monkeypatch.setattr(_ppi, "human_bound_continued", watched)
    judge: dict[int, float] = {}

    def grade(cases: range, baseline: str = BASE, run: str = "r1", flip: bool = False) -> None:
        items = []
        for i in cases:
            judge.setdefault(i, float(rng.choice([0.0, 0.5, 1.0])))
            q = 1.0 - judge[i] if flip else judge[i]
            make = make_result(q, candidate_model=CAND, baseline_model=baseline, grader_id=GRADER)
            items.append(RecordItem(make, task, run, f"c{i:04d}"))
        ledger.record_batch(items)

    def label(case_ids: list[str], annotator: str = "ana", replace: bool = False) -> None:
        label_at_random(ledger, task, case_ids, rng, annotator, replace)

    def check(step: str, reads: int) -> int:
        """A new Router's evidence equals the full computation; ``reads`` full reads it made;
        returns the number of cases its running sums started from."""
        full_reads.clear()
        starts.clear()
        d = Router(ledger).decide(
            task, baseline=BASE, candidates=[CAND], grader_id=GRADER, min_quality=0.6, target="human"
        )
        got = d.candidates[0].graders[0]
        assert got.alpha is not None
        assert got == full_read(ledger, task, got.alpha), step
        assert len(full_reads) == reads, step
        return starts[0]

    grade(range(300))
    first = choose_for_labels(ledger, task=task, candidate=CAND, grader_id=GRADER, rate=0.3, seed=1)
    assert check("first decision: no labels (the sampler stored the group)", 0) == 0
    label(first[: len(first) // 2])
    assert check("labels of the earlier half", 0) == 0  # no sums were stored (no label before)
    grade(range(300, 360))
    queue = choose_for_labels(ledger, task=task, candidate=CAND, grader_id=GRADER, rate=0.3, seed=2)
    assert check("new cases", 0) > 0  # the sums stored when they started are continued
    label(queue[len(queue) // 2 :])
    assert check("the later labels", 0) > 0
    pending = [c for c in queue if c not in set(queue[len(queue) // 2 :])]
    label(pending)
    check("every label", 0)
    label(first[:2], annotator="bo")  # a second annotator on the first cases: the sums start again
    assert check("second annotator", 0) == 0
    check("after it, stored again", 0)
    label(first[2:4], replace=True)
    check("replaced labels", 0)
    grade(range(5, 7), run="r2", flip=True)  # replicates of old cases change their judge value
    check("replicates of old cases", 1)
    check("after the replicates, stored again", 0)
    grade(range(360, 365), baseline=OTHER, run="r3")
    grade(range(365, 380))
    choose_for_labels(ledger, task=task, candidate=CAND, grader_id=GRADER, rate=0.3, seed=3)
    check("sampled on another baseline", 0)
    grade(range(360, 365))  # now graded against ours: before the mark the sampler stored
    check("graded against the baseline after it was sampled", 1)
    monkeypatch.setattr(_ppi_running, "STATE_VERSION", "a new rule", raising=False)
    check("a new version of the running sums never reads the old snapshot", 1)
    check("stored under the new version", 0)


def test_an_unreadable_snapshot_is_read_in_full(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    """A damaged stored group is ignored (read in full, stored again), never an error."""
    from sqlalchemy import text

    items = [
        RecordItem(
            make_result(float(i % 2), candidate_model=CAND, baseline_model=BASE, grader_id=GRADER),
            "qa",
            "r1",
            f"c{i}",
        )
        for i in range(60)
    ]
    ledger.record_batch(items)
    queue = choose_for_labels(ledger, task="qa", candidate=CAND, grader_id=GRADER, rate=0.5, seed=4)
    ledger.record_labels([HumanLabel("qa", c, CAND, "ana", preference="candidate") for c in queue])
    kw = DECIDE
    first = Router(ledger).decide("qa", **kw).candidates[0].graders[0]
    with ledger.engine.begin() as conn:
        conn.execute(
            text("UPDATE evidence_snapshots SET evidence = :e WHERE settings = :s"),
            {"e": '{"n": 3, "arrays": "not base64!"}', "s": _human_cache.snapshot_settings()},
        )
    again = Router(ledger).decide("qa", **kw).candidates[0].graders[0]
    assert again == first and first.labels_used == len(queue) > 0


def test_continuous_grades_and_varying_inclusion_restore_exactly(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    """More than 256 distinct judge values (stored as float64) and active labelling (one
    inclusion probability per case): a new Router's evidence is still a full read's."""
    rng = np.random.default_rng(8)
    items = [
        RecordItem(
            make_result(float(rng.random()), candidate_model=CAND, baseline_model=BASE, grader_id=GRADER),
            "qa",
            "r1",
            f"c{i}",
        )
        for i in range(400)
    ]
    ledger.record_batch(items)
    queue = choose_for_labels(
        ledger, task="qa", candidate=CAND, grader_id=GRADER, rate=0.3, strategy="active", seed=4
    )
    ledger.record_labels([HumanLabel("qa", c, CAND, "ana", score=float(rng.random())) for c in queue])
    kw = DECIDE
    Router(ledger).decide("qa", **kw)
    got = Router(ledger).decide("qa", **kw).candidates[0].graders[0]
    assert got.alpha is not None and got.labels_used == len(queue), got.why
    assert got == full_read(ledger, "qa", got.alpha)
