"""BaseJudge (issue 36, item 5): a judge writes its scoring logic only; the base owns ``judge``,
``ajudge`` and the one place a validated ``GradingResult`` is built (contract: baseline-grading
invariant 7d)."""

from __future__ import annotations

import asyncio
import math
import threading

import pytest

from llm_connect import LLMResponse, PairedGrader, RunConfig
from llm_connect.adapters import RecordedAdapter
from llm_connect.errors import GradingValidationError
from llm_connect.grading import GradingResult, Judge, JudgePair
from llm_connect.grading.judges import (
    BaseJudge,
    EmbeddingSimilarityJudge,
    ExactMatchJudge,
    LLMJudge,
    PairwiseJudge,
    PersonaJudge,
    RelativeJudge,
    Scored,
    ToolCallJudge,
    VrtyJudge,
)

PROMPT = "Name a colour."
CONFIG = RunConfig(temperature=0.0, max_tokens=16)


def _adapters(baseline: str, candidate: str) -> tuple[RecordedAdapter, RecordedAdapter]:
    return (
        RecordedAdapter({PROMPT: baseline}, model="gpt-4o"),
        RecordedAdapter({PROMPT: candidate}, model="gpt-4o-mini"),
    )


class LengthRatioJudge(BaseJudge):
    """A new judge: scoring logic only (the candidate's length over the baseline's)."""

    grader_id = "length-ratio"
    asks_llm = False

    def score(self, pair: JudgePair) -> Scored:
        b, c = len(pair.baseline_response.text), len(pair.candidate_response.text)
        return Scored(min(1.0, c / b) if b else 1.0, f"{c} vs {b} characters", {"chars": [b, c]})


class AsyncLengthJudge(BaseJudge):
    """A judge whose scoring awaits (as a model call would): ``ascore`` only."""

    grader_id = "async-length"
    asks_llm = True

    async def ascore(self, pair: JudgePair) -> Scored:
        await asyncio.sleep(0)
        return Scored(0.5 if pair.candidate_response.text else 0.0, "awaited", {"awaited": True})


class FixedJudge(BaseJudge):
    """Gives whatever score it is told, in a worker thread or on the event loop."""

    grader_id = "fixed"
    asks_llm = False

    def __init__(self, value: object, *, in_thread: bool = False) -> None:
        self.value = value
        self.in_thread = in_thread  # type: ignore[misc]
        self.threads: list[int] = []

    def score(self, pair: JudgePair) -> Scored:
        self.threads.append(threading.get_ident())
        return Scored(self.value, "as told")  # type: ignore[arg-type]


def test_a_judge_written_as_scoring_logic_grades_sync_and_async_through_paired_grading() -> None:
    judge = LengthRatioJudge()
    assert isinstance(judge, Judge)
    grader = PairedGrader(judge)
    sync = grader.grade(*_adapters("blue!", "red"), PROMPT, CONFIG)
    async_ = asyncio.run(grader.agrade(*_adapters("blue!", "red"), PROMPT, CONFIG))
    for result in (sync, async_):
        assert isinstance(result, GradingResult)
        assert result.quality_score == pytest.approx(0.6)
        assert result.notes == "3 vs 5 characters"
        assert result.grader_id == "length-ratio" and result.asks_llm is False
        assert dict(result.details) == {"chars": [5, 3]}
        assert (result.baseline_response.model, result.candidate_response.model) == ("gpt-4o", "gpt-4o-mini")
        assert result.prompt == PROMPT and result.run_config == CONFIG
    assert sync.to_dict() == async_.to_dict()


