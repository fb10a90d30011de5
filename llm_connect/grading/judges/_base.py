"""BaseJudge: ``judge``, ``ajudge`` and the one place a judge's :class:`GradingResult` is built.

A judge module holds its scoring logic only. A judge subclasses :class:`BaseJudge`, sets
``grader_id`` and ``asks_llm``, and writes what it scores one pair to, a :class:`Scored`
(score, notes, details):

- :meth:`BaseJudge.score`, synchronous. ``ajudge`` then runs ``judge`` on the event loop (after
  one yield) or, with ``in_thread = True`` (embeddings, scorers), in a worker thread; a
  subclass that overrides ``judge`` is seen by ``ajudge`` too.
- :meth:`BaseJudge.ascore`, asynchronous (a judge that asks a model). ``ajudge`` awaits it;
  ``judge`` runs it on an event loop of its own unless the judge writes a synchronous
  :meth:`~BaseJudge.score` as well (the ``llm`` and ``pairwise`` judges call their adapter's
  ``complete`` there).

Example::

    class LengthRatioJudge(BaseJudge):
        grader_id = "length-ratio"
        asks_llm = False

        def score(self, pair: JudgePair) -> Scored:
            b, c = len(pair.baseline_response.text), len(pair.candidate_response.text)
            return Scored(min(1.0, c / b) if b else 1.0, f"{c} vs {b} characters")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from llm_connect.grading._protocols import Case, JudgePair
from llm_connect.grading._results import GradingResult
from llm_connect.grading.judges._registry import judge_asks_llm
from llm_connect.types import LLMResponse, RunConfig

__all__ = ["BaseJudge", "Scored"]

T = TypeVar("T")


@dataclass(frozen=True)
class Scored:
    """What a judge's scoring logic gives for one pair; :class:`BaseJudge` makes it a grade.

    ``score`` is validated when the grade is built: outside 0.0..1.0, NaN, a boolean or a
    string raises :class:`~llm_connect.errors.GradingValidationError` (a ``ValueError``), as
    every ``GradingResult`` does. ``details`` must be JSON-serialisable.
    """

    score: float
    """The candidate's quality relative to the baseline, 0.0..1.0."""
    notes: str
    """One line a person reads: why this score."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """Machine-readable evidence (``judge_spec`` among it, for a judge the registry rebuilds)."""


class BaseJudge:
    """Base of a judge (:class:`~llm_connect.grading.Judge`): owns ``judge``, ``ajudge`` and
    the :class:`GradingResult`; a subclass writes :meth:`score` and/or :meth:`ascore` only.

    A subclass sets ``grader_id`` and declares ``asks_llm`` (a judge that declares none counts
    as asking an LLM, as the registry treats any judge). Every result carries the judge's
    ``grader_id`` and ``asks_llm``, the pair's two responses, prompt and run config, and the
    :class:`Scored` score, notes and details.
    """

    grader_id: str
    """Names the judge in every grade (e.g. ``exact``, ``llm:openai:gpt-4o-mini:rubric-v1``)."""
    asks_llm: bool
    """Whether an LLM gives the grade (routing then waits for a passing calibration)."""
    in_thread: ClassVar[bool] = False
    """Whether :meth:`ajudge` runs the synchronous :meth:`judge` in a worker thread (scoring
    that takes a while) rather than on the event loop. Ignored when :meth:`ascore` is written."""

    def score(self, pair: JudgePair) -> Scored:
        """Score one pair. A judge writes this, :meth:`ascore`, or both.

        Here (when only :meth:`ascore` is written): :meth:`ascore` on an event loop of this
        call's own (in a worker thread when this thread already runs one).
        """
        if not self._writes_ascore():
            raise NotImplementedError(f"{type(self).__name__} writes neither score nor ascore")
        import asyncio  # here, not at module level: ``llm-connect --help`` never needs it

        from llm_connect.adapters import run_in_own_loop

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_in_own_loop(self.ascore(pair))
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(run_in_own_loop, self.ascore(pair)).result()

    async def ascore(self, pair: JudgePair) -> Scored:
        """Async :meth:`score`, for a judge whose scoring awaits (a model call).

        Here (when only :meth:`score` is written): :meth:`score` on the event loop after one
        yield, or in a worker thread when ``in_thread`` is set.
        """
        return await self._off_loop(self.score, pair)

    async def _off_loop(self, call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``call(*args, **kwargs)`` in a worker thread (``in_thread``), else after one yield."""
        import asyncio

        if self.in_thread:
            return await asyncio.to_thread(call, *args, **kwargs)
        await asyncio.sleep(0)
        return call(*args, **kwargs)

    def _writes_ascore(self) -> bool:
        return type(self).ascore is not BaseJudge.ascore

    def grading_result(self, scored: Scored, pair: JudgePair) -> GradingResult:
        """The validated grade of ``pair`` (what :meth:`judge` returns); a judge that scores many
        pairs at once (``judge_many``) builds each grade here too."""
        return GradingResult(
            quality_score=scored.score,
            notes=scored.notes,
            grader_id=self.grader_id,
            baseline_response=pair.baseline_response,
            candidate_response=pair.candidate_response,
            details=scored.details,
            prompt=pair.prompt,
            run_config=pair.run_config,
            asks_llm=judge_asks_llm(self),
        )

    def judge(
        self,
        baseline_response: LLMResponse,
        candidate_response: LLMResponse,
        *,
        prompt: str,
        run_config: RunConfig,
        case: Case | None = None,
    ) -> GradingResult:
        """Grade ``candidate_response`` against ``baseline_response`` (:meth:`score`)."""
        pair = JudgePair(baseline_response, candidate_response, prompt, run_config, case)
        return self.grading_result(self.score(pair), pair)

    async def ajudge(
        self,
        baseline_response: LLMResponse,
        candidate_response: LLMResponse,
        *,
        prompt: str,
        run_config: RunConfig,
        case: Case | None = None,
    ) -> GradingResult:
        """Async :meth:`judge`: :meth:`ascore` where the judge writes it, else :meth:`judge` on the
        event loop (after one yield) or, with ``in_thread``, in a worker thread."""
        if self._writes_ascore():
            pair = JudgePair(baseline_response, candidate_response, prompt, run_config, case)
            return self.grading_result(await self.ascore(pair), pair)
        return await self._off_loop(
            self.judge, baseline_response, candidate_response, prompt=prompt, run_config=run_config, case=case
        )
