"""Fill in missing grades from the ledger's stored pairs, and rebuild judges from stored specs.

:func:`fill_missing_grades` grades, with the given judges, every stored pair
they have not graded yet, from the responses already in the ledger (no
baseline or candidate model is called) and records those grades under the
task, run id, case id, tags and adapter ids of the pair's first stored grade.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from llm_connect.calibration._calibrate import PairKey, _run_config, _since, _spec_of, pair_key
from llm_connect.errors import CalibrationError, LLMConnectError
from llm_connect.grading._protocols import BatchJudge, JudgePair
from llm_connect.grading.judges._registry import JudgeContext, build_judge

if TYPE_CHECKING:
    from llm_connect.grading._protocols import Judge
    from llm_connect.grading._results import GradingResult
    from llm_connect.ledger import GradeRow, QualityLedger

__all__ = ["FillReport", "fill_missing_grades", "rebuild_judge"]


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

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "pairs": self.pairs,
            "graded": dict(self.graded),
            "already": dict(self.already),
            "skipped_no_text": self.skipped_no_text,
            "errors": {k: list(v) for k, v in self.errors.items()},
        }


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


def fill_missing_grades(
    ledger: QualityLedger,
    judges: Sequence[Judge],
    *,
    task: str | None = None,
    since: datetime | str | None = None,
    concurrency: int = 8,
    batch_size: int = 64,
    progress: Callable[[str, int, int], None] | None = None,
) -> FillReport:
    """Grade, with each judge, the stored pairs it has not graded yet, and record the grades.

    Only the responses already in the ledger are judged: no baseline or
    candidate model is called. Each new grade is recorded with the task, run
    id, case id, tags and adapter ids of the pair's first stored grade, in
    batches of ``batch_size`` (each batch one transaction). A grading that
    fails is listed in :attr:`FillReport.errors` and the rest go on.
    ``progress(grader_id, done, total)`` is called after each batch.
    """
    from llm_connect.ledger import RecordItem

    since_dt = _since(since)
    first: dict[PairKey, GradeRow] = {}
    done: dict[str, set[PairKey]] = {j.grader_id: set() for j in judges}
    for row in ledger.results(task=task, since=since_dt):
        key = pair_key(row)
        held = first.get(key)
        if held is None or (held.baseline_text is None and row.baseline_text is not None):
            first[key] = row
        if row.grader_id in done:
            done[row.grader_id].add(key)
    graded: dict[str, int] = {}
    already: dict[str, int] = {}
    errors: dict[str, tuple[str, ...]] = {}
    no_text: set[PairKey] = set()
    for judge_obj in judges:
        gid = judge_obj.grader_id
        todo = [k for k in sorted(first) if k not in done[gid]]
        already[gid] = len(done[gid])
        missing_text = [k for k in todo if first[k].baseline_text is None or first[k].candidate_text is None]
        no_text.update(missing_text)
        todo = [k for k in todo if k not in set(missing_text)]
        count = 0
        failed: list[str] = []
        for start in range(0, len(todo), batch_size):
            rows = [first[k] for k in todo[start : start + batch_size]]
            outcomes = _grade_rows(judge_obj, rows, concurrency)
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
            ledger.record_batch(items)
            count += len(items)
            if progress is not None:
                progress(gid, min(start + batch_size, len(todo)), len(todo))
        graded[gid] = count
        if failed:
            errors[gid] = tuple(failed)
    return FillReport(len(first), graded, already, len(no_text), errors)
