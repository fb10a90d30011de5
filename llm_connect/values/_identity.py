"""A judge's identity as its grades record it, and a change of it (issue 37).

A grade's details name what the judge server said it was (``judge_model``: the served model,
``system_fingerprint`` where the server sends one), the prompt (``rubric_version``), the reply
format and the adapter. Two identities differ for drift purposes when the served model or the
fingerprint differs: the prompt and format are the judge's own settings, already part of its
grader id's configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "FIRST_GRADE",
    "SERVED_KEYS",
    "IdentityChange",
    "describe_change",
    "identity_changed",
    "identity_of",
]

IDENTITY_KEYS = ("judge_model", "system_fingerprint", "rubric_version", "response_format", "judge_adapter")
SERVED_KEYS = ("judge_model", "system_fingerprint")
"""The keys whose change means the model behind the judge's name changed."""
FIRST_GRADE = "its first grade on the task"
"""The reference of a judge with no anchor set: the identity its first grade on the task named."""


def identity_of(details: Mapping[str, Any]) -> dict[str, Any]:
    """What a grade's details say the judge was: its spec, the model the server said it served,
    its fingerprint, the prompt (rubric) version and the reply format (the keys present)."""
    out: dict[str, Any] = {k: details[k] for k in IDENTITY_KEYS if details.get(k) is not None}
    if isinstance(details.get("judge_spec"), Mapping):
        out["judge_spec"] = dict(details["judge_spec"])
    return out


def identity_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two identities (:func:`identity_of`) name another served model or fingerprint."""
    return any(old.get(k) != new.get(k) for k in SERVED_KEYS if k in old or k in new)


def describe_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The served keys that differ, as ``judge_model 'a' -> 'b'`` (comma-separated)."""
    return ", ".join(f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in SERVED_KEYS if old.get(k) != new.get(k))


@dataclass(frozen=True)
class IdentityChange:
    """A judge whose grades on a task and the identity its evidence was last vouched for under
    (``reference``: its newest drift check, its anchor set, or else its first grade on the task)
    name another served model or fingerprint. ``before`` and ``now`` are in time order: when the
    newest grade came after the reference, ``now`` is what that grade named; when a check or
    anchor set came after the newest grade (a check answered as a new model), ``now`` is the
    reference's identity and the task's grades were made as ``before``."""

    grader_id: str
    task: str
    reference: str
    """Where the vouched identity comes from (``check 12``, ``anchor set 3``, :data:`FIRST_GRADE`)."""
    before: Mapping[str, Any]
    now: Mapping[str, Any]
    seen_at: datetime
    """When ``now`` was seen: the newest grade's time, or the reference's when it is newer."""
    grades_newer: bool = True
    """Whether the newest grade is newer than the reference (``now`` is what the grades name)."""

    @property
    def why(self) -> str:
        """One sentence for the decision's reason and the CLI."""
        when = self.seen_at.strftime("%Y-%m-%d %H:%M UTC")
        change = describe_change(self.before, self.now)
        if not self.grades_newer:
            return (
                f"{self.grader_id}'s judge changed under its name ({change}): {self.reference} ({when}) "
                f"answered as the new one, while its grades on {self.task} were made by the old one"
            )
        head = (
            f"{self.grader_id}'s judge changed under its name "
            f"({change}; newest grade {when}, against {self.reference})"
        )
        if self.reference == FIRST_GRADE:
            return (
                f"{head}: its grades on {self.task} mix both and no anchor set measured whether they agree "
                f"(`llm-connect judges anchor --judge {self.grader_id} --task {self.task}` starts checking)"
            )
        return (
            f"{head}: a check says whether it still grades alike "
            f"(`llm-connect judges check --judge {self.grader_id} --task {self.task}`)"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form (what the stored decision keeps)."""
        return {
            "grader_id": self.grader_id,
            "task": self.task,
            "reference": self.reference,
            "before": {k: self.before.get(k) for k in SERVED_KEYS},
            "now": {k: self.now.get(k) for k in SERVED_KEYS},
            "seen_at": self.seen_at.isoformat(),
            "grades_newer": self.grades_newer,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IdentityChange:
        """Rebuild from :meth:`to_dict`."""
        return cls(
            grader_id=data["grader_id"],
            task=data["task"],
            reference=data["reference"],
            before=dict(data["before"]),
            now=dict(data["now"]),
            seen_at=datetime.fromisoformat(data["seen_at"]),
            grades_newer=bool(data.get("grades_newer", True)),
        )
