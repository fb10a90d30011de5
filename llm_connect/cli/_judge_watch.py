"""Judge drift checks inside ``grade`` (issue 37): ``--check-judges-every N`` and a changed identity.

For each judge of the run with an active anchor set on a task of the suite, ``grade`` runs
``judges check`` after every N graded cases (``--check-judges-every``), and once at the end
when the run's grades say the judge's identity (the served model or its fingerprint) changed
since the anchor set was frozen. A check asks fresh judges built from the stored spec with
their own adapters (not the run's shared call limit, which the grading loop holds while it
waits), so it never waits on the run. Routing, decided after grading, then sees each check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JudgeWatch"]


@dataclass
class JudgeWatch:
    """Runs the drift checks of one ``grade`` run and keeps what they said."""

    ledger: Any
    tasks: Sequence[str]
    grader_ids: Sequence[str]
    base_url: str | None = None
    api_key: str | None = None
    every: int | None = None
    reports: list[tuple[str, Any]] = field(default_factory=list)
    identity_changes: list[dict[str, Any]] = field(default_factory=list)
    """Judges whose grades in this run name another served model than their earlier grades."""
    _fired: int = 0
    _anchored: list[tuple[str, str]] | None = None

    def anchored(self) -> list[tuple[str, str]]:
        """(grader id, task) pairs of the run with an active anchor set."""
        if self._anchored is None:
            from llm_connect.calibration import anchor_store

            store = anchor_store(self.ledger)
            self._anchored = [
                (gid, task)
                for gid in self.grader_ids
                for task in self.tasks
                if store.active_anchor(gid, task) is not None
            ]
        return self._anchored

    def _check(self, why: str, pairs: Sequence[tuple[str, str]]) -> None:
        from llm_connect.calibration import check_judge, rebuild_judge
        from llm_connect.grading import JudgeContext

        def make_adapter(spec: str) -> Any:
            from llm_connect.adapters import adapter_from_spec

            return adapter_from_spec(spec, base_url=self.base_url, api_key=self.api_key)

        for gid, task in pairs:
            judge = rebuild_judge(self.ledger, gid, JudgeContext(make_llm_adapter=make_adapter), task=task)
            self.reports.append((why, check_judge(self.ledger, judge, task)))

    def on_progress(self, done: int) -> None:
        """After ``done`` graded cases: a check of every anchored judge each ``every`` cases."""
        if not self.every or done // self.every <= self._fired:
            return
        self._fired = done // self.every
        pairs = self.anchored()
        if pairs:
            self._check(f"after {done} graded cases", pairs)

    def finish(self, rows: Sequence[Any]) -> None:
        """At the end of the run: a check of each anchored judge whose grades in this run name
        another served model or fingerprint than its anchor set (unless one ran already)."""
        from llm_connect.calibration import anchor_store
        from llm_connect.values import identity_changed, identity_of

        self._served_changes(rows)
        checked = {(r.grader_id, r.task) for _, r in self.reports}
        store = anchor_store(self.ledger)
        changed: list[tuple[str, str]] = []
        for gid, task in self.anchored():
            if (gid, task) in checked:
                continue
            mine = [r for r in rows if r.grader_id == gid and r.task == task]
            anchor = store.active_anchor(gid, task)
            if not mine or anchor is None:
                continue
            now = identity_of(max(mine, key=lambda r: r.id).details)
            if identity_changed(anchor.identity, now):
                changed.append((gid, task))
        if changed:
            self._check("the judge's identity changed since its anchor set", changed)

    def _served_changes(self, rows: Sequence[Any]) -> None:
        """Note each judge and task whose grades in this run were served by a model its earlier
        grades of the task never name (the model behind the judge's name changed)."""
        from llm_connect.calibration import anchor_store

        ran: dict[tuple[str, str], set[str]] = {}
        first: dict[tuple[str, str], int] = {}
        for r in rows:
            served = r.details.get("judge_model") if isinstance(r.details, Mapping) else None
            if served is not None:
                key = (r.grader_id, r.task)
                ran.setdefault(key, set()).add(served)
                first[key] = min(first.get(key, r.id), r.id)
        store = anchor_store(self.ledger)
        for key in sorted(ran):
            before = store.served_models(key[0], key[1], before_id=first[key])
            new = sorted(ran[key] - before)
            if before and new:
                self.identity_changes.append(
                    {"judge": key[0], "task": key[1], "served_now": new, "served_before": sorted(before)}
                )

    def to_json(self) -> list[dict[str, Any]]:
        """The checks run, in order, each with why it ran."""
        return [{"why_run": why, **report.to_dict()} for why, report in self.reports]
