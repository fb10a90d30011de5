"""Turning a :class:`GradingResult` into a ``grades`` row, and a row back into a :class:`GradeRow`.

Secrets never reach a row: the run config is stored via ``RunConfig.to_dict()``
(no budget tracker, no secret-named model parameter) and then, like the
judge's details, passed through :func:`scrub` (``redact_secrets`` plus masking);
free text (notes, failure messages) has API-key-shaped tokens masked.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from llm_connect._json import compact_dumps
from llm_connect._version import __version__
from llm_connect.errors import GradingValidationError
from llm_connect.grading._results import GradingResult
from llm_connect.ledger._rows import GradeRow, RecordItem
from llm_connect.types import LLMResponse, RunConfig, _is_secret_key

__all__ = [
    "GRADE_COLUMNS",
    "INSERT_COLUMNS",
    "KEY_POSITIONS",
    "grade_row",
    "item_values",
    "mask_secret_text",
    "scrub",
    "sha256_text",
    "validate_item",
]

_SECRET_TEXT = re.compile(
    r"(?i)\b(sk-[A-Za-z0-9_\-]{12,}|(?:bearer)\s+[A-Za-z0-9._~+/=\-]{8,}|"
    r"(?:api[_-]?key|authorization|password|secret|token)\s*[=:]\s*['\"]?[^\s'\",;]{6,})"
)


# Cheap pre-check (substring tests on lower-cased text) before the full pattern runs.
_MARKERS = ("sk-", "bearer", "api", "authoriz", "password", "secret", "token", "credential")


def _maybe_secret(text: str) -> bool:
    """False only when no marker of :data:`_MARKERS` occurs in ``text`` (case-insensitive)."""
    low = text.lower()
    # Spelled out: a generator over _MARKERS costs more than the tests (hot path, 2-3 calls a row).
    return (
        "sk-" in low
        or "api" in low
        or "token" in low
        or "secret" in low
        or "password" in low
        or "bearer" in low
        or "authoriz" in low
        or "credential" in low
    )


def mask_secret_text(text: str) -> str:
    """``text`` with API-key-shaped tokens (``sk-...``, ``Bearer ...``, ``api_key=...``) masked."""
    return _SECRET_TEXT.sub("[REDACTED]", text)


def scrub(value: Any) -> Any:
    """``redact_secrets(value)`` with API-key-shaped strings inside it masked too.

    One pass: secret-named keys are dropped (as :func:`~llm_connect.types.redact_secrets`
    does) and strings under other names are masked by :func:`mask_secret_text`,
    catching secrets under names the key markers miss (``X-Api-Key`` headers).
    """
    if isinstance(value, str):
        return mask_secret_text(value) if _maybe_secret(value) else value
    if isinstance(value, Mapping):
        return {str(k): scrub(v) for k, v in value.items() if not _secret_key(str(k))}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value


# An empty SHA-256 context to copy: OpenSSL 3 looks the digest up again on every
# hashlib.sha256() call, and a grade takes three digests (~10% faster each).
_SHA256 = hashlib.sha256()


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8."""
    digest = _SHA256.copy()
    digest.update(text.encode("utf-8"))
    return digest.hexdigest()


def validate_item(index: int, item: object) -> RecordItem:
    """Check one batch item before anything is written; the error names the item."""
    if type(item) is not RecordItem and not isinstance(item, RecordItem):
        raise GradingValidationError(f"item {index}: expected a RecordItem, not {type(item).__name__}")
    if not isinstance(item.result, GradingResult):
        raise GradingValidationError(
            f"item {index}: expected a GradingResult, not {type(item.result).__name__}"
        )
    task = item.task
    if type(task) is not str or not task.strip():
        raise GradingValidationError(f"item {index}: task must be a non-empty string, not {task!r}")
    run_id, case_id = item.run_id, item.case_id
    if not (  # the usual item passes this one test; the loop below names the bad field
        (run_id is None or (type(run_id) is str and run_id))
        and (case_id is None or (type(case_id) is str and case_id))
        and item.baseline_adapter_id is None
        and item.candidate_adapter_id is None
    ):
        for name, value in (
            ("run_id", run_id),
            ("case_id", case_id),
            ("baseline_adapter_id", item.baseline_adapter_id),
            ("candidate_adapter_id", item.candidate_adapter_id),
        ):
            if value is not None and (type(value) is not str or not value):
                raise GradingValidationError(f"item {index}: {name} must be a non-empty string or None")
    tags = item.tags
    if tags and (isinstance(tags, str) or not all(isinstance(t, str) for t in tags)):
        raise GradingValidationError(f"item {index}: tags must be a sequence of strings, not {tags!r}")
    return item


@lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    return _is_secret_key(key)


def _scrubbed_json(value: Any, text: str | None = None) -> str:
    """``value`` as compact JSON, secrets removed; ``text`` is its encoding when already known."""
    if text is None:
        text = compact_dumps(value)
    if not _maybe_secret(text):  # JSON text without any marker needs no scrubbing
        return text
    return compact_dumps(scrub(value))


def _tool_calls_json(response: LLMResponse) -> str | None:
    if not response.tool_calls:
        return None
    return json.dumps(
        [{"name": t.name, "arguments": t.arguments} for t in response.tool_calls],
        separators=(",", ":"),
        ensure_ascii=False,
    )


