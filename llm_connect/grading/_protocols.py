"""The judge and grader protocols, and the per-case context judges may read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from llm_connect.types import Conversation, LLMResponse, Prompt, RunConfig

if TYPE_CHECKING:
    from llm_connect.adapters import LLMAdapter
    from llm_connect.grading._results import GradingResult

__all__ = ["BaselineGrader", "BatchJudge", "Case", "Judge", "JudgePair"]


@dataclass(frozen=True)
class Case:
    """One suite case as judges see it.

    Rule-based judges read ``expected`` (a ground-truth string, or a mapping
    with keys such as ``keywords``, ``schema``, ``sections``) from here.
    """

    id: str
    """The case id, unique within its suite."""
    prompt: str
    """The user prompt both sides answer; for a conversation case, its transcript
    (:meth:`Conversation.render`) unless the case gave a ``prompt`` with ``tools``."""
    task: str = "default"
    """The task the case belongs to (routing decides per task)."""
    system_prompt: str | None = None
    """System prompt for both sides, when the case sets one."""
    expected: Any = None
    """Ground truth or rule data for rule-based judges (string or mapping)."""
    tags: tuple[str, ...] = ()
    """Free-form labels stored with each grade."""
    responses: Mapping[str, str] = field(default_factory=dict)
    """Recorded responses by name (``recorded:NAME`` adapters read these)."""
    line: int | None = None
    """The 1-based line (JSONL) or item index (YAML) the case came from."""
    conversation: Conversation | None = None
    """The conversation both sides answer (messages, tools, tool choice), when the case
    gives ``messages`` or ``tools``; what the adapters receive instead of :attr:`prompt`."""
    session: str | None = None
    """The multi-turn session the case is a turn of (cases of one session, in file order)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The case's free-form ``metadata``: a JSON object (string keys; JSON values,
    no NaN), stored with each of its grades. Read-only: a view over a copy of the
    mapping given, nested lists and objects included."""

    def __post_init__(self) -> None:
        if not isinstance(self.metadata, Mapping):
            raise TypeError(f"Case metadata must be a mapping, not {type(self.metadata).__name__}")
        object.__setattr__(self, "metadata", MappingProxyType(_json_copy(self.metadata)))

    @property
    def request(self) -> Prompt:
        """What the adapters are asked: the :attr:`conversation` when there is one, else :attr:`prompt`."""
        return self.prompt if self.conversation is None else self.conversation

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt through __init__: pickle and copy.deepcopy cannot copy the read-only view.
        values = [getattr(self, f.name) for f in fields(self)]
        values[[f.name for f in fields(self)].index("metadata")] = _json_copy(self.metadata)
        return (type(self), tuple(values))


def _json_copy(value: Any) -> Any:
    """A copy of a JSON-like value: mappings become dicts, lists and tuples lists."""
    if isinstance(value, Mapping):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_copy(v) for v in value]
    return value


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
