"""What ``llm-connect grade`` says about embeddings: texts embedded, texts read from the cache,
and where the models ran (device and backend)."""

from __future__ import annotations

from typing import Any

__all__ = ["embedding_json", "embedding_line"]


def _ran_on(context: Any) -> list[dict[str, str]]:
    """``{"adapter", "device", "backend"}`` of each embedder that embedded or read a text
    (device and backend only where the adapter names them: a local model)."""
    seen: dict[str, dict[str, str]] = {}
    for embedder in getattr(context, "embedders", []):
        if embedder.counts.embedded + embedder.counts.cached == 0:
            continue
        entry = {"adapter": str(embedder.adapter_id)}
        for key in ("device", "backend"):
            value = getattr(embedder, key, None)
            if isinstance(value, str):
                entry[key] = value
        seen.setdefault(entry["adapter"], entry)
    return list(seen.values())


def embedding_json(outcome: Any) -> dict[str, Any] | None:
    """``{"embedded": N, "cached": M, "ran_on": [...]}`` (distinct texts per call, summed over
    the run; each embedder's adapter id, device and backend), or ``None`` when no judge
    embedded anything."""
    context = getattr(outcome, "judge_context", None)
    counts = context.embedding_counts() if context is not None else None
    if counts is None or counts.embedded + counts.cached == 0:
        return None
    return {**counts.to_dict(), "ran_on": _ran_on(context)}


def embedding_line(outcome: Any) -> str | None:
    """The report's line about embeddings, or ``None`` when no judge embedded anything."""
    counts = embedding_json(outcome)
    if counts is None:
        return None
    where = [
        f"{entry['backend']} on {entry['device']}" if "device" in entry else entry["adapter"]
        for entry in counts["ran_on"]
    ]
    suffix = f" ({'; '.join(where)})" if where else ""
    return f"embeddings: {counts['embedded']} text(s) embedded, {counts['cached']} from the cache{suffix}"