def test_an_async_judge_gets_a_sync_judge_on_a_loop_of_its_own() -> None:
    judge = AsyncLengthJudge()
    grader = PairedGrader(judge)
    sync = grader.grade(*_adapters("blue", "red"), PROMPT, CONFIG)
    async_ = asyncio.run(grader.agrade(*_adapters("blue", "red"), PROMPT, CONFIG))
    assert sync.to_dict() == async_.to_dict()
    assert (sync.quality_score, sync.notes, sync.asks_llm) == (0.5, "awaited", True)

    async def judge_inside_a_running_loop() -> GradingResult:  # a worker thread runs the loop
        base, cand = LLMResponse("blue", "b", "p"), LLMResponse("", "c", "p")
        return judge.judge(base, cand, prompt=PROMPT, run_config=CONFIG)

    assert asyncio.run(judge_inside_a_running_loop()).quality_score == 0.0


@pytest.mark.parametrize("value", [1.5, -0.1, math.nan, True, "1.0"])
def test_a_score_outside_0_to_1_is_refused_sync_and_async_as_every_grade_refuses_it(value: object) -> None:
    base, cand = LLMResponse("a", "b", "p"), LLMResponse("a", "c", "p")
    with pytest.raises(GradingValidationError) as direct:
        GradingResult(
            quality_score=value,  # type: ignore[arg-type]
            notes="",
            grader_id="fixed",
            baseline_response=base,
            candidate_response=cand,
        )
    grader = PairedGrader(FixedJudge(value))
    with pytest.raises(GradingValidationError) as sync:
        grader.grade(*_adapters("a", "a"), PROMPT, CONFIG)
    with pytest.raises(GradingValidationError) as async_:
        asyncio.run(grader.agrade(*_adapters("a", "a"), PROMPT, CONFIG))
    assert str(sync.value) == str(async_.value) == str(direct.value)
    assert "quality_score" in str(sync.value)


def test_ajudge_scores_on_the_loop_or_in_a_worker_thread_and_sees_an_overridden_judge() -> None:
    base, cand = LLMResponse("a", "b", "p"), LLMResponse("a", "c", "p")

    async def both(judge: BaseJudge) -> tuple[int, GradingResult]:
        return threading.get_ident(), await judge.ajudge(base, cand, prompt=PROMPT, run_config=CONFIG)

    inline, threaded = FixedJudge(1.0), FixedJudge(1.0, in_thread=True)
    loop_thread, _ = asyncio.run(both(inline))
    assert inline.threads == [loop_thread]
    loop_thread, _ = asyncio.run(both(threaded))
    assert threaded.threads and threaded.threads[0] != loop_thread

    class Counting(ExactMatchJudge):
        calls = 0

        def judge(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            Counting.calls += 1
            return super().judge(*args, **kwargs)

    asyncio.run(both(Counting()))
    assert Counting.calls == 1  # the batch engine's ajudge goes through an overridden judge


def test_a_judge_without_asks_llm_counts_as_asking_one_and_one_without_logic_is_refused() -> None:
    class Undeclared(BaseJudge):
        grader_id = "undeclared"

        def score(self, pair: JudgePair) -> Scored:
            return Scored(1.0, "")

    result = PairedGrader(Undeclared()).grade(*_adapters("a", "a"), PROMPT, CONFIG)
    assert result.asks_llm is True

    class Empty(BaseJudge):
        grader_id = "empty"
        asks_llm = False

    with pytest.raises(NotImplementedError, match="Empty writes neither score nor ascore"):
        PairedGrader(Empty()).grade(*_adapters("a", "a"), PROMPT, CONFIG)


@pytest.mark.parametrize(
    "cls",
    [
        ExactMatchJudge,
        ToolCallJudge,
        EmbeddingSimilarityJudge,
        LLMJudge,
        PairwiseJudge,
        RelativeJudge,
        VrtyJudge,
        PersonaJudge,
    ],
)
def test_every_built_in_judge_holds_its_scoring_logic_only(cls: type) -> None:
    assert issubclass(cls, BaseJudge)
    for klass in cls.__mro__:
        if klass is BaseJudge:
            break
        assert not {"judge", "ajudge", "grading_result"} & set(vars(klass)), klass
