"""What ``llm-connect grade`` says about embeddings: texts embedded and texts read from the cache."""

from __future__ import annotations

from typing import Any

__all__ = ["embedding_json", "embedding_line"]


def embedding_json(outcome: Any) -> dict[str, int] | None:
    """``{"embedded": N, "cached": M}`` (distinct texts per call, summed over the run), or
    ``None`` when no judge embedded anything."""
    context = getattr(outcome, "judge_context", None)
    counts = context.embedding_counts() if context is not None else None
    if counts is None or counts.embedded + counts.cached == 0:
        return None
    return counts.to_dict()  # type: ignore[no-any-return]


def embedding_line(outcome: Any) -> str | None:
    """The report's line about embeddings, or ``None`` when no judge embedded anything."""
    counts = embedding_json(outcome)
    if counts is None:
        return None
    return f"embeddings: {counts['embedded']} text(s) embedded, {counts['cached']} from the cache"
