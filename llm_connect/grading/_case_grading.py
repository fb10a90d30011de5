"""One case of a batch run: ask every side, judge every candidate's answers, collect the work.

:func:`grade_case` is what a :class:`~llm_connect.grading._batch.BatchGrader` worker does with a
case: it asks the baseline and the candidates (every sample, from the response cache where it
can), hands each candidate's answers with the baseline's to every judge that has not graded the
pair yet, and returns the case's :class:`~llm_connect.grading._writer.CaseWork` (grades, cache
entries, failures, pairs found not applicable) for the writer thread to commit in one
transaction. A side that fails is one failure of the case, a judge that fails one more; a rule
judge without the data it needs marks the pair not applicable. Nothing here writes or prints.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from llm_connect.errors import CaseDataError
from llm_connect.grading._paired import flag_asks_llm, judge_async, with_conversation
from llm_connect.grading._protocols import Case, Judge, JudgePair
from llm_connect.grading._report import (
    BatchReport,
    BatchResult,
    case_failure,
    lacks_case_data,
    not_applicable,
)
from llm_connect.grading._results import GradingResult
from llm_connect.grading._samples import merge_samples
from llm_connect.grading._sides import LiveSide, RecordedSide, Side
from llm_connect.grading._writer import CaseWork
from llm_connect.types import LLMResponse

if TYPE_CHECKING:
    from llm_connect.grading._batch import BatchGrader
    from llm_connect.ledger import RecordItem

__all__ = ["grade_case", "judge_pair", "judge_samples", "record_item", "respond"]


async def respond(
    grader: BatchGrader,
    side: Side,
    case: Case,
    cached: Mapping[str, LLMResponse],
    report: BatchReport,
    sample: int = 0,
) -> tuple[LLMResponse, str | None]:
    """The side's response (sample ``sample``) for ``case`` and, for a fresh live call, its cache key.

    A recorded side has one response per case, which every sample reuses.
    """
    if isinstance(side, RecordedSide):
        return side.response(case), None
    assert isinstance(side, LiveSide)
    key = grader._cache_key(side, case, sample) if grader.use_cache else None
    if key is not None and key in cached:
        report.cache_hits += 1
        return side.as_asked(cached[key]), None
    report.model_calls += 1
    response = await side.adapter.acomplete(case.request, grader._config_for(case))
    return side.as_asked(response), key


async def judge_pair(grader: BatchGrader, judge: Judge, pair: JudgePair) -> GradingResult:
    batcher = grader._batchers.get(id(judge))
    conversation = None if pair.case is None else pair.case.conversation
    if batcher is not None:  # judge_async flags its own results; batched ones are flagged here
        return with_conversation(flag_asks_llm(judge, await batcher.submit(pair)), conversation)
    result = await judge_async(
        judge,
        pair.baseline_response,
        pair.candidate_response,
        prompt=pair.prompt,
        run_config=pair.run_config,
        case=pair.case,
    )
    return with_conversation(result, conversation)


async def judge_samples(grader: BatchGrader, judge: Judge, pairs: Sequence[JudgePair]) -> GradingResult:
    """One grade of the case from every sample pair (:func:`merge_samples`)."""
    if len(pairs) == 1:
        return await judge_pair(grader, judge, pairs[0])
    results = await asyncio.gather(*(judge_pair(grader, judge, p) for p in pairs))
    return merge_samples(results)


async def grade_case(
    grader: BatchGrader,
    case: Case,
    cached: Mapping[str, LLMResponse],
    done_keys: set[tuple[str | None, str, str]],
    report: BatchReport,
    candidates: Sequence[Side] | None = None,
) -> CaseWork:
    work = CaseWork(case_id=case.id)
    rc = grader._config_for(case)
    cands = grader.candidates if candidates is None else list(candidates)
    sides: list[Side] = [grader.baseline, *cands]
    calls = [(s, k) for s in sides for k in range(grader.samples)]
    outcomes = await asyncio.gather(
        *(respond(grader, s, case, cached, report, k) for s, k in calls), return_exceptions=True
    )
    answered: dict[str, list[LLMResponse]] = {}
    failed: set[str] = set()
    for (side, _), outcome in zip(calls, outcomes, strict=True):
        if isinstance(outcome, asyncio.CancelledError):
            raise outcome
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, Exception):
                raise outcome
            if side.spec not in failed:  # one failure per side, however many samples failed
                stage = "baseline" if side is grader.baseline else "candidate"
                work.failures.append(case_failure(case, stage, outcome, side.adapter_id))
            failed.add(side.spec)
            continue
        response, key = outcome
        answered.setdefault(side.spec, []).append(response)
        report.observed_models.setdefault(side.spec, set()).add(response.model)
        report.asked_models.setdefault(side.spec, response.asked_model)
        if key is not None:  # kept even when another sample failed: a retry reuses it
            work.cache.append((key, side.adapter_id, response))
    responses = {spec: rs for spec, rs in answered.items() if spec not in failed}
    baseline = responses.get(grader.baseline.spec)
    if baseline is not None:
        jobs: list[tuple[Side, Judge]] = []
        coros = []
        for cand in cands:
            cand_resps = responses.get(cand.spec)
            if cand_resps is None:
                continue
            pairs = [
                JudgePair(b, c, case.prompt, rc, case) for b, c in zip(baseline, cand_resps, strict=True)
            ]
            model = cand_resps[0].asked_model  # as asked for: what the grade is stored under
            for judge in grader.judges:
                if (case.id, judge.grader_id, model) in done_keys:
                    continue
                jobs.append((cand, judge))
                coros.append(judge_samples(grader, judge, pairs))
        graded = await asyncio.gather(*coros, return_exceptions=True)
        for (cand, judge), res in zip(jobs, graded, strict=True):
            if isinstance(res, asyncio.CancelledError):
                raise res
            if isinstance(res, CaseDataError) and lacks_case_data(case, res):
                model = responses[cand.spec][0].asked_model
                na = not_applicable(case, judge.grader_id, cand.spec, res, candidate_model=model)
                report.not_applicable.append(na)
                work.skips.append(na)
                continue
            if isinstance(res, BaseException):
                if not isinstance(res, Exception):
                    raise res
                work.failures.append(case_failure(case, "judge", res, judge.grader_id))
                continue
            report.results.append(BatchResult(case.id, case.task, cand.spec, res))
            work.records.append(record_item(grader, case, cand, res))
    report.failures.extend(work.failures)
    return work


def record_item(grader: BatchGrader, case: Case, cand: Side, result: GradingResult) -> RecordItem:
    from llm_connect.ledger import RecordItem

    return RecordItem(
        result=result,
        task=case.task,
        run_id=grader.run_id,
        case_id=case.id,
        tags=case.tags,
        baseline_adapter_id=grader.baseline.adapter_id,
        candidate_adapter_id=cand.adapter_id,
        metadata=case.metadata or None,
    )
