"""Human labels: what a person said about a candidate's answer to one case.

A label is keyed by (task, case id, candidate, annotator) and holds either a
``preference`` between the candidate's and the baseline's answers or a ``score``
(the candidate relative to the baseline on the judges' 0..1 scale). Both
reduce to one of three verdicts (:attr:`HumanLabel.verdict`), the classes
agreement is computed on.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from llm_connect.errors import LabelError

__all__ = [
    "LABEL_FIELDS",
    "PREFERENCES",
    "PREFERENCE_VALUES",
    "CaseLabels",
    "HumanLabel",
    "human_value",
    "score_verdict",
]

#: The three preferences a label may hold (and the three verdicts a score reduces to).
PREFERENCES: tuple[str, ...] = ("candidate", "baseline", "tie")

#: A label's fields in the order files carry them (export writes them in this order).
LABEL_FIELDS: tuple[str, ...] = (
    "task",
    "case_id",
    "candidate",
    "annotator",
    "preference",
    "score",
    "note",
    "run_id",
    "created_at",
)

#: Longest text the key fields and ``run_id`` may hold (the ledger's column width).
MAX_KEY_CHARS = 200


def score_verdict(score: float) -> str:
    """The verdict a 0..1 score stands for: above 0.5 ``candidate``, below ``baseline``, 0.5 ``tie``.

    The same split the judges' grades get when they are compared with people (0.5 is "as good as
    the baseline" on a pairwise judge's scale).
    """
    if score > 0.5:
        return "candidate"
    if score < 0.5:
        return "baseline"
    return "tie"


@dataclass(frozen=True)
class HumanLabel:
    """One person's judgement of a candidate's answer to one case, against the baseline's.

    Exactly one of ``preference`` (``"candidate"``, ``"baseline"`` or ``"tie"``) and ``score``
    (0..1, the candidate relative to the baseline) is given. Every field is checked when the
    label is built; a bad one raises :class:`~llm_connect.errors.LabelError` naming the field.

    Example::

        HumanLabel("support", "c12", "gpt-4o-mini", "ana", preference="baseline", note="too terse")
    """

    task: str
    """The task the case belongs to (as graded)."""
    case_id: str
    """The case's id in the suite (as graded)."""
    candidate: str
    """The candidate as asked: the model name (``gpt-4o-mini``) or the adapter id
    (``openai:gpt-4o-mini``); the ledger stores the model name (``grades.candidate_model``)."""
    annotator: str
    """Who made the label."""
    preference: str | None = None
    """``"candidate"`` (its answer is better), ``"baseline"`` or ``"tie"``."""
    score: float | None = None
    """0..1: the candidate's answer relative to the baseline's, on the judges' scale."""
    note: str | None = None
    """Free text: why (empty text is stored as none)."""
    run_id: str | None = None
    """The run whose answers were labelled, when known (empty text is stored as none)."""
    created_at: datetime | None = None
    """When the label was made (set by the ledger when it stores one that has none)."""

    def __post_init__(self) -> None:
        for name in ("task", "case_id", "candidate", "annotator"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise LabelError(f"must be a non-empty string, not {value!r}", field=name)
            if len(value) > MAX_KEY_CHARS:
                raise LabelError(f"is {len(value)} characters long (at most {MAX_KEY_CHARS})", field=name)
        if (self.preference is None) == (self.score is None):
            given = "both" if self.preference is not None else "neither"
            raise LabelError(
                f"a label holds either a preference or a score, and this one has {given}",
                field="preference" if given == "neither" else "score",
            )
        if self.preference is not None and self.preference not in PREFERENCES:
            raise LabelError(
                f"{self.preference!r} is not one of {', '.join(PREFERENCES)}", field="preference"
            )
        if self.score is not None:
            object.__setattr__(self, "score", _score(self.score))
        for name in ("note", "run_id"):  # empty text is no text: "" and None round-trip alike
            if getattr(self, name) == "":
                object.__setattr__(self, name, None)
        if self.note is not None and not isinstance(self.note, str):
            raise LabelError(f"must be text, not {type(self.note).__name__}", field="note")
        if self.run_id is not None and (not isinstance(self.run_id, str) or len(self.run_id) > MAX_KEY_CHARS):
            raise LabelError(
                f"must be text of at most {MAX_KEY_CHARS} characters, not {self.run_id!r}", field="run_id"
            )
        if self.created_at is not None and not isinstance(self.created_at, datetime):
            raise LabelError(f"must be a datetime, not {type(self.created_at).__name__}", field="created_at")

    @property
    def verdict(self) -> str:
        """``"candidate"``, ``"baseline"`` or ``"tie"``: the preference, or the score split at 0.5
        (:func:`score_verdict`)."""
        if self.preference is not None:
            return self.preference
        assert self.score is not None  # one of the two is set (checked when built)
        return score_verdict(self.score)

    @property
    def key(self) -> tuple[str, str, str, str]:
        """``(task, case_id, candidate, annotator)``: at most one stored label per key."""
        return (self.task, self.case_id, self.candidate, self.annotator)

    def same_content(self, other: HumanLabel) -> bool:
        """Whether ``other`` says the same: preference, score, note and run id (not when it was made)."""
        return (self.preference, self.score, self.note, self.run_id) == (
            other.preference,
            other.score,
            other.note,
            other.run_id,
        )

    def describe(self) -> str:
        """The label's value in a few words: ``preference 'baseline'`` or ``score 0.25``, and its note."""
        value = f"preference {self.preference!r}" if self.preference is not None else f"score {self.score!r}"
        extra = "".join(
            f", {name} {getattr(self, name)!r}"
            for name in ("note", "run_id")
            if getattr(self, name) is not None
        )
        return value + extra

    def to_dict(self) -> dict[str, Any]:
        """The label as plain JSON-ready values (``created_at`` as ISO 8601 text), fields in
        :data:`LABEL_FIELDS` order."""
        data: dict[str, Any] = {name: getattr(self, name) for name in LABEL_FIELDS}
        if self.created_at is not None:
            data["created_at"] = self.created_at.isoformat()
        return data


def _score(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LabelError(f"must be a number from 0 to 1, not {value!r}", field="score")
    score = float(value)
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise LabelError(f"{value!r} is outside 0..1", field="score")
    return score


@dataclass(frozen=True)
class CaseLabels:
    """Every label of one (task, candidate, case), with what the annotators say together.

    The form the calibration against people reads: one row per case, the majority preference
    and the mean score beside the labels themselves.
    """

    task: str
    candidate: str
    """The candidate model as graded (``grades.candidate_model``)."""
    case_id: str
    labels: tuple[HumanLabel, ...]
    """The case's labels, one per annotator, ordered by annotator."""

    @property
    def annotators(self) -> int:
        """How many people labelled the case."""
        return len(self.labels)

    @property
    def preference(self) -> str | None:
        """The majority preference over the labels that hold one; ``"tie"`` when the most
        common preferences are equally common (one says candidate, one baseline), ``None``
        when no label holds a preference."""
        return _majority([label.preference for label in self.labels if label.preference is not None])

    @property
    def verdict(self) -> str:
        """The majority verdict over every label (scores split at 0.5, :func:`score_verdict`);
        ``"tie"`` when the most common verdicts are equally common."""
        return _majority([label.verdict for label in self.labels]) or "tie"

    @property
    def value(self) -> float:
        """The people's value of the case on the judges' 0..1 scale (:func:`human_value`)."""
        value = human_value(
            [label.preference for label in self.labels if label.preference is not None],
            [label.score for label in self.labels if label.score is not None],
        )
        assert value is not None  # a case has at least one label, each with a value
        return value

    @property
    def mean_score(self) -> float | None:
        """The mean of the labels' scores; ``None`` when no label holds a score."""
        scores = [label.score for label in self.labels if label.score is not None]
        return sum(scores) / len(scores) if scores else None


def _majority(values: list[str]) -> str | None:
    if not values:
        return None
    counts = Counter(values).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return "tie"
    return counts[0][0]


PREFERENCE_VALUES: dict[str, float] = {"candidate": 1.0, "tie": 0.5, "baseline": 0.0}
"""A preference on the judges' 0..1 scale (a pairwise judge's grade: the candidate's win)."""


def human_value(preferences: Sequence[str], scores: Sequence[float]) -> float | None:
    """What people say about one case, on the judges' 0..1 scale: the annotators' majority
    preference (candidate 1, tie 0.5, baseline 0; equally common preferences are a tie) when any
    label holds a preference, else the mean score (``None`` without either).

    The value routing on what people would say (``Router.decide(target="human")``) bounds.
    """
    if len(preferences) == 1:  # one annotator, the common case: no counting
        return PREFERENCE_VALUES[preferences[0]]
    if not preferences and len(scores) == 1:
        return float(scores[0])
    majority = _majority(list(preferences))
    if majority is not None:
        return PREFERENCE_VALUES[majority]
    return sum(scores) / len(scores) if scores else None
