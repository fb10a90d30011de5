"""Single-response scorers: the score, the scorer protocol, relative quality.

The judge that compares two scores, :class:`~llm_connect.grading.judges.RelativeJudge`,
lives with the other judges in :mod:`llm_connect.grading.judges`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from llm_connect.values import Case, validate_quality_score

__all__ = ["PathResolver", "Score", "Scorer", "WorkingDirectory", "relative_quality"]


@dataclass(frozen=True)
class Score:
    """One response's score: ``value`` in 0..1 plus evidence in ``details``."""

    value: float
    """The score, validated to lie in 0.0..1.0."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """JSON-serialisable evidence (what matched, what was missing, errors)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", validate_quality_score(self.value, what="score"))


@runtime_checkable
class Scorer(Protocol):
    """Scores one response on its own (no baseline).

    ``name`` becomes the grader id of the
    :class:`~llm_connect.grading.judges.RelativeJudge` built on it
    and should carry the scorer's version or distinguishing option
    (``vrty:1.0.1``, ``format:json``). ``spec`` is the registry spec that
    rebuilds the scorer's judge (``{"name": ..., "args": {...}}``).

    A scorer that asks an LLM must also set ``asks_llm = True`` (the safety
    scorer with an LLM safety judge does); :class:`~llm_connect.grading.judges.RelativeJudge` reads it
    with ``False`` as the default, so routing gates such grades until the
    judge is calibrated.
    """

    name: str
    spec: Mapping[str, Any]

    def score(self, text: str, *, prompt: str, case: Case | None = None) -> Score:
        """Score ``text`` as an answer to ``prompt``."""
        ...


def relative_quality(baseline: float, candidate: float) -> float:
    """Candidate quality relative to the baseline.

    1.0 when the candidate scores at least the baseline (so 1.0 when both are
    0), otherwise ``candidate / baseline``. Gating on ``quality >= k`` is then
    VRTY's rule "candidate >= k x baseline on the same prompt".
    """
    if candidate >= baseline:
        return 1.0
    ratio = candidate / baseline  # baseline > candidate >= 0, so baseline > 0
    return min(1.0, max(0.0, ratio)) if math.isfinite(ratio) else 0.0


@runtime_checkable
class PathResolver(Protocol):
    """Turns a file option or case field into a path (the judge registry's
    :class:`~llm_connect.grading.judges.JudgeContext` is one)."""

    def resolve_path(self, value: str | Path) -> Path:
        """``value`` as a path, relative paths resolved against some base folder."""
        ...


class WorkingDirectory:
    """The default :class:`PathResolver`: relative paths against the working directory
    at construction time."""

    def __init__(self, base_dir: Path | None = None) -> None:
        self.base_dir = base_dir or Path.cwd()

    def resolve_path(self, value: str | Path) -> Path:
        """``value`` as a path, relative to :attr:`base_dir` when not absolute."""
        path = Path(value)
        return path if path.is_absolute() else self.base_dir / path
