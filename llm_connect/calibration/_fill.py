"""Fill in missing grades from the ledger's stored pairs, and rebuild judges from stored specs.

:func:`fill_missing_grades` grades, with the given judges, every stored pair
they have not graded yet (or only the pairs ``pairs`` names), from the responses
already in the ledger (no baseline or candidate model is called) and records those
grades under the task, run id, case id, tags and adapter ids of the pair's first
stored grade. :func:`plan_fill` says which pairs a calibration compares, so that
``llm-connect calibrate`` grades only those unless told otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from llm_connect.calibration._calibrate import PairKey, _run_config, _since, _spec_of, pair_key
from llm_connect.calibration._human import HUMAN, _pick
from llm_connect.errors import CalibrationError, LLMConnectError
from llm_connect.grading import BatchJudge, JudgeContext, JudgePair, build_judge

if TYPE_CHECKING:
    from llm_connect.grading import GradingResult, Judge
    from llm_connect.ledger import GradeRow, QualityLedger

__all__ = ["FillPlan", "FillReport", "fill_missing_grades", "plan_fill", "rebuild_judge"]


def rebuild_judge(
    ledger: QualityLedger,
    text: str,
    context: JudgeContext | None = None,
    *,
    task: str | None = None,
    since: datetime | str | None = None,
) -> Judge:
    """The judge ``text`` names: a grader id in the ledger (rebuilt from its stored
    ``details["judge_spec"]``) or a judge spec (built with the registry).

    Raises :class:`CalibrationError` when a stored grader id has no spec or its
    spec no longer rebuilds the same grader id, and
    :class:`~llm_connect.errors.ConfigurationError` for an invalid spec.
    """
    since_dt = _since(since)
    if ledger.count(grader_id=text, task=task, since=since_dt) > 0:
        row = next(iter(ledger.results(grader_id=text, task=task, since=since_dt, limit=1)))
        spec = _spec_of(row)
        if spec is None:
            raise CalibrationError(f"grades by {text!r} carry no judge_spec: the judge cannot be rebuilt")
        judge_obj = build_judge(spec, context)
        if judge_obj.grader_id != text:
            raise CalibrationError(
                f"the stored spec of {text!r} now builds a judge grading as {judge_obj.grader_id!r}"
            )
        return judge_obj
    return build_judge(text, context)


@dataclass(frozen=True)
class FillReport:
    """What :func:`fill_missing_grades` did, per judge grader id."""

    pairs: int
    """Distinct stored pairs considered."""
    graded: Mapping[str, int]
    """New grades recorded per judge."""
    already: Mapping[str, int]
    """Pairs each judge had graded before."""
    skipped_no_text: int
    """Pairs that could not be graded because the ledger holds only digests of their texts."""
    errors: Mapping[str, tuple[str, ...]]
    """Per judge, the messages of gradings that failed (the pair is left ungraded)."""
    left_out: Mapping[str, int] = field(default_factory=dict)
    """Per judge, the stored pairs it has not graded that were left so: outside the ``pairs`` asked
    for (what ``llm-connect calibrate`` does not compare; ``--grade-missing`` grades them)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "pairs": self.pairs,
            "graded": dict(self.graded),
            "already": dict(self.already),
            "skipped_no_text": self.skipped_no_text,
            "errors": {k: list(v) for k, v in self.errors.items()},
            "left_out": dict(self.left_out),
        }


@dataclass(frozen=True)
class FillPlan:
    """Which stored pairs a calibration compares, per grader, and what grading them takes
    (:func:`plan_fill`)."""

    pairs: int
    """Distinct stored pairs considered (within the task and since)."""
    compare: Mapping[str, frozenset[PairKey]]
    """Per grader id (the judge first, then the references): the pairs the calibration compares,
    graded or not. Against people the judge's are the labelled cases (one pair each); a reference
    judge's are the judge's."""
    missing: Mapping[str, int]
    """Per grader id: the pairs of :attr:`compare` it has not graded and that can be graded (the
    ledger holds their texts): what grading only the compared pairs does."""
    extra: Mapping[str, int]
    """Per grader id: the other stored pairs it has not graded (gradable): what grading every
    missing pair would add."""
    short: tuple[str, ...] = ()
    """Why the compared pairs are too few for a verdict while grading the other pairs would add
    some (empty when grading more would not help)."""
    cost_per_grade: Mapping[str, float] = field(default_factory=dict)
    """Per grader id that asks an LLM and recorded a cost on its stored grades: their mean
    ``judge_cost_usd`` (the estimate of a new grade's cost)."""

    @property
    def needs_more(self) -> bool:
        """Whether a verdict needs grades beyond the compared pairs."""
        return bool(self.short)


