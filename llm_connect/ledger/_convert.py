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
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, select, tuple_

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
    "created_value",
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


def _tool_calls(response: LLMResponse) -> str | None:
    return strict_dumps([t.to_dict() for t in response.tool_calls]) if response.tool_calls else None


#: Columns of ``grades`` written on insert, in the order of a :func:`grade_rows` row.
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


def _config_values(config: RunConfig) -> tuple[str, str | None]:
    """The run config as stored (JSON text) and the system prompt's digest."""
    system = config.system_prompt
    # to_json() drops the tracker and secret-named params; credential-shaped values are masked.
    text = strict_dumps(json.loads(mask_secrets(config.to_json())))
    return text, None if system is None else sha256_text(system)


def _metadata(index: int, metadata: Mapping[str, Any]) -> str:
    """A case's metadata as stored (JSON text; a mapping: :func:`validate_item` checked it), NaN
    refused, credentials masked."""
    try:
        text = strict_dumps(dict(metadata))
    except (TypeError, ValueError) as exc:
        raise GradingValidationError(f"item {index}: metadata must be JSON without NaN: {exc}") from None
    return mask_secrets(text)


def _score_delta(details: Mapping[str, Any]) -> float | None:
    """``candidate_score - baseline_score`` when a judge scored each response on its own."""
    cand, base = details.get("candidate_score"), details.get("baseline_score")
    if not isinstance(cand, float | int) or not isinstance(base, float | int) or isinstance(cand, bool):
        return None
    if isinstance(base, bool):
        return None
    delta = float(cand) - float(base)
    return delta if -1.0 <= delta <= 1.0 else None


Row = tuple[Any, ...]


def created_value(moment: datetime, dialect: str) -> Any:
    """``moment`` as the driver gets a ``created_at`` value: on SQLite the naive-UTC text that
    SQLAlchemy stores there (what :class:`~llm_connect.ledger._models.UTCDateTime` reads back)."""
    if dialect == "sqlite":
        return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return moment


def _response_values(response: LLMResponse, adapter_id: str | None, store_text: bool) -> Row:
    """The ``baseline_*`` / ``candidate_*`` values of one response, from ``*_adapter_id`` to
    ``*_tool_calls`` (in :data:`INSERT_COLUMNS` order)."""
    usage = response.usage
    return (
        adapter_id or f"{response.provider}:{response.asked_model}",
        response.provider,
        response.requested_model or response.model,
        response.text if store_text else None,
        sha256_text(response.text),
        response.latency_ms,
        None if usage is None else usage.prompt_tokens,
        None if usage is None else usage.completion_tokens,
        response.cost_usd,
        response.finish_reason,
        _tool_calls(response),
    )


def grade_rows(items: Sequence[RecordItem], *, store_text: bool, now: datetime, dialect: str) -> list[Row]:
    """Validate a batch and return each item's ``grades`` row: a tuple of the
    :data:`INSERT_COLUMNS` values, as the ``dialect``'s driver takes them.

    Every item is checked (:func:`validate_item`; the error names the item's
    index) before the caller writes anything. JSON columns hold JSON text
    (:func:`~llm_connect._json.strict_dumps`; the validated details as
    encoded when validated), SQL ``NULL`` as ``None``. Work on what items share
    (one run config, one metadata object) is done once per batch.
    """
    created = created_value(now, dialect)
    configs: dict[int, tuple[str, str | None]] = {}
    metas: dict[int, str] = {}
    rows: list[Row] = []
    for index, item in enumerate(items):
        validate_item(index, item)
        result = item.result
        config = result.run_config
        config_text: str | None = None
        system_sha: str | None = None
        if config is not None:
            if id(config) not in configs:
                configs[id(config)] = _config_values(config)
            config_text, system_sha = configs[id(config)]
        metadata: str | None = None
        if item.metadata is not None:
            if id(item.metadata) not in metas:
                metas[id(item.metadata)] = _metadata(index, item.metadata)
            metadata = metas[id(item.metadata)]
        base, cand = result.baseline_response, result.candidate_response
        conversation = result.conversation
        # The details as validated (encoded by GradingResult); masked by value, never filtered by
        # name (``token_count`` is data).
        details = result.details_json()
        if mask_secrets(details) != details:
            details = strict_dumps(mask_value(json.loads(details)))
        rows.append(
            (
                created,
                item.run_id,
                item.case_id,
                item.task,
                strict_dumps(list(item.tags)) if item.tags else "[]",
                result.prompt if store_text else None,
                sha256_text(result.prompt) if conversation is None else conversation.digest,
                system_sha,
                *_response_values(base, item.baseline_adapter_id, store_text),
                *_response_values(cand, item.candidate_adapter_id, store_text),
                result.grader_id,
                result.quality_score,
                mask_secrets(result.notes),
                details,
                config_text,
                __version__,
                base.model,
                base.endpoint,
                cand.model,
                cand.endpoint,
                metadata,
                result.asks_llm,
                _score_delta(result.details),
            )
        )
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


_SAME = tuple((name, INSERT_COLUMNS.index(name)) for name in SAME_GRADE_COLUMNS)


def differences(stored: Mapping[Any, Any], new: Row) -> list[str]:
    """Fields in which a stored grade and a new row under one key differ (none when they are
    the same grade).

    A stored ``candidate_served_model`` of ``None`` (not recorded) matches anything.
    """
    out = []
    for name, pos in _SAME:
        old, value = stored[name], new[pos]
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


def stored_ids(conn: Connection, pending: dict[Key, Row]) -> dict[Key, int]:
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
