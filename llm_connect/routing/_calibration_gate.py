"""Which stored calibration gates an LLM judge's grades: people's verdict first.

``Router`` uses an LLM judge's grades only after a passing calibration
(``contracts/calibration.md``). The calibration that counts is
:func:`gating_calibration`'s: the newest one whose ``"human"`` reference
reached a verdict (pass or fail), for the task or else over all tasks, because
where people labelled the judge's cases they decide; without one, the newest
calibration, as :meth:`QualityLedger.latest_calibration` finds it. So a judge
that failed against people does not route, whatever a later calibration
against non-LLM references says, until a newer calibration against people passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_connect.ledger import CalibrationRow, QualityLedger

__all__ = ["HUMAN", "gating_calibration", "human_decided"]

HUMAN = "human"
"""The reference name of people's labels in a stored calibration (its ``references`` and figures)."""


def human_decided(figures: Mapping[str, Any] | None) -> bool:
    """Whether stored calibration figures hold a ``"human"`` reference with a verdict (pass or fail)."""
    refs = (figures or {}).get("references")
    if not isinstance(refs, list):
        return False
    return any(
        isinstance(ref, Mapping) and ref.get("reference") == HUMAN and ref.get("status") in ("pass", "fail")
        for ref in refs
    )


def gating_calibration(ledger: QualityLedger, grader_id: str, *, task: str | None) -> CalibrationRow | None:
    """The calibration that decides whether ``grader_id``'s grades may route on ``task``.

    The newest calibration of the task whose people's reference reached a verdict, else the
    newest such task-less one, else :meth:`QualityLedger.latest_calibration`; ``None`` when the
    judge has no calibration.
    """
    by_people = [
        c for c in ledger.calibrations(grader_id) if HUMAN in c.references and human_decided(c.figures)
    ]
    for wanted in [task, None] if task is not None else [None]:
        found = [c for c in by_people if c.task == wanted]
        if found:
            return max(found, key=lambda c: (c.created_at, c.id))
    return ledger.latest_calibration(grader_id, task=task)
