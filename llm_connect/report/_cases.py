"""Case rows for the case browser: one per grade, with the word diff of its two answers.

The same row layout serves the static file (embedded as JSON, prompts and
diffs stored once and referenced by index: ``p`` and ``d``) and the ``view``
server's ``/api/cases`` endpoint (each row carries its own ``prompt`` and
``diff``). Keys of a row:

``id``, ``task``, ``cand`` (candidate model as asked for), ``judge`` (grader id),
``score``, ``fail`` (score below the judge's threshold), ``notes``, ``case``, ``run``,
``at`` (ISO 8601), ``base`` (baseline model), ``base_served`` / ``cand_served``
(the names the servers reported), ``tools_base`` / ``tools_cand`` (tool calls
as ``name(arguments)``), ``meta`` (the case's metadata), ``cost_base`` /
``cost_cand`` (USD), ``ms_base`` / ``ms_cand`` (latency).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from llm_connect.report._diff import word_diff

__all__ = ["BYTE_BUDGET", "DEFAULT_MAX_CASES", "case_row", "embed_json", "pack_cases", "truncate"]

DEFAULT_MAX_CASES = 5000
"""Grades embedded in a static report at most (the rest: worst and best per candidate x judge)."""

BYTE_BUDGET = 8_000_000
"""Bytes of embedded case JSON at most; above it fewer cases are kept (the file stays under 10 MB)."""


def _json_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _tools(calls: Any) -> list[str]:
    calls = _json_value(calls)
    if not calls:
        return []
    out = []
    for call in calls:
        if isinstance(call, Mapping):
            out.append(f"{call.get('name', '?')}({call.get('arguments', '')})")
        else:
            out.append(str(call))
    return out


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def case_row(
    values: Mapping[str, Any], *, min_quality: float | Callable[[str], float], diff: bool = True
) -> dict[str, Any]:
    """A case row from a grade's stored columns (``grades`` column names; texts included).

    ``values`` holds ``id``, ``created_at``, ``run_id``, ``case_id``, ``task``,
    ``grader_id``, ``quality_score``, ``notes``, ``prompt``, ``baseline_model``,
    ``candidate_model``, the two sides' ``*_text``, ``*_served_model``,
    ``*_tool_calls``, ``*_cost_usd``, ``*_latency_ms`` and ``metadata``. The
    row's ``prompt`` and ``diff`` are filled in; :func:`pack_cases` moves them
    into shared tables for the static file. ``fail`` is a score below ``min_quality``, or
    below the judge's own threshold when it is a function of the grader id
    (:meth:`~llm_connect.routing.RoutingPolicy.threshold`).
    """
    score = float(values["quality_score"])
    threshold = min_quality(values["grader_id"]) if callable(min_quality) else min_quality
    meta = _json_value(values.get("metadata"))
    row: dict[str, Any] = {
        "id": int(values["id"]),
        "task": values["task"],
        "cand": values["candidate_model"],
        "judge": values["grader_id"],
        "score": score,
        "fail": score < threshold,
        "notes": values.get("notes") or "",
        "case": values.get("case_id"),
        "run": values.get("run_id"),
        "at": _iso(values.get("created_at")),
        "base": values["baseline_model"],
        "base_served": values.get("baseline_served_model"),
        "cand_served": values.get("candidate_served_model"),
        "tools_base": _tools(values.get("baseline_tool_calls")),
        "tools_cand": _tools(values.get("candidate_tool_calls")),
        "meta": dict(meta) if isinstance(meta, Mapping) else meta,
        "cost_base": values.get("baseline_cost_usd"),
        "cost_cand": values.get("candidate_cost_usd"),
        "ms_base": values.get("baseline_latency_ms"),
        "ms_cand": values.get("candidate_latency_ms"),
        "prompt": values.get("prompt") or "",
    }
    texts = (values.get("baseline_text") or "", values.get("candidate_text") or "")
    if diff:
        row["diff"] = _diff_of(*texts)
    else:
        row["_texts"] = texts
    return row


_DIFF_CACHE: dict[tuple[str, str], list[list[str]]] = {}


def _diff_of(baseline: str, candidate: str) -> list[list[str]]:
    """The word diff, remembered for the pair (several judges grade the same two answers)."""
    key = (baseline, candidate)
    found = _DIFF_CACHE.get(key)
    if found is None:
        if len(_DIFF_CACHE) > 2_000:
            _DIFF_CACHE.clear()
        found = _DIFF_CACHE[key] = word_diff(baseline, candidate)
    return found


def truncate(rows: Sequence[dict[str, Any]], max_cases: int) -> tuple[list[dict[str, Any]], bool]:
    """At most about ``max_cases`` rows: the worst and best ``N`` of every task x candidate x judge.

    Returns the rows kept (in their original order) and whether any were left out.
    Every group keeps at least its worst and its best grade.
    """
    if len(rows) <= max_cases:
        return list(rows), False
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["task"], row["cand"], row["judge"]), []).append(row)
    per_side = max(1, max_cases // (2 * len(groups)))
    keep: set[int] = set()
    for members in groups.values():
        ranked = sorted(members, key=lambda r: (r["score"], r["id"]))
        keep.update(r["id"] for r in ranked[:per_side])
        keep.update(r["id"] for r in ranked[-per_side:])
    return [r for r in rows if r["id"] in keep], True


def pack_cases(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The static file's case data: rows with ``p`` / ``d`` indexes into shared ``prompts`` / ``diffs``."""
    prompts: dict[str, int] = {}
    diffs: dict[str, int] = {}
    diff_list: list[Any] = []
    packed = []
    for row in rows:
        row = dict(row)
        prompt = row.pop("prompt")
        texts = row.pop("_texts", None)
        diff = row.pop("diff") if texts is None else _diff_of(*texts)
        row["p"] = prompts.setdefault(prompt, len(prompts))
        key = json.dumps(diff, ensure_ascii=False)
        if key not in diffs:
            diffs[key] = len(diff_list)
            diff_list.append(diff)
        row["d"] = diffs[key]
        packed.append(row)
    return {"rows": packed, "prompts": list(prompts), "diffs": diff_list}


def embed_json(data: Any) -> str:
    """``data`` as JSON safe inside ``<script type="application/json">``: ``<``, ``>`` and ``&``
    written as ``\\u003c``, ``\\u003e``, ``\\u0026`` (an answer holding ``</script>`` cannot end it)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
