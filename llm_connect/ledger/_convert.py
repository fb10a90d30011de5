"""A :class:`GradingResult` as a ``grades`` row, and what makes two rows under one key the same grade."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Table

from llm_connect._json import strict_dumps
from llm_connect._secrets import mask_secrets, mask_value
from llm_connect._version import __version__
from llm_connect.errors import GradeConflictError, GradingValidationError
from llm_connect.ledger._cases import chunks
from llm_connect.ledger._models import Grade
from llm_connect.ledger._rows import RecordItem
from llm_connect.types import LLMResponse
from llm_connect.values import GradingResult

G = cast(Table, Grade.__table__)
#: The columns of a :func:`grade_rows` row: every ``grades`` column but ``id``, in table order.
INSERT_COLUMNS: tuple[str, ...] = tuple(c.name for c in G.columns if c.name != "id")
KEY = ("run_id", "case_id", "grader_id", "candidate_model")
#: What makes two grades under one key "the same grade" (re-recording it is then a no-op).
SAME: tuple[str, ...]
SAME = ("task", "baseline_model", "prompt_sha256", "baseline_text_sha256", "candidate_text_sha256")
SAME += ("quality_score", "candidate_served_model")
Row = tuple[Any, ...]
Key = tuple[Any, ...]


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check(index: int, item: object) -> RecordItem:
    """``item`` if it is a valid batch item; the error names its index."""
    bad: str | None = None
    if not isinstance(item, RecordItem):
        bad = f"expected a RecordItem, not {type(item).__name__}"
    elif not isinstance(item.result, GradingResult):
        bad = f"expected a GradingResult, not {type(item.result).__name__}"
    elif type(item.task) is not str or not item.task.strip():
        bad = f"task must be a non-empty string, not {item.task!r}"
    elif item.metadata is not None and not isinstance(item.metadata, Mapping):
        bad = f"metadata must be a mapping (a JSON object), not {type(item.metadata).__name__}"
    elif item.tags and (isinstance(item.tags, str) or not all(isinstance(t, str) for t in item.tags)):
        bad = f"tags must be a sequence of strings, not {item.tags!r}"
    else:
        for name in ("run_id", "case_id", "baseline_adapter_id", "candidate_adapter_id"):
            if (value := getattr(item, name)) is not None and (type(value) is not str or not value):
                bad = f"{name} must be a non-empty string or None"
    if bad is not None:
        raise GradingValidationError(f"item {index}: {bad}")
    return cast(RecordItem, item)


def _side(response: LLMResponse, adapter_id: str | None, store_text: bool) -> Row:
    """The ``baseline_*`` / ``candidate_*`` values of one response, in table order."""
    usage, calls = response.usage, response.tool_calls
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
        strict_dumps([t.to_dict() for t in calls]) if calls else None,
        response.model,
        response.endpoint,
    )


def _score_delta(details: Mapping[str, Any]) -> float | None:
    """``candidate_score - baseline_score`` when a judge scored each response on its own."""
    cand, base = details.get("candidate_score"), details.get("baseline_score")
    if cand is None or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (cand, base)):
        return None
    delta = float(cand) - float(base)  # type: ignore[arg-type]
    return delta if -1.0 <= delta <= 1.0 else None


def grade_rows(items: Sequence[RecordItem], *, store_text: bool, now: datetime, dialect: str) -> list[Row]:
    """Validate a batch (the error names the item's index) and return each item's row of
    :data:`INSERT_COLUMNS` values as the ``dialect``'s driver takes them (JSON as text)."""
    # SQLite: the naive-UTC text SQLAlchemy's DateTime stores there (UTCDateTime reads it back)
    created: Any = now.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f") if dialect == "sqlite" else now
    shared: dict[int, Any] = {}  # run configs and metadata objects, encoded once per batch
    rows: list[Row] = []
    for index, item in enumerate(items):
        result = _check(index, item).result
        config, meta = result.run_config, item.metadata
        if config is not None and id(config) not in shared:
            system = config.system_prompt
            text = strict_dumps(json.loads(mask_secrets(config.to_json())))
            shared[id(config)] = (text, None if system is None else sha256_text(system))
        if meta is not None and id(meta) not in shared:
            try:
                shared[id(meta)] = mask_secrets(strict_dumps(dict(meta)))
            except (TypeError, ValueError) as exc:
                msg = f"item {index}: metadata must be JSON without NaN: {exc}"
                raise GradingValidationError(msg) from None
        config_text, system_sha = (None, None) if config is None else shared[id(config)]
        details = result.details_json()  # as validated; masked by value, never filtered by key name
        if mask_secrets(details) != details:
            details = strict_dumps(mask_value(json.loads(details)))
        conversation = result.conversation
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
                *_side(result.baseline_response, item.baseline_adapter_id, store_text),
                *_side(result.candidate_response, item.candidate_adapter_id, store_text),
                result.grader_id,
                result.quality_score,
                mask_secrets(result.notes),
                details,
                config_text,
                __version__,
                None if meta is None else shared[id(meta)],
                result.asks_llm,
                _score_delta(result.details),
            )
        )
    return rows


_SAME_AT = tuple((name, INSERT_COLUMNS.index(name)) for name in SAME)


def differences(stored: Mapping[Any, Any], new: Row) -> list[str]:
    """Fields in which a stored grade and a new row under one key differ (none: the same grade).
    A stored ``candidate_served_model`` of ``None`` (not recorded) matches anything."""
    out = []
    for name, pos in _SAME_AT:
        old, value = stored[name], new[pos]
        if old != value and not (name == "candidate_served_model" and old is None):
            out.append(f"{name} stored {old!r}, new {value!r}")
    return out


def conflict_error(found: list[tuple[Key, int | None, list[str]]]) -> GradeConflictError:
    """The error for grades that differ from stored grades (or earlier ones of the batch) under their key."""
    lines = [
        f"run {k[0]!r}, case {k[1]!r}, grader {k[2]!r}, candidate {k[3]!r}: "
        f"{'an earlier grade of this batch' if i is None else f'grade #{i}'} differs ({'; '.join(d)})"
        for k, i, d in found[:5]
    ]
    more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
    return GradeConflictError(
        f"{len(found)} grade(s) conflict with stored grades under the same key, nothing was written: "
        f"{' | '.join(lines)}{more}. Use a new run id, or resume the run to grade only what is missing.",
        keys=tuple(k for k, _, _ in found),
    )


def stored_ids(cursor: Any, pending: dict[Key, Row], ph: str) -> dict[Key, int]:
    """Ids of the stored grades under ``pending``'s keys (key -> row), read with the driver's
    ``cursor`` (placeholder ``ph``); raises :class:`GradeConflictError` if one holds a different grade."""
    keys, found, clashes = list(pending), {}, []
    on = " AND ".join(f"g.{c} = k.column{i}" for i, c in enumerate(KEY, 1))
    for chunk in chunks(keys, 200):
        values = ", ".join(f"({', '.join(ph for _ in KEY)})" for _ in chunk)
        sql = (  # a join on the unique key: SQLite scans the whole index for a row-value IN
            f"SELECT g.id, {', '.join(f'g.{c}' for c in (*KEY, *SAME))} "
            f"FROM (VALUES {values}) AS k JOIN grades g ON {on}"
        )
        cursor.execute(sql, [v for key in chunk for v in key])
        for rec in cursor.fetchall():
            key, stored = tuple(rec[1:5]), dict(zip(SAME, rec[5:], strict=True))
            found[key] = rec[0]
            if diffs := differences(stored, pending[key]):
                clashes.append((key, rec[0], diffs))
    if clashes:
        raise conflict_error(clashes)
    return found
