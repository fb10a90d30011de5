"""Turning a :class:`GradingResult` into a ``grades`` row, and a row back into a :class:`GradeRow`.

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
from typing import Any

from llm_connect._json import compact_dumps, strict_dumps
from llm_connect._secrets import mask_secrets, mask_value
from llm_connect._version import __version__
from llm_connect.errors import GradingValidationError
from llm_connect.ledger._rows import GradeRow, RecordItem, grade_row
from llm_connect.types import LLMResponse, RunConfig
from llm_connect.values import GradingResult

__all__ = [
    "GRADE_COLUMNS",
    "INSERT_COLUMNS",
    "KEY_POSITIONS",
    "batch_values",
    "grade_row",
    "sha256_text",
    "validate_item",
]


# An empty SHA-256 context to copy: OpenSSL 3 looks the digest up again on every
# hashlib.sha256() call, and a grade takes three digests (~10% faster each).
_SHA256 = hashlib.sha256()


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8."""
    digest = _SHA256.copy()
    digest.update(text.encode("utf-8"))
    return digest.hexdigest()


def validate_item(index: int, item: object) -> RecordItem:
    """Check one batch item before anything is written; the error names the item.

    :func:`batch_values` calls it only for items its own quick test does not pass.
    """
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


def _tool_calls_json(response: LLMResponse) -> str | None:
    if not response.tool_calls:
        return None
    return json.dumps(
        [t.to_dict() for t in response.tool_calls],
        separators=(",", ":"),
        ensure_ascii=False,
    )


#: Columns of ``grades`` written on insert, in the order of :func:`batch_values`.
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
#: Positions of the idempotency key (run_id, case_id, grader_id, candidate_model) in a values tuple.
KEY_POSITIONS: tuple[int, ...] = tuple(
    INSERT_COLUMNS.index(c) for c in ("run_id", "case_id", "grader_id", "candidate_model")
)


def _config_values(config: RunConfig) -> tuple[str, str | None]:
    system = config.system_prompt
    # to_json() drops the tracker and secret-named params and masks credential-shaped values.
    return (
        mask_secrets(compact_dumps(json.loads(config.to_json()))),
        None if system is None else sha256_text(system),
    )


def _metadata_json(index: int, metadata: Mapping[str, Any]) -> str:
    """A case's metadata (a mapping: :func:`validate_item` checked it) as JSON text, NaN refused,
    credentials masked."""
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


def _tags_json(tags: Sequence[str]) -> str:
    return json.dumps(list(tags), ensure_ascii=False)


