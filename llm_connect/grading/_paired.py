"""PairedGrader: run baseline and candidate on the same prompt, then judge."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from llm_connect.grading._protocols import Case, Judge
from llm_connect.grading._results import GradingResult
from llm_connect.grading.judges._registry import judge_asks_llm
from llm_connect.types import Conversation, LLMResponse, Prompt, RunConfig, prompt_text

if TYPE_CHECKING:
    from llm_connect.adapters import LLMAdapter

__all__ = ["PairedGrader", "flag_asks_llm", "judge_async", "with_conversation"]


def flag_asks_llm(judge: object, result: GradingResult) -> GradingResult:
    """``result`` with ``asks_llm=True`` when ``judge`` asks an LLM but the result does not say so.

    A judge's own ``asks_llm`` attribute wins over a result that left the flag
    at its default; a judge without the attribute counts as asking an LLM
    (:func:`~llm_connect.grading.judges._registry.judge_asks_llm`).
    """
    if result.asks_llm or not judge_asks_llm(judge):
        return result
    return dataclasses.replace(result, asks_llm=True)


def with_conversation(result: GradingResult, prompt: Prompt | None) -> GradingResult:
    """``result`` carrying ``prompt``'s conversation (unchanged for a string prompt)."""
    if not isinstance(prompt, Conversation) or result.conversation == prompt:
        return result
    return dataclasses.replace(result, conversation=prompt)


async def judge_async(
    judge: Judge,
    baseline: LLMResponse,
    candidate: LLMResponse,
    *,
    prompt: str,
    run_config: RunConfig,
    case: Case | None = None,
) -> GradingResult:
    """Await ``judge.ajudge`` when it exists, else run ``judge.judge`` in a thread.

    The result says ``asks_llm=True`` whenever the judge does (:func:`flag_asks_llm`).
    """
    import asyncio  # here, not at module level: ``llm-connect --help`` never needs it

    ajudge = getattr(judge, "ajudge", None)
    if ajudge is not None:
        result: GradingResult = await ajudge(
            baseline, candidate, prompt=prompt, run_config=run_config, case=case
        )
        return flag_asks_llm(judge, result)
    result = await asyncio.to_thread(
        judge.judge, baseline, candidate, prompt=prompt, run_config=run_config, case=case
    )
    return flag_asks_llm(judge, result)


class PairedGrader:
    """Grades a candidate adapter against a baseline adapter with one judge.

    Both adapters receive exactly the same prompt (a string or a
    :class:`~llm_connect.types.Conversation` with tools) and the same
    :class:`~llm_connect.types.RunConfig`; both responses go to the judge
    unmodified. :meth:`grade_with` grades one pair with several judges while
    calling each adapter only once.

    Example::

        grader = PairedGrader(ExactMatchJudge())
        result = grader.grade(baseline, candidate, "What is 2+2?", RunConfig(temperature=0))
    """

    def __init__(self, judge: Judge) -> None:
        self.judge = judge

    def __repr__(self) -> str:
        return f"PairedGrader({self.judge!r})"

    # -- sync ---------------------------------------------------------------

    def run_pair(
        self,
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: Prompt,
        run_config: RunConfig,
    ) -> tuple[LLMResponse, LLMResponse]:
        """Call baseline then candidate with the same prompt and config."""
        baseline = baseline_adapter.complete(prompt, run_config)
        candidate = candidate_adapter.complete(prompt, run_config)
        return baseline, candidate

    def grade(
        self,
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: Prompt,
        run_config: RunConfig,
        *,
        case: Case | None = None,
    ) -> GradingResult:
        """Run both adapters on ``prompt`` and grade the candidate with the judge.

        Judges read the prompt as text (a conversation's transcript); the result
        keeps the conversation (:attr:`GradingResult.conversation`).
        """
        return self.grade_with(
            [self.judge], baseline_adapter, candidate_adapter, prompt, run_config, case=case
        )[0]

    def grade_with(
        self,
        judges: Sequence[Judge],
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: Prompt,
        run_config: RunConfig,
        *,
        case: Case | None = None,
    ) -> list[GradingResult]:
        """One result per judge, from a single call to each adapter.

        A result says ``asks_llm=True`` whenever its judge does (:func:`flag_asks_llm`).
        """
        baseline, candidate = self.run_pair(baseline_adapter, candidate_adapter, prompt, run_config)
        text = prompt_text(prompt)
        return [
            with_conversation(
                flag_asks_llm(j, j.judge(baseline, candidate, prompt=text, run_config=run_config, case=case)),
                prompt,
            )
            for j in judges
        ]

    # -- async --------------------------------------------------------------

    async def arun_pair(
        self,
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: Prompt,
        run_config: RunConfig,
    ) -> tuple[LLMResponse, LLMResponse]:
        """Call both adapters concurrently with the same prompt and config."""
        import asyncio

        baseline, candidate = await asyncio.gather(
            baseline_adapter.acomplete(prompt, run_config),
            candidate_adapter.acomplete(prompt, run_config),
        )
        return baseline, candidate

    async def agrade(
        self,
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: Prompt,
        run_config: RunConfig,
        *,
        case: Case | None = None,
    ) -> GradingResult:
        """Async :meth:`grade`: the two adapter calls run concurrently."""
        results = await self.agrade_with(
            [self.judge], baseline_adapter, candidate_adapter, prompt, run_config, case=case
        )
        return results[0]

    async def agrade_with(
        self,
        judges: Sequence[Judge],
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: Prompt,
        run_config: RunConfig,
        *,
        case: Case | None = None,
    ) -> list[GradingResult]:
        """Async :meth:`grade_with`: adapters concurrently, then each judge."""
        import asyncio

        baseline, candidate = await self.arun_pair(baseline_adapter, candidate_adapter, prompt, run_config)
        text = prompt_text(prompt)
        results = await asyncio.gather(
            *(
                judge_async(j, baseline, candidate, prompt=text, run_config=run_config, case=case)
                for j in judges
            )
        )
        return [with_conversation(r, prompt) for r in results]
