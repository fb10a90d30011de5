"""The writes that add sampled cases and labels keep the human target's stored state current
(issue 23: a decision with 100,000 cases stays under 50 ms, so the full read happens at write
time), and a decision that restores it gives the evidence of a full read and a fresh
computation, on SQLite and PostgreSQL.

``choose_for_labels`` and ``import_labels`` bring the stored group of every baseline and judge
they touched up to date (``routing/_human_cache.refresh_stored``): the first
``Router.decide(target="human")`` after them (a new Router, as a new process) restores it,
reads nothing in full and, after an import, finds the running sums already at the first
pending label. Whatever happens in between (labels recorded without a refresh, a replaced
label, a re-grade, a second annotator, another ``alpha``) the evidence equals
``_human_group.full_read`` (every sampled case and label read afresh, the bound recomputed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llm_connect.grading import GradingResult
from llm_connect.labels import HumanLabel, SamplingStore, choose_for_labels, import_labels, write_labels
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.ledger._design import DesignReader
from llm_connect.routing import Router, _ppi
from llm_connect.routing._human_cache import refresh_stored, snapshot_settings
from tests.routing._human_group import BASE, CAND, GRADER, OTHER, PREFERENCES, full_read


class Watch:
    """Counts the candidate's full reads (``DesignReader.design``) and where the running sums
    start (``starts[0]``: the decision's; the full computation it is checked against adds its own)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = 0
        self.starts: list[int] = []
        design, continued = DesignReader.design, _ppi.human_bound_continued

        def counted(reader: DesignReader, *args: str) -> Any:
            self.reads += args[2] == CAND  # (task, baseline, candidate, grader)
            return design(reader, *args)

        def watched(*args: Any, **kwargs: Any) -> Any:
            start = kwargs.get("start")
            self.starts.append(0 if start is None else start.t)
            return continued(*args, **kwargs)

        monkeypatch.setattr(DesignReader, "design", counted)
        monkeypatch.setattr(_ppi, "human_bound_continued", watched)

    def reset(self) -> None:
        self.reads = 0
        self.starts.clear()


class Flow:
    """One task's group (``_human_group``'s names), graded, sampled and labelled step by step."""

    def __init__(self, ledger: QualityLedger, make_result: Callable[..., GradingResult], tmp: Path) -> None:
        self.ledger, self.make_result, self.tmp = ledger, make_result, tmp
        self.rng = np.random.default_rng(11)
        self.judge: dict[int, float] = {}
        self.files = 0

    def grade(self, cases: range, baseline: str = BASE, run: str = "r1", flip: bool = False) -> None:
        items = []
        for i in cases:
            self.judge.setdefault(i, float(self.rng.choice([0.0, 0.5, 1.0])))
            q = 1.0 - self.judge[i] if flip else self.judge[i]
            result = self.make_result(q, candidate_model=CAND, baseline_model=baseline, grader_id=GRADER)
            items.append(RecordItem(result, "qa", run, f"c{i:04d}"))
        self.ledger.record_batch(items)

    def sample(self, seed: int, **kw: Any) -> list[str]:
        return choose_for_labels(self.ledger, task="qa", candidate=CAND, grader_id=GRADER, seed=seed, **kw)

    def labels(self, case_ids: list[str], annotator: str = "ana", candidate: str = CAND) -> list[HumanLabel]:
        return [
            HumanLabel("qa", c, candidate, annotator, preference=PREFERENCES[int(self.rng.integers(3))])
            for c in case_ids
        ]

    def import_(self, labels: list[HumanLabel], **kw: Any) -> None:
        """``labels`` written to a JSON Lines file and imported (``labels import``)."""
        self.files += 1
        path = self.tmp / f"labels-{self.files}.jsonl"
        with path.open("w", encoding="utf-8") as out:
            write_labels(labels, out)
        import_labels(self.ledger, path, **kw)


def decide(ledger: QualityLedger, watch: Watch, step: str, candidates: tuple[str, ...] = (CAND,)) -> Any:
    """A new Router's evidence for the candidate, checked against the full computation."""
    watch.reset()
    d = Router(ledger).decide(
        "qa", baseline=BASE, candidates=list(candidates), grader_id=GRADER, min_quality=0.6, target="human"
    )
    got = d.candidates[0].graders[0]
    assert got.alpha is not None, step
    assert got == full_read(ledger, "qa", got.alpha), step
    return got


def test_the_state_the_sampler_and_an_import_store_is_that_of_a_full_read(
    ledger: QualityLedger,
    make_result: Callable[..., GradingResult],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """After the sampler and after an import, a new Router reads nothing in full and (after an
    import) continues nothing; labels recorded without a refresh, a replaced label, a second
    annotator and a re-grade are each caught, and every figure is a full read's."""
    watch = Watch(monkeypatch)
    flow = Flow(ledger, make_result, tmp_path)
    flow.grade(range(400))
    queue = flow.sample(1, rate=0.3)
    decide(ledger, watch, "after the sampler, no label yet")
    assert watch.reads == 0 and watch.starts[0] == 0

    flow.import_(flow.labels(queue[:60]))  # labels arrive late, for the earliest chosen cases
    got = decide(ledger, watch, "after an import")
    assert watch.reads == 0 and got.labels_used == 60
    assert watch.starts[0] == got.cases_used  # the import left the sums at the first pending label

    ledger.record_labels(flow.labels(queue[60:90]))  # no refresh: the decision continues the sums
    got = decide(ledger, watch, "labels recorded without an import")
    assert watch.reads == 0 and got.labels_used == 90 and 0 < watch.starts[0] < got.cases_used

    flow.import_(flow.labels(queue[90:]))
    got = decide(ledger, watch, "every label imported")
    assert watch.reads == 0 and got.labels_used == len(queue) and watch.starts[0] == got.cases_used

    replaced = flow.labels(queue[:5])
    flow.import_(replaced, replace=True)  # changes before the sums' end: the refresh sums again
    decide(ledger, watch, "replaced labels imported")
    assert watch.reads == 0 and watch.starts[0] == got.cases_used

    ledger.record_labels(flow.labels(queue[5:8]), replace=True)  # replaced, no refresh
    decide(ledger, watch, "replaced labels recorded")
    assert watch.reads == 0 and watch.starts[0] == 0

    flow.import_(flow.labels(queue[:4], annotator="bo"))  # a second annotator: majorities change
    decide(ledger, watch, "a second annotator imported")
    assert watch.reads == 0

    flow.grade(range(10, 14), run="r2", flip=True)  # a re-grade of old cases: judge values change
    decide(ledger, watch, "re-graded, no refresh")
    assert watch.reads == 1  # the stored mark no longer holds: read in full (and stored again)

    flow.grade(range(20, 24), run="r3", flip=True)
    flow.grade(range(400, 450))
    flow.sample(2, rate=0.3)  # the sampler's refresh reads in full after the re-grade
    decide(ledger, watch, "re-graded, then new cases sampled")
    assert watch.reads == 0

    flow.grade(range(450, 455), baseline=OTHER, run="r4")  # sampled before graded against ours
    flow.grade(range(455, 470))
    later = flow.sample(3, rate=0.3)
    decide(ledger, watch, "sampled on another baseline")
    flow.grade(range(450, 455))
    flow.import_(flow.labels(later))
    decide(ledger, watch, "graded against the baseline after it was sampled, then an import")
    assert watch.reads == 0


def test_the_sums_of_each_alpha_a_decision_asked_for_are_kept_current(
    ledger: QualityLedger,
    make_result: Callable[..., GradingResult],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A decision over two candidates (alpha halved by Bonferroni) is remembered: an import
    brings that alpha's running sums up to date as well as the one-candidate default."""
    watch = Watch(monkeypatch)
    flow = Flow(ledger, make_result, tmp_path)
    flow.grade(range(300))
    queue = flow.sample(4, rate=0.3, strategy="active")
    pair = (CAND, "absent")
    decide(ledger, watch, "two candidates, no label", pair)
    flow.import_(flow.labels(queue[:50]))
    for candidates in (pair, (CAND,)):
        got = decide(ledger, watch, f"{len(candidates)} candidate(s) after the import", candidates)
        assert watch.reads == 0 and watch.starts[0] == got.cases_used and got.labels_used == 50


def test_a_file_drawn_uniformly_and_labels_named_by_adapter_id_refresh_the_state(
    ledger: QualityLedger,
    make_result: Callable[..., GradingResult],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``labels import --sampled-uniformly`` records the sample and stores the state with it;
    a file naming the candidate by its adapter id refreshes the candidate's groups too."""
    watch = Watch(monkeypatch)
    flow = Flow(ledger, make_result, tmp_path)
    flow.grade(range(200))
    drawn = [f"c{i:04d}" for i in range(0, 200, 5)]
    flow.import_(flow.labels(drawn), sampled_uniformly=0.2)
    got = decide(ledger, watch, "a file drawn uniformly")
    assert watch.reads == 0 and got.labels_used == len(drawn) and watch.starts[0] == got.cases_used

    flow.grade(range(200, 260))
    queue = flow.sample(5, rate=0.5)
    with ledger.engine.connect() as conn:
        (adapter_id,) = conn.exec_driver_sql(
            "SELECT DISTINCT candidate_adapter_id FROM grades WHERE candidate_model = 'small'"
        ).one()
    assert adapter_id != CAND
    flow.import_(flow.labels(queue, candidate=adapter_id))
    got = decide(ledger, watch, "labels naming the adapter id")
    assert watch.reads == 0 and watch.starts[0] == got.cases_used
    assert got.labels_used == len(drawn) + len(queue)


def test_refresh_stores_one_group_per_baseline_and_judge_and_skips_the_unsampled(
    ledger: QualityLedger, make_result: Callable[..., GradingResult], tmp_path: Path
) -> None:
    """Every baseline the candidate was graded against with the judge gets its group stored;
    a candidate with no grade, or whose cases were never sampled, stores nothing."""
    flow = Flow(ledger, make_result, tmp_path)
    flow.grade(range(100))
    flow.grade(range(50), baseline=OTHER, run="r2")
    assert refresh_stored(ledger.engine, "qa", [CAND]) == 0  # nothing sampled yet
    choose_for_labels(SamplingStore(ledger.engine), task="qa", candidate=CAND, grader_id=GRADER, seed=6)
    for baseline in (BASE, OTHER):
        stored = ledger.evidence_snapshots(task="qa", baseline_model=baseline, settings=snapshot_settings())
        assert set(stored) == {(CAND, GRADER)}, baseline
    assert refresh_stored(ledger.engine, "qa", ["nobody"]) == 0
    assert refresh_stored(ledger.engine, "qa", [CAND], ["another-judge"]) == 0
    assert refresh_stored(ledger.engine, "qa", [CAND]) == 2


def test_a_refresh_that_fails_leaves_the_write_standing(
    ledger: QualityLedger,
    make_result: Callable[..., GradingResult],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The sampler's decisions and the imported labels are committed before the refresh: a
    database error in it is logged, the call returns, and the next decision reads in full."""
    from llm_connect.errors import LedgerError
    from llm_connect.routing import _human_cache

    def broken(*args: Any, **kwargs: Any) -> int:
        raise LedgerError("the database went away")

    monkeypatch.setattr(_human_cache, "refresh_stored", broken)
    flow = Flow(ledger, make_result, tmp_path)
    flow.grade(range(120))
    with caplog.at_level("WARNING"):
        queue = flow.sample(7, rate=0.5)
        flow.import_(flow.labels(queue))
    assert queue and sum("routing state not refreshed" in r.getMessage() for r in caplog.records) == 2
    assert len(ledger.labels(task="qa")) == len(queue)
    watch = Watch(monkeypatch)
    got = decide(ledger, watch, "nothing stored by the writes")
    assert watch.reads == 1 and got.labels_used == len(queue)


@pytest.mark.postgres
def test_a_full_read_of_a_group_the_statistics_never_saw_analyzes(
    postgres_url: str, make_result: Callable[..., GradingResult], tmp_path: Path
) -> None:
    """PostgreSQL: the sampler's refresh reads a new task's group in full (without nested
    loops); the statistics then knew one task only and estimated the new one at a row, so the
    read refreshes them and later reads past the mark look each case up."""
    from sqlalchemy import text

    with QualityLedger(postgres_url) as ledger:
        for task in ("first", "second"):
            items = [
                RecordItem(
                    make_result(float(i % 2), candidate_model=CAND, baseline_model=BASE, grader_id=GRADER),
                    task,
                    f"run-{task}",
                    f"c{i:05d}",
                )
                for i in range(1_500)
            ]
            ledger.record_batch(items)
            choose_for_labels(ledger, task=task, candidate=CAND, grader_id=GRADER, rate=0.2, seed=3)
            with ledger.engine.connect() as conn:
                estimates = conn.execute(
                    text(
                        "SELECT relname, reltuples FROM pg_class WHERE relname IN ('case_stats', "
                        "'label_sampling') AND relnamespace = to_regnamespace(current_schema())"
                    )
                ).all()
            assert {name: est for name, est in estimates} == {"case_stats": 1_500.0 * (1 + (task == "second")),
                                                              "label_sampling": 1_500.0 * (1 + (task == "second"))}, task  # fmt: skip
