"""Turning a :class:`GradingResult` into a ``grades`` row and back into a :class:`GradeRow`; what
makes two rows under one idempotency key the same grade (else :class:`GradeConflictError`).

Secrets never reach a row (:mod:`llm_connect._secrets`): the run config is
stored via ``RunConfig.to_dict()`` (no budget tracker, secret-named parameters
and headers dropped, credential-shaped values masked); notes, case metadata and
failure messages are masked by shape; a judge's details are masked value by
value and never filtered by key name (``token_count`` is data).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, null, select, tuple_

from llm_connect._json import strict_dumps
from llm_connect._secrets import mask_secrets, mask_value
from llm_connect._version import __version__
from llm_connect.errors import GradeConflictError, GradingValidationError
from llm_connect.ledger._models import Grade
from llm_connect.ledger._rows import GradeRow, RecordItem, grade_row
from llm_connect.types import LLMResponse, RunConfig
from llm_connect.values import GradingResult

__all__ = [
    "GRADE_COLUMNS",
    "INSERT_COLUMNS",
    "SAME_GRADE_COLUMNS",
    "conflict_error",
    "differences",
    "grade_row",
    "grade_rows",
    "sha256_text",
    "stored_ids",
    "validate_item",
]


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
    task = item.task
    if type(task) is not str or not task.strip():
        raise GradingValidationError(f"item {index}: task must be a non-empty string, not {task!r}")
    for name, value in (
        ("run_id", item.run_id),
        ("case_id", item.case_id),
        ("baseline_adapter_id", item.baseline_adapter_id),
        ("candidate_adapter_id", item.candidate_adapter_id),
    ):
        if value is not None and (type(value) is not str or not value):
            raise GradingValidationError(f"item {index}: {name} must be a non-empty string or None")
    if item.metadata is not None and not isinstance(item.metadata, Mapping):
        raise GradingValidationError(
            f"item {index}: metadata must be a mapping (a JSON object), not {type(item.metadata).__name__}"
        )
    tags = item.tags
    if tags and (isinstance(tags, str) or not all(isinstance(t, str) for t in tags)):
        raise GradingValidationError(f"item {index}: tags must be a sequence of strings, not {tags!r}")
    return item


_NULL = null()  # SQL NULL in a JSON column (None would be stored as JSON ``null``)


def _tool_calls(response: LLMResponse) -> Any:
    return [t.to_dict() for t in response.tool_calls] if response.tool_calls else _NULL


#: Columns of ``grades`` written on insert (the keys of a :func:`grade_rows` row).
INSERT_COLUMNS: tuple[str, ...] = (
    "created_at",
    "run_id",
    "case_id",
    "task",
    "tags",
    "prompt",
    "prompt_sha256",
    "system_prompt_sha256",
    "baseline_adapter_id",
    "baseline_provider",
    "baseline_model",
    "baseline_text",
    "baseline_text_sha256",
    "baseline_latency_ms",
    "baseline_prompt_tokens",
    "baseline_completion_tokens",
    "baseline_cost_usd",
    "baseline_finish_reason",
    "baseline_tool_calls",
    "candidate_adapter_id",
    "candidate_provider",
    "candidate_model",
    "candidate_text",
    "candidate_text_sha256",
    "candidate_latency_ms",
    "candidate_prompt_tokens",
    "candidate_completion_tokens",
    "candidate_cost_usd",
    "candidate_finish_reason",
    "candidate_tool_calls",
    "grader_id",
    "quality_score",
    "notes",
    "details",
    "run_config",
    "llm_connect_version",
    "baseline_served_model",
    "baseline_endpoint",
    "candidate_served_model",
    "candidate_endpoint",
    "metadata",
    "asks_llm",
    "score_delta",
)


def _config_values(config: RunConfig) -> tuple[Any, str | None]:
    system = config.system_prompt
    # to_json() drops the tracker and secret-named params; credential-shaped values are masked.
    return json.loads(mask_secrets(config.to_json())), None if system is None else sha256_text(system)


def _metadata(index: int, metadata: Mapping[str, Any]) -> Any:
    """A case's metadata (a mapping: :func:`validate_item` checked it), NaN refused, credentials
    masked."""
    try:
        text = strict_dumps(dict(metadata))
    except (TypeError, ValueError) as exc:
        raise GradingValidationError(f"item {index}: metadata must be JSON without NaN: {exc}") from None
    return json.loads(mask_secrets(text))


def _score_delta(details: Mapping[str, Any]) -> float | None:
    """``candidate_score - baseline_score`` when a judge scored each response on its own."""
    cand, base = details.get("candidate_score"), details.get("baseline_score")
    if not isinstance(cand, float | int) or not isinstance(base, float | int) or isinstance(cand, bool):
        return None
    if isinstance(base, bool):
        return None
    delta = float(cand) - float(base)
    return delta if -1.0 <= delta <= 1.0 else None


def grade_rows(items: Sequence[RecordItem], *, store_text: bool, now: datetime) -> list[dict[str, Any]]:
    """Validate a batch and return each item's ``grades`` row (column name -> value).

    Every item is checked (:func:`validate_item`; the error names the item's
    index) before the caller writes anything. JSON columns hold Python values
    (SQL ``NULL`` as :func:`~sqlalchemy.null`); the engine encodes them. Work on
    what items share (one run config, one metadata object) is done once per batch.
    """
    configs: dict[int, tuple[Any, str | None]] = {}
    metas: dict[int, Any] = {}
    rows: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        validate_item(index, item)
        result = item.result
        config = result.run_config
        if config is None:
            config_value, system_sha = _NULL, None
        else:
            if id(config) not in configs:
                configs[id(config)] = _config_values(config)
            config_value, system_sha = configs[id(config)]
        if item.metadata is None:
            metadata = _NULL
        else:
            if id(item.metadata) not in metas:
                metas[id(item.metadata)] = _metadata(index, item.metadata)
            metadata = metas[id(item.metadata)]
        base, cand = result.baseline_response, result.candidate_response
        conversation = result.conversation
        # The details as validated (encoded by GradingResult); masked by value, never filtered by
        # name (``token_count`` is data).
        details_text = result.details_json()
        details = json.loads(details_text)
        if mask_secrets(details_text) != details_text:
            details = mask_value(details)
        base_usage, cand_usage = base.usage, cand.usage
        row = {
            "created_at": now,
            "run_id": item.run_id,
            "case_id": item.case_id,
            "task": item.task,
            "tags": list(item.tags),
            "prompt": result.prompt if store_text else None,
            "prompt_sha256": sha256_text(result.prompt) if conversation is None else conversation.digest,
            "system_prompt_sha256": system_sha,
            "baseline_adapter_id": item.baseline_adapter_id or f"{base.provider}:{base.asked_model}",
            "baseline_provider": base.provider,
            "baseline_model": base.requested_model or base.model,
            "baseline_text": base.text if store_text else None,
            "baseline_text_sha256": sha256_text(base.text),
            "baseline_latency_ms": base.latency_ms,
            "baseline_prompt_tokens": None if base_usage is None else base_usage.prompt_tokens,
            "baseline_completion_tokens": None if base_usage is None else base_usage.completion_tokens,
            "baseline_cost_usd": base.cost_usd,
            "baseline_finish_reason": base.finish_reason,
            "baseline_tool_calls": _tool_calls(base),
            "baseline_served_model": base.model,
            "baseline_endpoint": base.endpoint,
            "candidate_adapter_id": item.candidate_adapter_id or f"{cand.provider}:{cand.asked_model}",
            "candidate_provider": cand.provider,
            "candidate_model": cand.requested_model or cand.model,
            "candidate_text": cand.text if store_text else None,
            "candidate_text_sha256": sha256_text(cand.text),
            "candidate_latency_ms": cand.latency_ms,
            "candidate_prompt_tokens": None if cand_usage is None else cand_usage.prompt_tokens,
            "candidate_completion_tokens": None if cand_usage is None else cand_usage.completion_tokens,
            "candidate_cost_usd": cand.cost_usd,
            "candidate_finish_reason": cand.finish_reason,
            "candidate_tool_calls": _tool_calls(cand),
            "candidate_served_model": cand.model,
            "candidate_endpoint": cand.endpoint,
            "grader_id": result.grader_id,
            "quality_score": result.quality_score,
            "notes": mask_secrets(result.notes),
            "details": details,
            "run_config": config_value,
            "llm_connect_version": __version__,
            "metadata": metadata,
            "asks_llm": result.asks_llm,
            "score_delta": _score_delta(result.details),
        }
        rows.append(row)
    return rows


GRADE_COLUMNS: tuple[str, ...] = tuple(name for name in GradeRow.__dataclass_fields__)


_G = cast(Table, Grade.__table__)
_KEY = ("run_id", "case_id", "grader_id", "candidate_model")
_LOOKUP_CHUNK = 200  # keys per lookup of stored grades (4 parameters each)
Key = tuple[Any, ...]

#: What makes two grades under one key "the same grade" (re-recording it is then a no-op).
SAME_GRADE_COLUMNS: tuple[str, ...] = (
    "task",
    "baseline_model",
    "prompt_sha256",
    "baseline_text_sha256",
    "candidate_text_sha256",
    "quality_score",
    "candidate_served_model",
)


def differences(stored: Mapping[Any, Any], new: dict[str, Any]) -> list[str]:
    """Fields in which two grades under one key differ (none when they are the same grade).

    A stored ``candidate_served_model`` of ``None`` (not recorded) matches anything.
    """
    out = []
    for name in SAME_GRADE_COLUMNS:
        old, value = stored[name], new[name]
        if old != value and not (name == "candidate_served_model" and old is None):
            out.append(f"{name} stored {old!r}, new {value!r}")
    return out


def conflict_error(found: list[tuple[Key, int | None, list[str]]]) -> GradeConflictError:
    lines = []
    for key, stored_id, diffs in found[:5]:
        where = f"grade #{stored_id}" if stored_id is not None else "an earlier grade of this batch"
        lines.append(
            f"run {key[0]!r}, case {key[1]!r}, grader {key[2]!r}, candidate {key[3]!r}: {where} differs "
            f"({'; '.join(diffs)})"
        )
    more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
    return GradeConflictError(
        f"{len(found)} grade(s) conflict with stored grades under the same key, nothing was written: "
        + " | ".join(lines)
        + more
        + ". Use a new run id, or resume the run to grade only what is missing.",
        keys=tuple(k for k, _, _ in found),
    )


def stored_ids(conn: Connection, pending: dict[Key, dict[str, Any]]) -> dict[Key, int]:
    """Ids of the stored grades under ``pending``'s keys (key -> row); raises
    :class:`GradeConflictError` if one holds a different grade."""
    keys = list(pending)
    found: dict[Key, int] = {}
    clashes: list[tuple[Key, int | None, list[str]]] = []
    columns = [_G.c.id, *(_G.c[c] for c in _KEY), *(_G.c[c] for c in SAME_GRADE_COLUMNS)]
    for start in range(0, len(keys), _LOOKUP_CHUNK):
        chunk = keys[start : start + _LOOKUP_CHUNK]
        stmt = select(*columns).where(tuple_(*(_G.c[c] for c in _KEY)).in_(chunk))
        for rec in conn.execute(stmt).mappings():
            key = tuple(rec[c] for c in _KEY)
            found[key] = rec["id"]
            diffs = differences(rec, pending[key])
            if diffs:
                clashes.append((key, rec["id"], diffs))
    if clashes:
        raise conflict_error(clashes)
    return found
