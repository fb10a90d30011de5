"""GradingResult: one validated grade of a candidate response against a baseline."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from llm_connect._json import strict_dumps
from llm_connect.errors import GradingValidationError
from llm_connect.types import Conversation, LLMResponse, RunConfig

__all__ = ["GradingResult", "validate_quality_score"]


def validate_quality_score(value: object, *, what: str = "quality_score") -> float:
    """Return ``value`` as a float in 0.0..1.0 or raise ``ValueError``.

    Booleans, strings, NaN, infinities and values outside the range are
    rejected (``GradingValidationError``, a ``ValueError``).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GradingValidationError(f"{what} must be a number in 0.0..1.0, not {value!r}")
    score = float(value)
    if math.isnan(score) or math.isinf(score):
        raise GradingValidationError(f"{what} must be finite, not {score!r}")
    if not 0.0 <= score <= 1.0:
        raise GradingValidationError(f"{what} must lie in 0.0..1.0, not {score!r}")
    return score


@dataclass(frozen=True)
class GradingResult:
    """One grade: how well a candidate response holds up against the baseline.

    Construction validates every field, so a ``GradingResult`` that exists is
    valid: the ledger stores it without second-guessing.
    """

    quality_score: float
    """Quality of the candidate relative to the baseline, 0.0 (worst) to 1.0 (as good)."""
    notes: str
    """A short human-readable explanation of the grade."""
    grader_id: str
    """Identifies the judge and its version/options (e.g. ``embedding:all-MiniLM-L6-v2``)."""
    baseline_response: LLMResponse
    """The baseline's response, exactly as the adapter returned it."""
    candidate_response: LLMResponse
    """The candidate's response, exactly as the adapter returned it."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """Judge-specific evidence (JSON-serialisable); ``judge_spec`` rebuilds the judge."""
    prompt: str = ""
    """The prompt both sides answered."""
    run_config: RunConfig | None = None
    """The run config both sides were called with."""
    asks_llm: bool = False
    """Whether the judge asked an LLM for this grade (then routing trusts it only once calibrated).

    Set from the judge's own ``asks_llm`` attribute by :class:`PairedGrader` and the
    batch engine when the judge left it ``False``."""
    conversation: Conversation | None = None
    """The conversation both sides answered (messages, tools, tool choice), when the
    request was one; :attr:`prompt` then holds its transcript. Set by
    :class:`PairedGrader` and the batch engine."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "quality_score", validate_quality_score(self.quality_score))
        if not isinstance(self.grader_id, str) or not self.grader_id.strip():
            raise GradingValidationError(f"grader_id must be a non-empty string, not {self.grader_id!r}")
        if not isinstance(self.notes, str):
            raise GradingValidationError(f"notes must be a string, not {type(self.notes).__name__}")
        if not isinstance(self.prompt, str):
            raise GradingValidationError(f"prompt must be a string, not {type(self.prompt).__name__}")
        for side in ("baseline_response", "candidate_response"):
            if not isinstance(getattr(self, side), LLMResponse):
                raise GradingValidationError(f"{side} must be an LLMResponse")
        if self.run_config is not None and not isinstance(self.run_config, RunConfig):
            raise GradingValidationError("run_config must be a RunConfig or None")
        if self.conversation is not None and not isinstance(self.conversation, Conversation):
            raise GradingValidationError("conversation must be a Conversation or None")
        if not isinstance(self.asks_llm, bool):
            raise GradingValidationError(f"asks_llm must be a bool, not {self.asks_llm!r}")
        if not isinstance(self.details, Mapping):
            raise GradingValidationError("details must be a mapping")
        details = dict(self.details)  # a MappingProxyType (dataclasses.replace) too
        try:
            encoded = strict_dumps(details)
        except (TypeError, ValueError) as exc:
            raise GradingValidationError(f"details must be JSON-serialisable: {exc}") from None
        object.__setattr__(self, "details", MappingProxyType(details))
        # Kept (outside the dataclass fields): the ledger stores this text, the details as validated.
        object.__setattr__(self, "_details_json", encoded)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt (and re-validated) through __init__: ``details`` is a read-only view, which
        # pickle and copy.deepcopy cannot copy as it is.
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["details"] = dict(self.details)
        return (type(self), tuple(values.values()))

    def details_json(self) -> str:
        """``details`` as compact JSON text, encoded when the result was validated.

        This is the text the ledger stores; nested values changed after
        construction are not reflected (and are not re-validated).
        """
        return self._details_json  # type: ignore[attr-defined,no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form; :meth:`from_dict` reverses it."""
        return {
            "quality_score": self.quality_score,
            "notes": self.notes,
            "grader_id": self.grader_id,
            "baseline_response": self.baseline_response.to_dict(),
            "candidate_response": self.candidate_response.to_dict(),
            "details": dict(self.details),
            "prompt": self.prompt,
            "run_config": None if self.run_config is None else self.run_config.to_dict(),
            "asks_llm": self.asks_llm,
            "conversation": None if self.conversation is None else self.conversation.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GradingResult:
        """Rebuild (and re-validate) a result from :meth:`to_dict` output."""
        rc, conv = data.get("run_config"), data.get("conversation")
        return cls(
            quality_score=data["quality_score"],
            notes=data.get("notes", ""),
            grader_id=data["grader_id"],
            baseline_response=LLMResponse.from_dict(data["baseline_response"]),
            candidate_response=LLMResponse.from_dict(data["candidate_response"]),
            details=data.get("details") or {},
            prompt=data.get("prompt", ""),
            run_config=None if rc is None else RunConfig.from_dict(rc),
            asks_llm=bool(data.get("asks_llm", False)),
            conversation=None if conv is None else Conversation.from_dict(conv),
        )