def _mean_cost(ledger: QualityLedger, grader_id: str) -> float | None:
    """The mean recorded ``judge_cost_usd`` of ``grader_id``'s stored grades (``None``: none recorded)."""
    costs = []
    for row in ledger.results(grader_id=grader_id):
        cost = row.details.get("judge_cost_usd") if isinstance(row.details, Mapping) else None
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            costs.append(float(cost))
    return sum(costs) / len(costs) if costs else None


def _scan(
    rows: Iterable[GradeRow], first: dict[PairKey, GradeRow], done: dict[str, set[PairKey]]
) -> Iterator[GradeRow]:
    """Each of ``rows``, after noting its pair in ``first`` (the pair's first row, one with the
    baseline's text preferred) and, for the graders of ``done``, that it is graded."""
    for row in rows:
        key = pair_key(row)
        held = first.get(key)
        if held is None or (held.baseline_text is None and row.baseline_text is not None):
            first[key] = row
        if row.grader_id in done:
            done[row.grader_id].add(key)
        yield row


def plan_fill(
    ledger: QualityLedger,
    judge: str,
    references: Sequence[str],
    *,
    task: str | None = None,
    since: datetime | str | None = None,
    min_n: int = 50,
    asks_llm: Collection[str] = (),
) -> FillPlan:
    """The stored pairs calibrating ``judge`` (a grader id) against ``references`` (grader ids, or
    ``"human"``) compares, and what grading them (or every missing pair) takes.

    Against people (``"human"``) the judge must grade each labelled case of ``task`` (all tasks
    when ``None``) once: the pair of the case's grade the label meets (the labelled run's when
    every label names one, else the latest). A reference judge must grade the pairs the judge
    graded or will. Nothing else is compared, so nothing else needs grading; but when the judge
    has fewer than ``min_n`` compared pairs for a reference judge (against people: none at all)
    while other stored pairs could be graded, :attr:`FillPlan.short` says so.
    ``asks_llm``: the grader ids that ask an LLM (their :attr:`FillPlan.cost_per_grade` is read
    from their stored grades).
    """
    from llm_connect.ledger import LabelStore

    since_dt = _since(since)
    ids = list(dict.fromkeys([judge, *(r for r in references if r != HUMAN)]))
    first: dict[PairKey, GradeRow] = {}
    done: dict[str, set[PairKey]] = {gid: set() for gid in ids}
    by_case: dict[tuple[str, str, str], list[GradeRow]] = {}
    judged: set[tuple[str, str, str]] = set()
    for row in _scan(ledger.results(task=task, since=since_dt), first, done):
        if row.case_id is not None:
            case = (row.task, row.case_id, row.candidate_model)
            by_case.setdefault(case, []).append(row)
            if row.grader_id == judge:
                judged.add(case)
    own = set(done[judge])
    if HUMAN in references:
        for labels in LabelStore(ledger.engine).case_labels(task=task):
            case = (labels.task, labels.case_id, labels.candidate)
            rows = by_case.get(case)
            if rows and case not in judged:  # a case the judge graded meets its label already
                own.add(pair_key(_pick(rows, labels)))
    compare = {gid: frozenset(own) for gid in ids}
    gradable = {k for k, r in first.items() if r.baseline_text is not None and r.candidate_text is not None}
    missing = {gid: len((compare[gid] - done[gid]) & gradable) for gid in ids}
    extra = {gid: len(gradable - done[gid] - compare[gid]) for gid in ids}
    if HUMAN in references:  # the labelled cases are the comparison asked for: more only when none
        where = f"of task {task} " if task is not None else ""
        short: tuple[str, ...] = (
            (
                f"{judge} has graded no stored pair and no labelled case {where}asks it for one "
                "(llm-connect labels queue lists the cases to label)",
            )
            if not own and extra[judge] > 0
            else ()
        )
    else:
        short = tuple(
            f"{judge} has {len(own)} pair(s) to compare with {ref}, fewer than the {min_n} a verdict "
            "needs (--min-n)"
            for ref in ids[1:]
            if len(own) < min_n and extra[judge] > 0
        )
    costs = {gid: _mean_cost(ledger, gid) for gid in ids if gid in asks_llm}
    return FillPlan(
        pairs=len(first),
        compare=compare,
        missing=missing,
        extra=extra,
        short=short,
        cost_per_grade={gid: c for gid, c in costs.items() if c is not None},
    )


