"""The report's judge-check timelines (issue 37): each anchored judge's checks, oldest first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = ["CHECK_CLASS", "judge_checks"]

CHECK_CLASS = {"stable": "v-proven", "drifted": "v-ruled-out", "not settled": "v-insufficient"}
"""The verdict style of each check status (``incomplete``: none, drawn hollow)."""


def judge_checks(ledger: QualityLedger, tasks: set[str] | None) -> list[dict[str, Any]]:
    """Per anchor set (newest judge and task first when several), its judge, task, whether it is
    the active one, and each check: date, status, mean change, share changed, judge calls."""
    from llm_connect.ledger import AnchorStore

    store = AnchorStore(ledger.engine)
    out = []
    for anchor in store.anchors():
        if tasks is not None and anchor.task not in tasks:
            continue
        checks = []
        for check in store.checks(anchor.id):
            figures = check.figures or {}
            mean = figures.get("mean_change")
            share = figures.get("changed_share")
            title = f"check {check.id}, {check.created_at.strftime('%Y-%m-%d %H:%M UTC')}: {check.status}"
            if isinstance(mean, int | float) and isinstance(share, int | float):
                title += f", mean change {mean:.3f}, {share:.0%} of cases changed"
            checks.append(
                {
                    "id": check.id,
                    "status": check.status,
                    "css": CHECK_CLASS.get(check.status, "v-incomplete"),
                    "created": check.created_at.strftime("%Y-%m-%d %H:%M UTC"),
                    "mean": mean,
                    "calls": check.calls,
                    "title": title,
                }
            )
        out.append(
            {
                "anchor": anchor.id,
                "judge": anchor.grader_id,
                "task": anchor.task,
                "active": anchor.active,
                "cases": len(anchor.cases),
                "frozen": anchor.created_at.strftime("%Y-%m-%d %H:%M UTC"),
                "served": anchor.identity.get("judge_model"),
                "note": anchor.note,
                "checks": checks,
                "last": checks[-1]["status"] if checks else None,
            }
        )
    return out
