"""The typed result of a stability analysis: frozen dataclasses with ``to_dict``/``from_dict``.

Serialised reports carry ``version`` (:data:`REPORT_VERSION`): do not rename,
remove or change the meaning of a field without bumping it. Every figure is
computed once, by the analysis; printers read these records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from llm_connect.errors import ConfigurationError
from llm_connect.stability._config import StabilityConfig, Variance, Verdict
from llm_connect.types import LLMResponse, ToolCall

__all__ = [
    "REPORT_VERSION",
    "AgreementRates",
    "ClaimSummary",
    "ClaimVariance",
    "Fingerprint",
    "MetricResult",
    "Recommendation",
    "RunRecord",
    "Severity",
    "StabilityReport",
]

REPORT_VERSION = 1
"""Version of :meth:`StabilityReport.to_dict`'s layout."""

ClaimVariance = Literal["NONE", "LOW", "HIGH"]
"""How unpredictably runs make risky claims (NONE: no run does)."""
Severity = Literal["CRITICAL", "HIGH", "MEDIUM", "LOW"]
"""How serious a fingerprint is; fingerprints are listed most serious first."""


@dataclass(frozen=True)
class MetricResult:
    """One scored metric: consistency in 0..1, its variance class and its weight."""

    name: str
    """``semantic``, ``tool``, ``structural`` or ``length``."""
    score: float
    """Consistency in 0..1 (1: every run the same)."""
    variance: Variance
    """LOW, MEDIUM or HIGH per the config's thresholds (for length: of the CV)."""
    weight: float
    """Its weight in the overall score."""
    details: dict[str, Any] = field(default_factory=dict)
    """Metric-specific figures (JSON values): the CV, the tool usage rate, structure counts..."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "name": self.name,
            "score": self.score,
            "variance": self.variance,
            "weight": self.weight,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricResult:
        """Rebuild from :meth:`to_dict` output."""
        return cls(
            data["name"], data["score"], data["variance"], data["weight"], dict(data.get("details", {}))
        )


@dataclass(frozen=True)
class AgreementRates:
    """Exact agreement across the successful runs."""

    raw_text: float
    """Share of runs whose text equals the most common text, character for character."""
    parsed_answer: float
    """Share of runs whose parsed answer equals the most common one: canonical JSON when the
    text is JSON, else the case-folded text with whitespace collapsed; plus the tool-call multiset."""
    distinct_texts: int
    """Number of different raw texts."""
    distinct_answers: int
    """Number of different parsed answers."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "raw_text": self.raw_text,
            "parsed_answer": self.parsed_answer,
            "distinct_texts": self.distinct_texts,
            "distinct_answers": self.distinct_answers,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgreementRates:
        """Rebuild from :meth:`to_dict` output."""
        return cls(data["raw_text"], data["parsed_answer"], data["distinct_texts"], data["distinct_answers"])


@dataclass(frozen=True)
class ClaimSummary:
    """Risky claims across the successful runs (each run's counts are on its :class:`RunRecord`)."""

    totals: dict[str, int]
    """Matches per category over all runs: guarantees, false_authority, specific_claims, overconfidence."""
    runs_with_claims: int
    """Runs holding at least one claim of any category."""
    share: float
    """``runs_with_claims`` over the successful runs."""
    variance: ClaimVariance
    """NONE, LOW (consistently present or absent) or HIGH (unpredictable)."""
    examples: tuple[str, ...] = ()
    """Up to five distinct matched phrases."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "totals": dict(self.totals),
            "runs_with_claims": self.runs_with_claims,
            "share": self.share,
            "variance": self.variance,
            "examples": list(self.examples),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClaimSummary:
        """Rebuild from :meth:`to_dict` output."""
        return cls(
            dict(data["totals"]),
            data["runs_with_claims"],
            data["share"],
            data["variance"],
            tuple(data.get("examples", ())),
        )


@dataclass(frozen=True)
class Recommendation:
    """A concrete fix for a fingerprint."""

    title: str
    """What to do, in a few words."""
    category: Literal["prompt", "code", "config"]
    """Where the fix goes: the prompt, the calling code, or the request settings."""
    action: str
    """The fix, in a sentence or two."""
    example: str = ""
    """An example of it (prompt text, code), possibly empty."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "title": self.title,
            "category": self.category,
            "action": self.action,
            "example": self.example,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Recommendation:
        """Rebuild from :meth:`to_dict` output."""
        return cls(data["title"], data["category"], data["action"], data.get("example", ""))