def _grade_rows(judge_obj: Judge, rows: Sequence[GradeRow], concurrency: int) -> list[GradingResult | str]:
    if isinstance(judge_obj, BatchJudge):
        pairs = [
            JudgePair(r.baseline_response, r.candidate_response, r.prompt or "", _run_config(r)) for r in rows
        ]
        try:
            return list(judge_obj.judge_many(pairs))
        except LLMConnectError:
            pass  # one bad pair spoils a batch: grade one by one to keep the rest

    def one(row: GradeRow) -> GradingResult | str:
        try:
            return judge_obj.judge(
                row.baseline_response,
                row.candidate_response,
                prompt=row.prompt or "",
                run_config=_run_config(row),
            )
        except LLMConnectError as exc:
            return f"{type(exc).__name__}: {exc}"

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(one, rows))


def _items(rows: Sequence[GradeRow], outcomes: Sequence[GradingResult | str], failed: list[str]) -> list[Any]:
    """The grades to record (under each pair's first stored grade's keys); failures go to ``failed``."""
    from llm_connect.ledger import RecordItem

    items = []
    for row, outcome in zip(rows, outcomes, strict=True):
        if isinstance(outcome, str):
            failed.append(f"case {row.case_id or row.id}: {outcome}")
            continue
        items.append(
            RecordItem(
                outcome,
                row.task,
                row.run_id,
                row.case_id,
                tuple(row.tags),
                baseline_adapter_id=row.baseline_adapter_id,
                candidate_adapter_id=row.candidate_adapter_id,
            )
        )
    return items


def _unit(gid: str, key: PairKey) -> str:
    """The case id of one (judge, pair) unit of a shared fill."""
    import hashlib

    return hashlib.sha256("|".join((gid, *key)).encode("utf-8")).hexdigest()[:40]


def _fill_shared(
    ledger: QualityLedger,
    judges: Sequence[Judge],
    first: Mapping[PairKey, GradeRow],
    done: Mapping[str, set[PairKey]],
    run_id: str,
    *,
    lease_s: float,
    concurrency: int,
    batch_size: int,
    progress: Callable[[str, int, int], None] | None,
    pairs: Mapping[str, Collection[PairKey]] | None = None,
) -> FillReport:
    """:func:`fill_missing_grades` over units claimed with leases (see its ``shared_run``)."""
    import hashlib
    import os
    import socket
    import time

    from llm_connect.errors import GradeConflictError
    from llm_connect.grading import new_worker_id

    gradable = sorted(
        k for k, r in first.items() if r.baseline_text is not None and r.candidate_text is not None
    )
    units: dict[str, tuple[Judge, PairKey]] = {
        _unit(j.grader_id, k): (j, k)
        for j in judges
        for k in gradable
        if pairs is None or k in pairs.get(j.grader_id, ())
    }
    digest = hashlib.sha256("\n".join(sorted(units)).encode("ascii")).hexdigest()
    ledger.register_run_cases(
        run_id, [(u, first[k].task, u) for u, (_, k) in units.items()], suite_digest=digest
    )
    worker = new_worker_id()
    ledger.register_worker(run_id, worker, host=socket.gethostname(), pid=os.getpid())
    graded = {j.grader_id: 0 for j in judges}
    failed: dict[str, list[str]] = {j.grader_id: [] for j in judges}
    finished = 0
    try:
        while True:
            claimed = ledger.claim_cases(run_id, worker, limit=batch_size, lease_s=lease_s)
            if not claimed:
                status = ledger.run_status(run_id)
                if status.left == 0:  # every unit done or failed
                    break
                time.sleep(min(1.0, lease_s / 4))  # others hold the rest: take over lapsed leases
                continue
            for judge_obj in judges:
                gid = judge_obj.grader_id
                mine = [u for u in claimed if units[u][0] is judge_obj and units[u][1] not in done[gid]]
                if not mine:
                    continue
                rows = [first[units[u][1]] for u in mine]
                items = _items(rows, _grade_rows(judge_obj, rows, concurrency), failed[gid])
                for item in items:  # one by one: a unit another worker graded first is dropped
                    try:
                        ledger.record_batch([item])
                        graded[gid] += 1
                    except GradeConflictError:
                        pass
            ledger.record_outcomes(run_id, worker_id=worker, finished_case_ids=claimed)
            finished += len(claimed)
            ledger.heartbeat(
                run_id, worker, calls=0, failures=sum(map(len, failed.values())), cases_done=finished
            )
            if progress is not None:
                progress("shared", finished, len(units))
    finally:
        ledger.stop_worker(run_id, worker)
    errors = {gid: tuple(m) for gid, m in failed.items() if m}
    already = {j.grader_id: len(done[j.grader_id]) for j in judges}
    no_text = len(first) - len(gradable) if pairs is None else len(_asked_without_text(first, judges, pairs))
    return FillReport(len(first), graded, already, no_text, errors, _left_out(judges, gradable, done, pairs))


