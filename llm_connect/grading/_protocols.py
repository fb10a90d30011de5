"""The judge and grader protocols, and the per-case context judges may read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from llm_connect.types import LLMResponse, RunConfig
from llm_connect.values import Case

if TYPE_CHECKING:
    from llm_connect.adapters import LLMAdapter
    from llm_connect.grading._results import GradingResult

__all__ = ["BaselineGrader", "BatchJudge", "Case", "Judge", "JudgePair"]


@dataclass(frozen=True)
class JudgePair:
    """One pair to judge, as handed to :meth:`BatchJudge.judge_many`."""

    baseline_response: LLMResponse
    candidate_response: LLMResponse
    prompt: str
    run_config: RunConfig
    case: Case | None = None


@runtime_checkable
class Judge(Protocol):
    """Grades a candidate response against a baseline response.

    ``case`` is optional context (expected answers, schemas) for rule-based
    judges; judges that do not need it ignore it.

    ``asks_llm`` says whether the judge asks an LLM for its grade (an LLM judge,
    a safety judge with an LLM safety judge); each result it builds carries the
    same flag (``GradingResult.asks_llm``), and routing uses such grades only
    after a passing calibration. A plugin judge that does not declare it is
    treated as asking an LLM (see ``judge_asks_llm`` in the registry).
    """

    grader_id: str
    asks_llm: bool

    def judge(
        self,
        baseline_response: LLMResponse,
        candidate_response: LLMResponse,
        *,
        prompt: str,
        run_config: RunConfig,
        case: Case | None = None,
    ) -> GradingResult:
        """Return the grade of ``candidate_response`` against ``baseline_response``."""
        ...

    async def ajudge(
        self,
        baseline_response: LLMResponse,
        candidate_response: LLMResponse,
        *,
        prompt: str,
        run_config: RunConfig,
        case: Case | None = None,
    ) -> GradingResult:
        """Async form of :meth:`judge`."""
        ...


@runtime_checkable
class BatchJudge(Protocol):
    """A judge that grades many pairs at once more cheaply than one by one
    (the embedding judge embeds all texts of a batch in one call)."""

    grader_id: str
    asks_llm: bool

    def judge_many(self, pairs: Sequence[JudgePair]) -> list[GradingResult]:
        """Grade every pair, returning results in the same order."""
        ...


@runtime_checkable
class BaselineGrader(Protocol):
    """Runs both adapters on one prompt and grades the candidate against the baseline."""

    def grade(
        self,
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: str,
        run_config: RunConfig,
    ) -> GradingResult:
        """Call both adapters with the same prompt and config, then judge."""
        ...


def judge_spec(name: str, /, *, asks_llm: bool, **args: Any) -> dict[str, Any]:
    """The ``details["judge_spec"]`` value that rebuilds a judge: name, arguments, and
    whether the judge asks an LLM (``{"name": ..., "args": {...}, "asks_llm": bool}``).

    ``build_judge`` reads ``name`` and ``args`` only; ``asks_llm`` is a record of
    what the judge was, for readers of stored grades (calibration, routing).
    """
    return {"name": name, "args": dict(args), "asks_llm": bool(asks_llm)}


def spec_args(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Drop ``None`` values from judge arguments before they go into a spec."""
    return {k: v for k, v in mapping.items() if v is not None}