@dataclass(frozen=True)
class Fingerprint:
    """A root cause of instability, with the evidence and its recommendations."""

    name: str
    """One of :data:`~llm_connect.stability.FINGERPRINTS` (``NONDETERMINISTIC_TOOL_ROUTING``...)."""
    severity: Severity
    """CRITICAL, HIGH, MEDIUM or LOW."""
    description: str
    """What the fingerprint means."""
    evidence: str
    """The figures that triggered it in this analysis."""
    recommendations: tuple[Recommendation, ...] = ()
    """Concrete fixes, most effective first."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "name": self.name,
            "severity": self.severity,
            "description": self.description,
            "evidence": self.evidence,
            "recommendations": [r.to_dict() for r in self.recommendations],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fingerprint:
        """Rebuild from :meth:`to_dict` output."""
        return cls(
            data["name"],
            data["severity"],
            data["description"],
            data["evidence"],
            tuple(Recommendation.from_dict(r) for r in data.get("recommendations", ())),
        )


@dataclass(frozen=True)
class RunRecord:
    """One run: the response (text, tool calls, latency, model served), or why it failed."""

    index: int
    """0-based run number."""
    response: LLMResponse | None
    """The model's answer; ``None`` when the run failed."""
    error: str | None = None
    """``"ErrorClass: message"`` when the run failed after the adapter's retries."""
    started_s: float | None = None
    """Seconds from the analysis's start to this run's call."""
    finished_s: float | None = None
    """Seconds from the analysis's start to the answer (or the failure)."""
    structure: str | None = None
    """The detected structure of the text (``json``, ``code``, ``markdown``, ``list``, ``text``)."""
    length_words: int | None = None
    """Words of the answer text (the text plus one line per tool call)."""
    claims: dict[str, int] | None = None
    """Risky-claim matches per category."""

    @property
    def ok(self) -> bool:
        """Whether the run produced a response."""
        return self.response is not None

    @property
    def text(self) -> str:
        """The response text (``""`` for a failed run)."""
        return "" if self.response is None else self.response.text

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The response's tool calls (none for a failed run)."""
        return () if self.response is None else self.response.tool_calls

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (the response as :meth:`LLMResponse.to_dict`)."""
        return {
            "index": self.index,
            "ok": self.ok,
            "response": None if self.response is None else self.response.to_dict(),
            "error": self.error,
            "started_s": self.started_s,
            "finished_s": self.finished_s,
            "structure": self.structure,
            "length_words": self.length_words,
            "claims": None if self.claims is None else dict(self.claims),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """Rebuild from :meth:`to_dict` output."""
        response = data.get("response")
        claims = data.get("claims")
        return cls(
            index=data["index"],
            response=None if response is None else LLMResponse.from_dict(response),
            error=data.get("error"),
            started_s=data.get("started_s"),
            finished_s=data.get("finished_s"),
            structure=data.get("structure"),
            length_words=data.get("length_words"),
            claims=None if claims is None else dict(claims),
        )


@dataclass(frozen=True)
class StabilityReport:
    """What :func:`~llm_connect.stability.analyze` found: verdict, score, metrics,
    fingerprints with recommendations, claims, agreement rates and every run."""

    adapter_id: str
    """The model analysed, as asked for (``openai:gpt-4o-mini``)."""
    query: dict[str, Any]
    """The conversation sent every run (``Conversation.to_dict()``: messages, tools, tool_choice)."""
    query_digest: str
    """SHA-256 of the conversation (``Conversation.digest``)."""
    run_config: dict[str, Any]
    """The run config (``RunConfig.to_dict()``: temperature, max tokens..., no secrets)."""
    runs: tuple[RunRecord, ...]
    """Every run in index order, failed ones included."""
    score: float
    """The weighted overall score in 0..1."""
    verdict: Verdict
    """SAFE, RISKY or DO_NOT_SHIP."""
    semantic: MetricResult
    """Semantic consistency."""
    tool: MetricResult
    """Tool consistency."""
    structural: MetricResult
    """Structural consistency."""
    length: MetricResult
    """Length consistency."""
    agreement: AgreementRates
    """Exact agreement of raw texts and parsed answers."""
    claims: ClaimSummary
    """Risky claims across the runs."""
    fingerprints: tuple[Fingerprint, ...]
    """Root causes found, most serious first (empty when stable)."""
    config: StabilityConfig
    """The weights and thresholds used."""
    embedder_id: str
    """The embedding model of the semantic metric."""
    min_successful_runs: int
    """The fewest successful runs the analysis accepted."""
    elapsed_s: float
    """Wall time of the analysis (calls and metrics)."""
    created_at: str
    """When the analysis finished (ISO 8601, UTC)."""
    version: int = REPORT_VERSION
    """Layout version of the serialised form."""

    # -- derived ------------------------------------------------------------------

    @property
    def metrics(self) -> tuple[MetricResult, ...]:
        """The four metrics: semantic, tool, structural, length."""
        return (self.semantic, self.tool, self.structural, self.length)

    @property
    def runs_requested(self) -> int:
        """How many runs were asked for."""
        return len(self.runs)

    @property
    def runs_succeeded(self) -> int:
        """Runs that produced a response."""
        return sum(1 for r in self.runs if r.ok)

    @property
    def runs_failed(self) -> int:
        """Runs that failed after the adapter's retries."""
        return sum(1 for r in self.runs if not r.ok)

    @property
    def fingerprint_names(self) -> tuple[str, ...]:
        """The fingerprints' names, most serious first."""
        return tuple(f.name for f in self.fingerprints)

    @property
    def recommendations(self) -> tuple[Recommendation, ...]:
        """Every fingerprint's recommendations, in fingerprint order, each title once."""
        seen: set[str] = set()
        out: list[Recommendation] = []
        for fp in self.fingerprints:
            for rec in fp.recommendations:
                if rec.title not in seen:
                    seen.add(rec.title)
                    out.append(rec)
        return tuple(out)

    # -- serialisation ----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form with ``version``; :meth:`from_dict` reverses it."""
        return {
            "version": self.version,
            "adapter_id": self.adapter_id,
            "verdict": self.verdict,
            "score": self.score,
            "runs_requested": self.runs_requested,
            "runs_succeeded": self.runs_succeeded,
            "runs_failed": self.runs_failed,
            "min_successful_runs": self.min_successful_runs,
            "metrics": {m.name: m.to_dict() for m in self.metrics},
            "agreement": self.agreement.to_dict(),
            "claims": self.claims.to_dict(),
            "fingerprints": [f.to_dict() for f in self.fingerprints],
            "query": self.query,
            "query_digest": self.query_digest,
            "run_config": self.run_config,
            "config": self.config.to_dict(),
            "embedder_id": self.embedder_id,
            "elapsed_s": self.elapsed_s,
            "created_at": self.created_at,
            "runs": [r.to_dict() for r in self.runs],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StabilityReport:
        """Rebuild a report from :meth:`to_dict` output.

        Raises:
            ConfigurationError: the layout version is not one this code reads.
        """
        version = data.get("version")
        if version != REPORT_VERSION:
            raise ConfigurationError(
                f"stability report version {version!r} is not supported (this code reads {REPORT_VERSION})"
            )
        metrics = data["metrics"]
        return cls(
            adapter_id=data["adapter_id"],
            query=dict(data["query"]),
            query_digest=data["query_digest"],
            run_config=dict(data["run_config"]),
            runs=tuple(RunRecord.from_dict(r) for r in data["runs"]),
            score=data["score"],
            verdict=data["verdict"],
            semantic=MetricResult.from_dict(metrics["semantic"]),
            tool=MetricResult.from_dict(metrics["tool"]),
            structural=MetricResult.from_dict(metrics["structural"]),
            length=MetricResult.from_dict(metrics["length"]),
            agreement=AgreementRates.from_dict(data["agreement"]),
            claims=ClaimSummary.from_dict(data["claims"]),
            fingerprints=tuple(Fingerprint.from_dict(f) for f in data["fingerprints"]),
            config=StabilityConfig.from_dict(data["config"]),
            embedder_id=data["embedder_id"],
            min_successful_runs=data["min_successful_runs"],
            elapsed_s=data["elapsed_s"],
            created_at=data["created_at"],
            version=version,
        )