#: Columns of ``grades`` written on insert, in the order of :func:`item_values`.
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
)
#: Positions of the idempotency key (run_id, case_id, grader_id, candidate_model) in a values tuple.
KEY_POSITIONS: tuple[int, ...] = tuple(
    INSERT_COLUMNS.index(c) for c in ("run_id", "case_id", "grader_id", "candidate_model")
)


def _response_values(response: LLMResponse, store_text: bool) -> tuple[Any, ...]:
    """The 11 ``baseline_*`` / ``candidate_*`` values of one response (adapter id first)."""
    usage = response.usage
    text = response.text
    return (
        f"{response.provider}:{response.model}",
        response.provider,
        response.model,
        text if store_text else None,
        sha256_text(text),
        response.latency_ms,
        None if usage is None else usage.prompt_tokens,
        None if usage is None else usage.completion_tokens,
        response.cost_usd,
        response.finish_reason,
        _tool_calls_json(response),
    )


def _memoised(memo: dict[Any, Any], obj: Any, make: Any, *args: Any) -> Any:
    """``make(obj, *args)``, computed once per object within one batch (``memo`` keyed by id)."""
    cached = memo.get(id(obj))
    if cached is None or cached[0] is not obj:
        cached = memo[id(obj)] = (obj, make(obj, *args))
    return cached[1]


def _config_values(config: RunConfig) -> tuple[str, str | None]:
    system = config.system_prompt
    # to_json() drops the tracker and secret-named params; scrub masks the rest.
    return (
        _scrubbed_json(json.loads(config.to_json())),
        None if system is None else sha256_text(system),
    )


def _tags_json(tags: Sequence[str]) -> str:
    return json.dumps(list(tags), ensure_ascii=False) if tags else "[]"


def item_values(item: RecordItem, *, store_text: bool, now: Any, memo: dict[Any, Any]) -> tuple[Any, ...]:
    """The ``grades`` values of one validated item, in :data:`INSERT_COLUMNS` order.

    JSON columns are encoded here (compact JSON text), so the driver's
    ``executemany`` gets plain values; ``now`` is passed through as given.
    ``memo`` (one dict per batch, the same ``store_text`` throughout) keeps the
    values derived from objects that items share (a response graded by several
    judges, one prompt, run config or tags tuple), so they are computed once.
    """
    result = item.result
    config = result.run_config
    # The memo lookups are spelled out (a function call each would cost more than the lookup).
    if config is None:
        config_json = system_sha = None
    else:
        cached = memo.get(id(config))
        if cached is None or cached[0] is not config:
            cached = memo[id(config)] = (config, _config_values(config))
        config_json, system_sha = cached[1]
    response = result.baseline_response
    cached = memo.get(id(response))
    if cached is None or cached[0] is not response:
        cached = memo[id(response)] = (response, _response_values(response, store_text))
    base = cached[1]
    response = result.candidate_response
    cached = memo.get(id(response))
    if cached is None or cached[0] is not response:
        cached = memo[id(response)] = (response, _response_values(response, store_text))
    cand = cached[1]
    if item.baseline_adapter_id:
        base = (item.baseline_adapter_id, *base[1:])
    if item.candidate_adapter_id:
        cand = (item.candidate_adapter_id, *cand[1:])
    prompt = result.prompt
    cached = memo.get(id(prompt))
    if cached is None or cached[0] is not prompt:
        cached = memo[id(prompt)] = (prompt, sha256_text(prompt))
    notes = result.notes
    details = result.details_json()
    if _maybe_secret(notes + details):  # one marker test for both (the usual grade has none)
        notes = mask_secret_text(notes)
        details = _scrubbed_json(result.details, details)
    tags = item.tags
    return (
        now,
        item.run_id,
        item.case_id,
        item.task,
        _memoised(memo, tags, _tags_json) if tags else "[]",
        prompt if store_text else None,
        cached[1],
        system_sha,
        *base,
        *cand,
        result.grader_id,
        result.quality_score,
        notes,
        details,
        config_json,
        __version__,
    )


GRADE_COLUMNS: tuple[str, ...] = tuple(name for name in GradeRow.__dataclass_fields__)


def _freeze(value: Mapping[str, Any]) -> Mapping[str, Any]:
    # Read-only at the top level; nested values stay plain JSON types.
    return MappingProxyType(dict(value))


def _tool_calls(value: Sequence[Mapping[str, str]] | None) -> tuple[Mapping[str, str], ...]:
    return tuple(MappingProxyType(dict(v)) for v in value or ())


def grade_row(mapping: Mapping[Any, Any]) -> GradeRow:
    """A :class:`GradeRow` from a selected ``grades`` row mapping."""
    values = dict(mapping)
    values["tags"] = tuple(values.get("tags") or ())
    values["details"] = _freeze(values.get("details") or {})
    values["run_config"] = None if values.get("run_config") is None else _freeze(values["run_config"])
    values["baseline_tool_calls"] = _tool_calls(values.get("baseline_tool_calls"))
    values["candidate_tool_calls"] = _tool_calls(values.get("candidate_tool_calls"))
    return GradeRow(**values)
