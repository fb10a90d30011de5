"""The report's slice tables (issue 38): each task's newest stored decision made with slices.

``route --slice-by`` and ``grade --slice-by`` store the whole-task decision with one decision per
slice (``Router.decide_slices``); the report shows the newest such decision of each of its tasks
as stored (its id and time say which), and computes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = ["slice_tables"]


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def slice_tables(ledger: QualityLedger, tasks: Sequence[str]) -> list[dict[str, Any]]:
    """Per task of the report with a stored slice decision: the key, the decision's id and time,
    the e-BH level, and a row per slice (slice, cases, decision, bound, e-value, status)."""
    from llm_connect.ledger import SliceStore
    from llm_connect.values import SliceDecisions

    store = SliceStore(ledger.engine)
    out = []
    for task in dict.fromkeys(tasks):
        found = store.newest_sliced(task)
        if found is None:
            continue
        decision_id, evidence = found
        sliced = SliceDecisions.from_dict(evidence | {"decision_id": decision_id})
        rows = []
        for s in sliced.slices:
            shown = s.shown
            rows.append(
                {
                    "name": s.name,
                    "cases": s.cases,
                    "model": s.model,
                    "routed": s.routed,
                    "status": "proven" if s.routed else (shown.status if shown else "no candidates"),
                    "candidate": None if shown is None else shown.model,
                    "bound": _figure(None if shown is None else shown.lower_bound),
                    "e_value": "-" if shown is None else f"{shown.e_value:.3g}",
                }
            )
        out.append(
            {
                "task": task,
                "slice_by": sliced.slice_by,
                "decision_id": decision_id,
                "created": sliced.whole.created_at.strftime("%Y-%m-%d %H:%M UTC"),
                "baseline": sliced.whole.baseline,
                "whole": sliced.whole.model,
                "alpha": f"{1 - sliced.whole.confidence:g}",
                "cuts": None
                if sliced.length_cuts is None
                else ", ".join(f"{c:g}" for c in sliced.length_cuts),
                "rows": rows,
            }
        )
    return out
