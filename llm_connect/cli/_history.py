"""A task's routing history (``route --history``) and the rollback hook (``--on-rollback``).

The history is the stored decisions of a task, oldest first, folded into periods: a period is
a run of decisions against one baseline that chose the same model, with no rollback made inside
it (routing code that asks after every batch stores thousands of the same decision). Each
period says what was chosen, from which decision to which, how many decisions kept it, and,
when it began with a rollback, the rollback's reason.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["Period", "history_lines", "periods", "run_rollback_hook"]

HOOK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Period:
    """Decisions of a task against one baseline that chose the same model in a row."""

    baseline: str
    model: str
    first_id: int | None
    last_id: int | None
    first_at: datetime
    last_at: datetime
    decisions: int
    event: str
    """``routed`` (a candidate chosen), ``baseline`` (kept), ``rollback`` (the watch rolled a
    candidate back at the period's first decision)."""
    why: str
    """The first decision's reason (the rollback's own, for a rollback)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``route --history --json``)."""
        return {
            "baseline": self.baseline, "model": self.model, "event": self.event,
            "first_decision_id": self.first_id, "last_decision_id": self.last_id,
            "first_at": self.first_at.isoformat(), "last_at": self.last_at.isoformat(),
            "decisions": self.decisions, "why": self.why,
        }  # fmt: skip


def periods(decisions: Sequence[Any]) -> list[Period]:
    """Fold stored decisions (oldest first) into :class:`Period` rows, per baseline in time order."""
    out: list[Period] = []
    current: dict[str, int] = {}  # baseline -> index of its open period in ``out``
    for d in decisions:
        rolled = d.rollback is not None and d.rollback.new
        at = current.get(d.baseline)
        if at is not None and out[at].model == d.model and not rolled:
            last = out[at]
            out[at] = Period(
                last.baseline, last.model, last.first_id, d.decision_id, last.first_at, d.created_at,
                last.decisions + 1, last.event, last.why,
            )  # fmt: skip
            continue
        event = "rollback" if rolled else ("routed" if d.model != d.baseline else "baseline")
        why = d.rollback.why if rolled else d.reason
        current[d.baseline] = len(out)
        out.append(
            Period(
                d.baseline, d.model, d.decision_id, d.decision_id, d.created_at, d.created_at, 1, event, why
            )
        )
    return out


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


def history_lines(task: str, rows: Sequence[Period]) -> list[str]:
    """The history as text: one line per period, the reason indented under it."""
    if not rows:
        return [f"no routing decisions stored for task {task!r}"]
    lines = [f"routing history of {task} ({len(rows)} period(s), oldest first):"]
    for p in rows:
        span = f"#{p.first_id}" if p.first_id == p.last_id else f"#{p.first_id}..#{p.last_id}"
        lines.append(
            f"  {_when(p.first_at)}  {p.event:<8}  {p.model}  (baseline {p.baseline}; {span}, "
            f"{p.decisions} decision(s), last {_when(p.last_at)})"
        )
        lines.append(f"      {p.why}")
    return lines


def run_rollback_hook(command: str, decision: Any) -> str | None:
    """Run ``command`` (through the shell) with the decision as JSON on its standard input (a
    :class:`~llm_connect.routing.RoutingDecision` or ``SliceDecisions``, as ``route --json``
    prints it); the problem in words when it failed or timed out (``None``: it exited 0)."""
    data = decision.to_dict()  # a RoutingDecision, or SliceDecisions (its slices and their rollbacks)
    data.setdefault("decision_id", decision.decision_id)
    payload = json.dumps(data, default=str)
    try:
        done = subprocess.run(  # the user's own command, through the shell as --on-rollback gives it
            command, shell=True, input=payload, text=True, capture_output=True, timeout=HOOK_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return f"--on-rollback command did not finish within {HOOK_TIMEOUT_S:.0f} s: {command}"
    except OSError as exc:
        return f"--on-rollback command could not start ({exc}): {command}"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout or "").strip()[-500:]
        return f"--on-rollback command exited {done.returncode}: {command}" + (f": {tail}" if tail else "")
    return None
