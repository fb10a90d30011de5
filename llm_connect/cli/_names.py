"""Names a person typed for what the ledger holds: a task, a baseline, candidates, judges.

``route`` and ``labels queue`` take these as free text; a slip (``-j embedding`` for the grader id
``embedding:all-MiniLM-L6-v2``, ``gpt-4o-mni``) would otherwise read as "no grades" and look like
an answer. :func:`ungraded` says which of the names have no grades, what was graded instead, and
the closest graded name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from llm_connect._hints import closest

__all__ = ["ungraded"]


def _unknown(kind: str, name: str, known: Iterable[str], where: str) -> str:
    names = sorted(set(known))
    guess = closest(name, names)
    hint = f"; did you mean {guess!r}?" if guess else ""
    listed = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return f"{kind} {name!r} has no grades{where}{hint} (graded: {listed or 'none'})"


def ungraded(
    ledger: Any,
    task: str,
    *,
    baseline: str | None = None,
    candidates: Sequence[str] = (),
    graders: Sequence[str] = (),
) -> list[str]:
    """One sentence per name with no grades in the ledger (empty when every name has some).

    The task first (nothing else is checked when it has no grades); then the baseline, each
    candidate (as ``grades.candidate_model``) and each grader id, each among the task's grades.
    """
    totals = ledger.grade_totals()
    tasks = {t.task for t in totals}
    if task not in tasks:
        return [_unknown("task", task, tasks, "")]
    mine = [t for t in totals if t.task == task]
    where = f" on task {task!r}"
    out = []
    if baseline is not None and baseline not in {t.baseline_model for t in mine}:
        out.append(_unknown("baseline", baseline, (t.baseline_model for t in mine), where))
    models = {t.candidate_model for t in mine}
    out += [_unknown("candidate", c, models, where) for c in candidates if c not in models]
    ids = {t.grader_id for t in mine}
    out += [_unknown("judge", g, ids, where) for g in graders if g not in ids]
    return out
