"""Turning a :class:`GradingResult` into a ``grades`` row, and a row back into a :class:`GradeRow`.

Secrets never reach a row: the run config is stored via ``RunConfig.to_dict()``
(no budget tracker, no secret-named model parameter) and then, like the
judge's details, passed through :func:`~llm_connect.types.redact_secrets`;
free text (notes, failure messages) has API-key-shaped tokens masked.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any

from llm_connect._version import __version__
from llm_connect.errors import GradingValidationError
from llm_connect.grading._results import GradingResult
from llm_connect.ledger._rows import GradeRow, RecordItem
from llm_connect.types import LLMResponse, RunConfig, redact_secrets

__all__ = [
    "GRADE_COLUMNS",
    "grade_row",
    "item_to_row",
    "mask_secret_text",
    "scrub",
    "sha256_text",
    "validate_item",
]

_SECRET_TEXT = re.compile(
    r"(?i)\b(sk-[A-Za-z0-9_\-]{12,}|(?:bearer)\s+[A-Za-z0-9._~+/=\-]{8,}|"
    r"(?:api[_-]?key|authorization|password|secret|token)\s*[=:]\s*['\"]?[^\s'\",;]{6,})"
)


def mask_secret_text(text: str) -> str:
    """``text`` with API-key-shaped tokens (``sk-...``, ``Bearer ...``, ``api_key=...``) masked."""
    return _SECRET_TEXT.sub("[REDACTED]", text)


def scrub(value: Any) -> Any:
    """``redact_secrets(value)`` with API-key-shaped strings inside it masked too.

    Catches secrets under names the key markers miss (``X-Api-Key`` headers).
    """
    value = redact_secrets(value)
    if isinstance(value, Mapping):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, str):
        return mask_secret_text(value)
    return value


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def validate_item(index: int, item: object) -> RecordItem:
    """Check one batch item before anything is written; the error names the item."""
    if not isinstance(item, RecordItem):
        raise GradingValidationError(f"item {index}: expected a RecordItem, not {type(item).__name__}")
    if not isinstance(item.result, GradingResult):
        raise GradingValidationError(
            f"item {index}: expected a GradingResult, not {type(item.result).__name__}"
        )
    if not isinstance(item.task, str) or not item.task.strip():
        raise GradingValidationError(f"item {index}: task must be a non-empty string, not {item.task!r}")
    for name in ("run_id", "case_id", "baseline_adapter_id", "candidate_adapter_id"):
        value = getattr(item, name)
        if value is not None and (not isinstance(value, str) or not value):
            raise GradingValidationError(f"item {index}: {name} must be a non-empty string or None")
    if isinstance(item.tags, str) or not all(isinstance(t, str) for t in item.tags):
        raise GradingValidationError(f"item {index}: tags must be a sequence of strings, not {item.tags!r}")
    return item


def _side(prefix: str, response: LLMResponse, adapter_id: str | None, store_text: bool) -> dict[str, Any]:
    usage = response.usage
    return {
        f"{prefix}_adapter_id": adapter_id or f"{response.provider}:{response.model}",
        f"{prefix}_provider": response.provider,
        f"{prefix}_model": response.model,
        f"{prefix}_text": response.text if store_text else None,
        f"{prefix}_text_sha256": sha256_text(response.text),
        f"{prefix}_latency_ms": response.latency_ms,
        f"{prefix}_prompt_tokens": None if usage is None else usage.prompt_tokens,
        f"{prefix}_completion_tokens": None if usage is None else usage.completion_tokens,
        f"{prefix}_cost_usd": response.cost_usd,
        f"{prefix}_finish_reason": response.finish_reason,
        f"{prefix}_tool_calls": [{"name": t.name, "arguments": t.arguments} for t in response.tool_calls]
        or None,
    }


def _stored_config(config: RunConfig | None, memo: dict[int, Any]) -> Any:
    if config is None:
        return None
    key = id(config)
    if key not in memo:
        # to_json() drops the tracker and secret-named params and stringifies the unserialisable.
        memo[key] = (scrub(json.loads(config.to_json())), config)
    return memo[key][0]


def item_to_row(item: RecordItem, *, store_text: bool, now: datetime, memo: dict[int, Any]) -> dict[str, Any]:
    """The ``grades`` row for one validated item."""
    result = item.result
    config = result.run_config
    system_prompt = None if config is None else config.system_prompt
    row: dict[str, Any] = {
        "created_at": now,
        "run_id": item.run_id,
        "case_id": item.case_id,
        "task": item.task,
        "tags": list(item.tags),
        "prompt": result.prompt if store_text else None,
        "prompt_sha256": sha256_text(result.prompt),
        "system_prompt_sha256": None if system_prompt is None else sha256_text(system_prompt),
        "grader_id": result.grader_id,
        "quality_score": result.quality_score,
        "notes": mask_secret_text(result.notes),
        "details": scrub(result.details),
        "run_config": _stored_config(config, memo),
        "llm_connect_version": __version__,
    }
    row.update(_side("baseline", result.baseline_response, item.baseline_adapter_id, store_text))
    row.update(_side("candidate", result.candidate_response, item.candidate_adapter_id, store_text))
    return row


GRADE_COLUMNS: tuple[str, ...] = tuple(name for name in GradeRow.__dataclass_fields__)


def _freeze(value: Mapping[str, Any]) -> Mapping[str, Any]:
    # Read-only at the top level; nested values stay plain JSON types.
    return MappingProxyType(dict(value))


def _tool_calls(value: Sequence[Mapping[str, str]] | None) -> tuple[Mapping[str, str], ...]:
    return tuple(MappingProxyType(dict(v)) for v in value or ())


def grade_row(mapping: Mapping[str, Any]) -> GradeRow:
    """A :class:`GradeRow` from a selected ``grades`` row mapping."""
    values = dict(mapping)
    values["tags"] = tuple(values.get("tags") or ())
    values["details"] = _freeze(values.get("details") or {})
    values["run_config"] = None if values.get("run_config") is None else _freeze(values["run_config"])
    values["baseline_tool_calls"] = _tool_calls(values.get("baseline_tool_calls"))
    values["candidate_tool_calls"] = _tool_calls(values.get("candidate_tool_calls"))
    return GradeRow(**values)