def _asked_without_text(
    first: Mapping[PairKey, GradeRow], judges: Sequence[Judge], pairs: Mapping[str, Collection[PairKey]]
) -> set[PairKey]:
    """The pairs ``pairs`` asks some judge to grade whose texts the ledger does not hold."""
    return {
        k
        for j in judges
        for k in pairs.get(j.grader_id, ())
        if k in first and (first[k].baseline_text is None or first[k].candidate_text is None)
    }


def _left_out(
    judges: Sequence[Judge],
    gradable: Collection[PairKey],
    done: Mapping[str, set[PairKey]],
    pairs: Mapping[str, Collection[PairKey]] | None,
) -> dict[str, int]:
    """Per judge, the gradable pairs it has not graded that ``pairs`` leaves out (none without it)."""
    if pairs is None:
        return {}
    out = {}
    for j in judges:
        asked = pairs.get(j.grader_id, ())
        out[j.grader_id] = sum(1 for k in gradable if k not in done[j.grader_id] and k not in asked)
    return out


def fill_missing_grades(
    ledger: QualityLedger,
    judges: Sequence[Judge],
    *,
    task: str | None = None,
    since: datetime | str | None = None,
    concurrency: int = 8,
    batch_size: int = 64,
    progress: Callable[[str, int, int], None] | None = None,
    shared_run: str | None = None,
    lease_s: float = 60.0,
    pairs: Mapping[str, Collection[PairKey]] | None = None,
) -> FillReport:
    """Grade, with each judge, the stored pairs it has not graded yet, and record the grades.

    Only the responses already in the ledger are judged: no baseline or
    candidate model is called. Each new grade is recorded with the task, run
    id, case id, tags and adapter ids of the pair's first stored grade, in
    batches of ``batch_size`` (each batch one transaction). A grading that
    fails is listed in :attr:`FillReport.errors` and the rest go on.
    ``progress(grader_id, done, total)`` is called after each batch.

    ``shared_run`` (a PostgreSQL ledger): grade together with every other process
    given the same run id. The units of work, (judge, pair) for every pair with its
    texts, are registered once (a different set under the same run id is a
    :class:`~llm_connect.errors.RunMismatchError`: the ledger changed, use a new run
    id); each process claims batches with a lease of ``lease_s`` seconds, grades the
    units not graded yet, records them and marks them done. A unit whose lease
    lapsed may be graded twice, but its grade is stored once: the grade's key
    (run id, case id, judge, candidate) takes the first, and a later different
    grade is refused and dropped, never written over it. (A pair stored without a run
    id and case id has no such key: if its lease lapses mid-grading it may be graded
    twice.)

    ``pairs`` (per judge grader id, e.g. :attr:`FillPlan.compare`): grade only those pairs; the
    other missing ones are counted in :attr:`FillReport.left_out`. ``None``: every stored pair.
    """

    since_dt = _since(since)
    first: dict[PairKey, GradeRow] = {}
    done: dict[str, set[PairKey]] = {j.grader_id: set() for j in judges}
    for _ in _scan(ledger.results(task=task, since=since_dt), first, done):
        pass
    if shared_run is not None:
        return _fill_shared(
            ledger, judges, first, done, shared_run, lease_s=lease_s, concurrency=concurrency,
            batch_size=batch_size, progress=progress, pairs=pairs,
        )  # fmt: skip
    graded: dict[str, int] = {}
    already: dict[str, int] = {}
    errors: dict[str, tuple[str, ...]] = {}
    no_text: set[PairKey] = set()
    left_out: dict[str, int] = {}
    for judge_obj in judges:
        gid = judge_obj.grader_id
        todo = [k for k in sorted(first) if k not in done[gid]]
        if pairs is not None:
            asked = pairs.get(gid, ())
            left_out[gid] = sum(
                1 for k in todo if k not in asked and first[k].baseline_text is not None
                and first[k].candidate_text is not None
            )  # fmt: skip
            todo = [k for k in todo if k in asked]
        already[gid] = len(done[gid])
        missing_text = [k for k in todo if first[k].baseline_text is None or first[k].candidate_text is None]
        no_text.update(missing_text)
        todo = [k for k in todo if k not in set(missing_text)]
        count = 0
        failed: list[str] = []
        for start in range(0, len(todo), batch_size):
            rows = [first[k] for k in todo[start : start + batch_size]]
            outcomes = _grade_rows(judge_obj, rows, concurrency)
            items = _items(rows, outcomes, failed)
            ledger.record_batch(items)
            count += len(items)
            if progress is not None:
                progress(gid, min(start + batch_size, len(todo)), len(todo))
        graded[gid] = count
        if failed:
            errors[gid] = tuple(failed)
    return FillReport(len(first), graded, already, len(no_text), errors, left_out)
