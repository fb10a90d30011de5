"""Typed rows the ledger returns (and the item type it accepts for batch writes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from llm_connect.types import LLMResponse, RunConfig, ToolCall, Usage
from llm_connect.values import GradingResult


@dataclass(frozen=True, slots=True)
class RecordItem:
    """One grade to write with :meth:`QualityLedger.record_batch`, with its own metadata."""

    result: GradingResult
    task: str
    run_id: str | None = None
    case_id: str | None = None
    tags: Sequence[str] = ()
    baseline_adapter_id: str | None = None
    candidate_adapter_id: str | None = None
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class GradeRow:
    """One stored grade, as :meth:`QualityLedger.results` yields it."""

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
    baseline_endpoint: str | None = None
    candidate_served_model: str | None = None
    candidate_endpoint: str | None = None
    metadata: Mapping[str, Any] | None = None
    asks_llm: bool = False
    score_delta: float | None = None

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
        v = {name: getattr(self, f"{side}_{name}") for name in _SIDE.split()}
        tokens = (v["prompt_tokens"], v["completion_tokens"])
        return LLMResponse(
            text=v["text"] or "",
            model=v["served_model"] or v["model"],
            provider=v["provider"],
            latency_ms=v["latency_ms"],
            usage=None if tokens == (None, None) else Usage(tokens[0] or 0, tokens[1] or 0),
            cost_usd=v["cost_usd"],
            tool_calls=tuple(ToolCall(t["name"], t["arguments"]) for t in v["tool_calls"]),
            finish_reason=v["finish_reason"],
            requested_model=v["model"],
            endpoint=v["endpoint"],
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
        """The :class:`GradingResult` this row was recorded from."""
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


_SIDE = "text served_model model provider latency_ms prompt_tokens completion_tokens cost_usd tool_calls"
_SIDE += " finish_reason endpoint"  # the columns of one side (baseline_*, candidate_*) a response reads


def freeze_json(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """``value`` read-only at the top level; nested values stay plain JSON types."""
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
    """Descriptive figures of the grades of one (task, baseline model, candidate model, grader id).

    ``n`` counts grades and ``cases`` the distinct cases they grade (a case graded in 5 runs is 5
    grades, 1 case); ``mean`` and ``std`` (sample standard deviation, ``None`` under 2 grades) are
    over grades. No interval: grades of one case are not independent, so an interval over grades
    is too narrow. The bounds that decide routing come from :mod:`llm_connect.routing`
    (``Router.decide``, ``gather``) and ``llm-connect ledger summary``, which count cases and are
    anytime-valid.
    """

    task: str
    baseline_model: str
    candidate_model: str
    grader_id: str
    n: int
    cases: int
    mean: float
    std: float | None
    baseline_mean_cost_usd: float | None
    candidate_mean_cost_usd: float | None
    baseline_mean_latency_ms: float | None
    candidate_mean_latency_ms: float | None
    first_at: datetime
    last_at: datetime


@dataclass(frozen=True, slots=True)
class GradeTotals:
    """Running totals of the grades of one (task, baseline model, grader id, candidate model)."""

    task: str
    baseline_model: str
    grader_id: str
    candidate_model: str
    n: int
    sum_quality: float
    sum_quality_sq: float
    candidate_mean_cost_usd: float | None
    candidate_cost_n: int
    candidate_mean_latency_ms: float | None
    candidate_latency_n: int
    baseline_mean_cost_usd: float | None
    baseline_cost_n: int
    baseline_mean_latency_ms: float | None
    baseline_latency_n: int
    asks_llm: bool


@dataclass(frozen=True, slots=True)
class CaseSeries:
    """The per-case totals of one (task, baseline model, grader id, candidate model)."""

    task: str
    baseline_model: str
    grader_id: str
    candidate_model: str
    grades: tuple[int, ...]
    sum_quality: tuple[float, ...]
    delta_n: tuple[int, ...]
    delta_sum: tuple[float, ...]
    first_ids: tuple[int, ...] = ()

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
    model: str
    adapter_id: str
    endpoint: str | None
    prompt_sha256: str
    runs: int
    successful_runs: int
    overall_score: float
    verdict: str
    report: Mapping[str, Any]
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