def batch_values(items: Sequence[RecordItem], *, store_text: bool, now: Any) -> list[tuple[Any, ...]]:
    """Validate a batch and return each item's ``grades`` values, in :data:`INSERT_COLUMNS` order.

    Every item is checked (:func:`validate_item`; the error names the item's
    index) before the caller writes anything. JSON columns are encoded here
    (compact text), so the driver's ``executemany`` gets plain values; ``now``
    is passed through as given. Work on what items share (the texts of a
    response graded by several judges, one prompt, one run config) is done
    once per batch (the caller's list holds them, so ``id()`` identifies them).
    """
    items = items if type(items) is list else list(items)
    digests: dict[int, str] = {}
    configs: dict[int, tuple[str, str | None]] = {}
    tag_texts: dict[int, str] = {}
    meta_texts: dict[int, str] = {}
    get_digest = digests.get
    new_digest = _SHA256.copy
    version = __version__
    rows: list[tuple[Any, ...]] = []
    append = rows.append
    for index, item in enumerate(items):
        if type(item) is not RecordItem:
            validate_item(index, item)  # raises unless it is a RecordItem subclass
        result, task, run_id, case_id, tags = item.result, item.task, item.run_id, item.case_id, item.tags
        if not (  # the usual item passes this one test; validate_item names a bad field
            type(result) is GradingResult
            and type(task) is str
            and task.strip()
            and (run_id is None or (type(run_id) is str and run_id))
            and (case_id is None or (type(case_id) is str and case_id))
            and not tags
            and item.baseline_adapter_id is None
            and item.candidate_adapter_id is None
            and item.metadata is None
        ):
            validate_item(index, item)
        config = result.run_config
        if config is None:
            config_json = system_sha = None
        else:
            known = configs.get(id(config))
            if known is None:
                known = configs[id(config)] = _config_values(config)
            config_json, system_sha = known
        base, cand = result.baseline_response, result.candidate_response
        prompt, base_text, cand_text = result.prompt, base.text, cand.text
        # The three digests, spelled out: a helper call per text costs more than the lookups.
        conversation = result.conversation
        prompt_sha = get_digest(id(prompt)) if conversation is None else conversation.digest
        if prompt_sha is None:
            h = new_digest()
            h.update(prompt.encode("utf-8"))
            prompt_sha = digests[id(prompt)] = h.hexdigest()
        base_sha = get_digest(id(base_text))
        if base_sha is None:
            h = new_digest()
            h.update(base_text.encode("utf-8"))
            base_sha = digests[id(base_text)] = h.hexdigest()
        cand_sha = get_digest(id(cand_text))
        if cand_sha is None:
            h = new_digest()
            h.update(cand_text.encode("utf-8"))
            cand_sha = digests[id(cand_text)] = h.hexdigest()
        # Free text and judge details are masked by value (masked JSON text stays JSON);
        # nothing in details is dropped by its name (``token_count`` is data, not a secret).
        notes, details = mask_secrets(result.notes), result.details_json()
        if mask_secrets(details) != details:  # something credential-like: mask value by value
            details = compact_dumps(mask_value(result.details))
        if tags:
            tags_json = tag_texts.get(id(tags))
            if tags_json is None:
                tags_json = tag_texts[id(tags)] = _tags_json(tags)
        else:
            tags_json = "[]"
        metadata = item.metadata
        if metadata is None:
            metadata_json = None
        else:
            metadata_json = meta_texts.get(id(metadata))
            if metadata_json is None:
                metadata_json = meta_texts[id(metadata)] = _metadata_json(index, metadata)
        base_usage, cand_usage = base.usage, cand.usage
        # Both sides' fields read straight into the row: a helper returning a tuple per response,
        # unpacked here, cost ~0.8 us a grade more (docs/benchmarks.md, record_many third pass).
        append(
            (
                now,
                run_id,
                case_id,
                task,
                tags_json,
                prompt if store_text else None,
                prompt_sha,
                system_sha,
                item.baseline_adapter_id or f"{base.provider}:{base.asked_model}",
                base.provider,
                base.requested_model or base.model,
                base_text if store_text else None,
                base_sha,
                base.latency_ms,
                None if base_usage is None else base_usage.prompt_tokens,
                None if base_usage is None else base_usage.completion_tokens,
                base.cost_usd,
                base.finish_reason,
                _tool_calls_json(base) if base.tool_calls else None,
                item.candidate_adapter_id or f"{cand.provider}:{cand.asked_model}",
                cand.provider,
                cand.requested_model or cand.model,
                cand_text if store_text else None,
                cand_sha,
                cand.latency_ms,
                None if cand_usage is None else cand_usage.prompt_tokens,
                None if cand_usage is None else cand_usage.completion_tokens,
                cand.cost_usd,
                cand.finish_reason,
                _tool_calls_json(cand) if cand.tool_calls else None,
                result.grader_id,
                result.quality_score,
                notes,
                details,
                config_json,
                version,
                base.model,
                base.endpoint,
                cand.model,
                cand.endpoint,
                metadata_json,
                result.asks_llm,
                _score_delta(result.details),
            )
        )
    return rows


GRADE_COLUMNS: tuple[str, ...] = tuple(name for name in GradeRow.__dataclass_fields__)
