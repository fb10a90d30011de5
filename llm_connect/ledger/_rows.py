"""Typed rows the ledger returns (and the item type it accepts for batch writes)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from llm_connect.types import LLMResponse, RunConfig, ToolCall, Usage
from llm_connect.values import GradingResult

__all__ = [
    "CalibrationRow",
    "FailureRow",
    "GradeRow",
    "GradeTotals",
    "RecordItem",
    "RunRow",
    "StabilityResponseRow",
    "StabilityRow",
    "SummaryRow",
]


@dataclass(frozen=True, slots=True, init=False)
class RecordItem:
    """One grade to write with :meth:`QualityLedger.record_batch`, with its own metadata."""

    result: GradingResult
    """The validated grade."""
    task: str
    """The task the prompt belongs to (routing decides per task)."""
    run_id: str | None = None
    """The run that produced it; with ``case_id`` it makes the grade idempotent."""
    case_id: str | None = None
    """The suite case it grades."""
    tags: Sequence[str] = ()
    """Free-form labels of the case."""
    baseline_adapter_id: str | None = None
    """The baseline adapter's id; defaults to ``provider:model`` of the baseline response."""
    candidate_adapter_id: str | None = None
    """The candidate adapter's id; defaults to ``provider:model`` of the candidate response."""
    metadata: Mapping[str, Any] | None = None
    """The suite case's ``metadata`` object, stored as JSON with the grade."""

    def __init__(
        self,
        result: GradingResult,
        task: str,
        run_id: str | None = None,
        case_id: str | None = None,
        tags: Sequence[str] = (),
        baseline_adapter_id: str | None = None,
        candidate_adapter_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        # The dataclass's own __init__ of a frozen class goes through object.__setattr__ by name
        # for every field; the slots' setters do the same without the lookups (one item per
        # grade on the ledger's write path, ~40% faster).
        _SET_RESULT(self, result)
        _SET_TASK(self, task)
        _SET_RUN_ID(self, run_id)
        _SET_CASE_ID(self, case_id)
        _SET_TAGS(self, tags)
        _SET_BASELINE_ADAPTER_ID(self, baseline_adapter_id)
        _SET_CANDIDATE_ADAPTER_ID(self, candidate_adapter_id)
        _SET_METADATA(self, metadata)


def _slot_setter(name: str) -> Callable[[RecordItem, Any], None]:
    """The setter of a slot of :class:`RecordItem` (what ``object.__setattr__`` ends up calling)."""
    setter: Callable[[RecordItem, Any], None] = vars(RecordItem)[name].__set__
    return setter


_SET_RESULT = _slot_setter("result")
_SET_TASK = _slot_setter("task")
_SET_RUN_ID = _slot_setter("run_id")
_SET_CASE_ID = _slot_setter("case_id")
_SET_TAGS = _slot_setter("tags")
_SET_BASELINE_ADAPTER_ID = _slot_setter("baseline_adapter_id")
_SET_CANDIDATE_ADAPTER_ID = _slot_setter("candidate_adapter_id")
_SET_METADATA = _slot_setter("metadata")


@dataclass(frozen=True)
class GradeRow:
    """One stored grade, as :meth:`QualityLedger.results` yields it.

    Text fields are ``None`` in a ledger opened with ``store_text=False``; the
    SHA-256 digests are always present.
    """

    id: int
    created_at: datetime
    run_id: str | None
    case_id: str | None
    task: str
    tags: tuple[str, ...]
    quality_score: float
    grader_id: str
    notes: str
    details: Mapping[str, Any]
    prompt: str | None
    prompt_sha256: str
    system_prompt_sha256: str | None
    baseline_adapter_id: str
    baseline_provider: str
    baseline_model: str
    baseline_text: str | None
    baseline_text_sha256: str
    baseline_latency_ms: float | None
    baseline_prompt_tokens: int | None
    baseline_completion_tokens: int | None
    baseline_cost_usd: float | None
    baseline_finish_reason: str | None
    baseline_tool_calls: tuple[Mapping[str, str], ...]
    candidate_adapter_id: str
    candidate_provider: str
    candidate_model: str
    candidate_text: str | None
    candidate_text_sha256: str
    candidate_latency_ms: float | None
    candidate_prompt_tokens: int | None
    candidate_completion_tokens: int | None
    candidate_cost_usd: float | None
    candidate_finish_reason: str | None
    candidate_tool_calls: tuple[Mapping[str, str], ...]
    run_config: Mapping[str, Any] | None
    llm_connect_version: str
    baseline_served_model: str | None = None
    """The model name the baseline's server reported (``baseline_model`` is the one asked for)."""
    baseline_endpoint: str | None = None
    """The baseline's server (base URL without credentials); ``None`` offline."""
    candidate_served_model: str | None = None
    """The model name the candidate's server reported, e.g. a dated snapshot."""
    candidate_endpoint: str | None = None
    """The candidate's server (base URL without credentials); ``None`` offline."""
    metadata: Mapping[str, Any] | None = None
    """The suite case's ``metadata`` object (``None`` when the case had none)."""
    asks_llm: bool = False
    """Whether the judge asked an LLM for this grade."""
    score_delta: float | None = None
    """Candidate score minus baseline score, for judges that score each response on its own."""

    def __reduce__(self) -> tuple[Any, ...]:
        # The read-only views (details, run_config, tool calls) go as plain dicts and are
        # frozen again on the way back, so pickle and copy.deepcopy work.
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        values["details"] = dict(self.details)
        values["run_config"] = None if self.run_config is None else dict(self.run_config)
        values["metadata"] = None if self.metadata is None else dict(self.metadata)
        for name in ("baseline_tool_calls", "candidate_tool_calls"):
            values[name] = tuple(dict(call) for call in values[name])
        return (grade_row, (values,))

    def _response(self, side: str) -> LLMResponse:
        prompt_tokens = getattr(self, f"{side}_prompt_tokens")
        completion_tokens = getattr(self, f"{side}_completion_tokens")
        usage = (
            None
            if prompt_tokens is None and completion_tokens is None
            else Usage(prompt_tokens or 0, completion_tokens or 0)
        )
        asked = getattr(self, f"{side}_model")
        served = getattr(self, f"{side}_served_model")
        return LLMResponse(
            text=getattr(self, f"{side}_text") or "",
            model=served or asked,
            provider=getattr(self, f"{side}_provider"),
            latency_ms=getattr(self, f"{side}_latency_ms"),
            usage=usage,
            cost_usd=getattr(self, f"{side}_cost_usd"),
            tool_calls=tuple(
                ToolCall(t["name"], t["arguments"]) for t in getattr(self, f"{side}_tool_calls")
            ),
            finish_reason=getattr(self, f"{side}_finish_reason"),
            requested_model=asked,
            endpoint=getattr(self, f"{side}_endpoint"),
        )

    @property
    def baseline_response(self) -> LLMResponse:
        """The baseline side as an :class:`LLMResponse` (empty text when texts were not stored)."""
        return self._response("baseline")

    @property
    def candidate_response(self) -> LLMResponse:
        """The candidate side as an :class:`LLMResponse` (empty text when texts were not stored)."""
        return self._response("candidate")

    def to_result(self) -> GradingResult:
        """The :class:`GradingResult` this row was recorded from.

        Exact for ledgers that store texts; with ``store_text=False`` the
        prompt and response texts come back empty (only digests were kept).
        """
        return GradingResult(
            quality_score=self.quality_score,
            notes=self.notes,
            grader_id=self.grader_id,
            baseline_response=self.baseline_response,
            candidate_response=self.candidate_response,
            details=dict(self.details),
            prompt=self.prompt or "",
            run_config=None if self.run_config is None else RunConfig.from_dict(self.run_config),
            asks_llm=self.asks_llm,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (timestamps in ISO 8601), as ``export`` writes it."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, tuple):
                value = [dict(v) if isinstance(v, Mapping) else v for v in value]
            out[name] = value
        return out


def freeze_json(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """``value`` read-only at the top level; nested values stay plain JSON types."""
    # Read-only at the top level; nested values stay plain JSON types.
    return MappingProxyType(dict(value))


def _tool_calls(value: Sequence[Mapping[str, str]] | None) -> tuple[Mapping[str, str], ...]:
    return tuple(MappingProxyType(dict(v)) for v in value or ())


def grade_row(mapping: Mapping[Any, Any]) -> GradeRow:
    """A :class:`GradeRow` from a selected ``grades`` row mapping."""
    values = dict(mapping)
    values["tags"] = tuple(values.get("tags") or ())
    values["details"] = freeze_json(values.get("details") or {})
    values["run_config"] = None if values.get("run_config") is None else freeze_json(values["run_config"])
    values["baseline_tool_calls"] = _tool_calls(values.get("baseline_tool_calls"))
    values["candidate_tool_calls"] = _tool_calls(values.get("candidate_tool_calls"))
    meta = values.get("metadata")
    values["metadata"] = None if meta is None else freeze_json(meta)
    values["asks_llm"] = bool(values.get("asks_llm"))
    return GradeRow(**values)


@dataclass(frozen=True)
class SummaryRow:
    """Aggregate of the grades of one (task, baseline model, candidate model, grader id).

    ``std``, ``ci_low`` and ``ci_high`` are ``None`` when ``n < 2``. The interval
    is a two-sided Student t-interval at the requested confidence (see
    :mod:`llm_connect.ledger._stats`). Mean costs and latencies average the
    grades where the value is known (``None`` when it never is).
    """

    task: str
    baseline_model: str
    candidate_model: str
    grader_id: str
    n: int
    mean: float
    std: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    baseline_mean_cost_usd: float | None
    candidate_mean_cost_usd: float | None
    baseline_mean_latency_ms: float | None
    candidate_mean_latency_ms: float | None
    first_at: datetime
    last_at: datetime


@dataclass(frozen=True, slots=True)
class GradeTotals:
    """Running totals of the grades of one (task, baseline model, grader id, candidate model).

    What :meth:`QualityLedger.grade_totals` returns: sums and counts, read from the
    ``grade_stats`` table in one query however many grades there are. Means of
    costs and latencies are ``None`` when the value was never recorded.
    """

    task: str
    baseline_model: str
    grader_id: str
    candidate_model: str
    n: int
    """Number of grades."""
    sum_quality: float
    """Σ quality_score."""
    sum_quality_sq: float
    """Σ quality_score²."""
    candidate_mean_cost_usd: float | None
    candidate_cost_n: int
    candidate_mean_latency_ms: float | None
    candidate_latency_n: int
    baseline_mean_cost_usd: float | None
    baseline_cost_n: int
    baseline_mean_latency_ms: float | None
    baseline_latency_n: int
    asks_llm: bool
    """Whether any of these grades came from a judge that asks an LLM."""


@dataclass(frozen=True, slots=True)
class CaseSeries:
    """The per-case totals of one (task, baseline model, grader id, candidate model).

    What :meth:`QualityLedger.case_series` returns: one entry per distinct case
    (see ``case_stats`` in ``docs/ledger.md``), in the order the cases were
    first graded. A case's value is ``sum_quality[i] / grades[i]``.
    """

    task: str
    baseline_model: str
    grader_id: str
    candidate_model: str
    grades: tuple[int, ...]
    """Grades per case."""
    sum_quality: tuple[float, ...]
    """Σ quality_score per case."""
    delta_n: tuple[int, ...]
    """Grades per case that carry a ``score_delta`` (single-response scorers)."""
    delta_sum: tuple[float, ...]
    """Σ score_delta per case."""
    first_ids: tuple[int, ...] = ()
    """Per case, the id of its first grade (ascending: the arrival order)."""

    @property
    def n_cases(self) -> int:
        """Distinct cases."""
        return len(self.grades)

    @property
    def n_grades(self) -> int:
        """Grades over all cases."""
        return sum(self.grades)


@dataclass(frozen=True)
class FailureRow:
    """A case that could not be graded in a run."""

    id: int
    created_at: datetime
    run_id: str
    case_id: str
    task: str
    stage: str
    error_type: str
    message: str
    adapter_id: str | None


@dataclass(frozen=True)
class RunRow:
    """A grading run as :meth:`QualityLedger.run` returns it."""

    run_id: str
    suite: str | None
    config: Mapping[str, Any] | None
    status: str
    started_at: datetime
    finished_at: datetime | None
    llm_connect_version: str


@dataclass(frozen=True)
class CalibrationRow:
    """A stored calibration of an LLM judge (figures as the calibration code computed them)."""

    id: int
    created_at: datetime
    judge_grader_id: str
    references: tuple[str, ...]
    task: str | None
    figures: Mapping[str, Any] = field(default_factory=dict)
    verdict: str = ""
    passed: bool = False


@dataclass(frozen=True)
class StabilityRow:
    """One stored stability analysis (``stability_runs``)."""

    id: int
    created_at: datetime
    task: str
    """The task the analysis speaks for (routing's ``min_stability`` reads it per task)."""
    model: str
    """The model as asked for."""
    adapter_id: str
    endpoint: str | None
    prompt_sha256: str
    """Digest of the request analysed (a conversation's digest, or the prompt's SHA-256)."""
    runs: int
    successful_runs: int
    overall_score: float
    verdict: str
    """``SAFE``, ``RISKY`` or ``DO_NOT_SHIP``."""
    report: Mapping[str, Any]
    """The full report (``StabilityReport.to_dict()``)."""
    llm_connect_version: str


@dataclass(frozen=True)
class StabilityResponseRow:
    """One run's answer (or error) of a stored stability analysis (``stability_responses``)."""

    id: int
    stability_run_id: int
    run_index: int
    text: str | None
    tool_calls: Sequence[Mapping[str, Any]] | None
    latency_ms: float | None
    served_model: str | None
    error: str | None
