"""Per task: the routing decision and every candidate x judge figure, from the evidence module.

Nothing here decides or computes a statistic of its own. The decision is
``Router.evaluate`` under the caller's :class:`~llm_connect.routing.RoutingPolicy`
(the one decision function ``route``, ``grade`` and the gate use; never stored:
a report does not write to the ledger). Each candidate x judge figure is
:func:`llm_connect.routing.assess` over the ledger's per-case totals, with the
policy's ``min_quality`` / ``min_samples`` / ``confidence`` and the Bonferroni
share ``alpha = (1 - confidence) / k``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_connect.values import DEFAULT_WIN_RATE, GraderEvidence, RoutingDecision, RoutingPolicy

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger
    from llm_connect.routing import Router

__all__ = ["BINS", "GroupFigures", "TaskReport", "decide_task", "task_sides"]

BINS = 10
"""Bins of the score distributions (0.0-0.1, ..., 0.9-1.0)."""


@dataclass(frozen=True)
class GroupFigures:
    """One candidate x judge of a task: the evidence and what the report shows beside it."""

    candidate: str
    grader_id: str
    evidence: GraderEvidence
    """What :func:`llm_connect.routing.assess` says (cases, grades, mean, bounds, delta, status)."""
    routes: bool
    """Whether the judge decides routing (``False``: diagnostic, or an ignored LLM judge)."""
    mean_cost_usd: float | None
    mean_latency_ms: float | None
    cost_ratio: float | None
    """Candidate mean cost over the baseline's, on the same grades."""
    latency_ratio: float | None
    histogram: tuple[int, ...]
    """Distinct cases per score bin (:data:`BINS` bins of the per-case mean quality)."""
    people: GraderEvidence | None = None
    """What people would say (``Router.decide(target="human")``'s evidence: the judge's grades
    plus the labels of sampled cases), when the sampler or people have touched this group."""

    @property
    def people_line(self) -> str | None:
        """The judge's and the people's estimate side by side (``routing.judge_and_people``)."""
        from llm_connect.routing import judge_and_people

        return None if self.people is None else judge_and_people(self.people)


@dataclass(frozen=True)
class TaskReport:
    """Everything the report says about one task."""

    decision: RoutingDecision
    """The decision ``Router.decide`` would take on the same ledger (not stored)."""
    groups: tuple[GroupFigures, ...]
    """Every candidate x judge, candidates in order, judges in order."""
    graders: tuple[str, ...]
    """Every judge of the task in the selection (routing and diagnostic)."""

    @property
    def task(self) -> str:
        """The task."""
        return self.decision.task


def task_sides(
    keys: Iterable[tuple[str, str, str, str, int]],
) -> dict[str, tuple[str, list[str], list[str]]]:
    """Per task: its baseline (the one with the most grades), its candidates and its judges in
    order of appearance, from ``(task, baseline, candidate, grader, grades)`` keys."""
    weights: dict[str, dict[str, int]] = {}
    members: dict[str, list[tuple[str, str, str]]] = {}
    for task, baseline, candidate, grader, n in keys:
        w = weights.setdefault(task, {})
        w[baseline] = w.get(baseline, 0) + n
        members.setdefault(task, []).append((baseline, candidate, grader))
    out = {}
    for task, w in weights.items():
        baseline = max(w, key=lambda b: (w[b], -list(w).index(b)))
        mine = [(c, g) for b, c, g in members[task] if b == baseline]
        out[task] = (
            baseline,
            list(dict.fromkeys(c for c, _ in mine)),
            list(dict.fromkeys(g for _, g in mine)),
        )
    return out


def _ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base <= 0:
        return None
    return value / base


def _histogram(series: Any) -> tuple[int, ...]:
    """Cases per bin of the per-case mean (``sum / n`` clipped to 0..1; no grades: 0), in numpy:
    the same floating-point steps as ``min(BINS - 1, int(value * BINS))`` per case."""
    if series is None or not series.grades:
        return (0,) * BINS
    import numpy as np

    n = np.asarray(series.grades, dtype=np.float64)
    sums = np.asarray(series.sum_quality, dtype=np.float64)
    values = np.zeros_like(sums)
    np.divide(sums, n, out=values, where=n != 0)
    values = np.clip(values, 0.0, 1.0)
    bins = np.minimum(BINS - 1, (values * BINS).astype(np.int64))
    return tuple(int(c) for c in np.bincount(bins, minlength=BINS))


def decide_task(
    ledger: QualityLedger,
    task: str,
    *,
    baseline: str,
    candidates: Sequence[str],
    grader_ids: Sequence[str],
    policy: RoutingPolicy,
    router: Router | None = None,
) -> TaskReport:
    """The decision and the figures of every candidate x judge of ``task`` (reads only).

    The decision is ``Router.evaluate`` under ``policy.for_judges(grader_ids)`` (the one
    decision function; nothing is stored): the task's judges that ``policy.route_on`` names
    decide (every judge of the task when it names none); the others are shown as diagnostics. The
    figures per candidate x judge are the judges' own (:func:`llm_connect.routing.assess`),
    with people's estimate beside them once the sampler or people have touched the group.
    """
    from llm_connect.routing import Router, assess, candidate_alpha

    cands = list(dict.fromkeys(candidates))
    graders = list(dict.fromkeys(grader_ids))
    decision = (router or Router(ledger)).evaluate(
        task, baseline=baseline, candidates=cands, policy=policy.for_judges(graders)
    )
    totals = (
        ledger.grade_totals(task=task, baseline_model=baseline, candidate_model=cands, grader_id=graders)
        if cands and graders
        else []
    )
    by_key = {(t.candidate_model, t.grader_id): t for t in totals}
    series = (
        {
            (s.candidate_model, s.grader_id): s
            for s in ledger.case_series(
                task=task, baseline_model=baseline, candidate_model=cands, grader_id=graders
            )
        }
        if cands and graders
        else {}
    )
    alpha = candidate_alpha(policy.confidence, len(cands))
    usable = set(decision.used_grader_ids)
    # What the decision computed is shown as it is, not computed again: its routing judges'
    # own evidence on the judges' target, or what people would say on people's.
    decided = {(c.model, ev.grader_id): ev for c in decision.candidates for ev in c.graders}
    on_people = decision.target == "human"
    people = dict(decided) if on_people else {}
    people.update(
        _people(
            ledger,
            task,
            baseline,
            cands,
            [g for g in graders if not (on_people and g in usable)],
            # people's scale: an unstated threshold is the people's target default (a tie is 0.5)
            min_quality=policy.min_quality if policy.stated or on_people else DEFAULT_WIN_RATE,
            min_samples=policy.min_samples,
            alpha=alpha,
        )
    )
    judged = {} if on_people else decided
    groups = []
    for model in cands:
        for g in graders:
            t = by_key.get((model, g))
            cost = None if t is None else t.candidate_mean_cost_usd
            latency = None if t is None else t.candidate_mean_latency_ms
            groups.append(
                GroupFigures(
                    candidate=model,
                    grader_id=g,
                    evidence=judged.get((model, g))
                    or assess(
                        series.get((model, g)),
                        g,
                        min_quality=policy.threshold(g),
                        min_samples=policy.min_samples,
                        alpha=alpha,
                        confidence=policy.confidence,
                        fixed_n=policy.fixed_n,
                    ),
                    routes=g in usable,
                    mean_cost_usd=cost,
                    mean_latency_ms=latency,
                    cost_ratio=None if t is None else _ratio(cost, t.baseline_mean_cost_usd),
                    latency_ratio=None if t is None else _ratio(latency, t.baseline_mean_latency_ms),
                    histogram=_histogram(series.get((model, g))),
                    people=_touched(people.get((model, g))),
                )
            )
    return TaskReport(decision=decision, groups=tuple(groups), graders=tuple(graders))


def _people(
    ledger: QualityLedger,
    task: str,
    baseline: str,
    candidates: Sequence[str],
    graders: Sequence[str],
    *,
    min_quality: float,
    min_samples: int,
    alpha: float,
) -> dict[tuple[str, str], GraderEvidence]:
    """The human-target evidence of each (candidate, judge), as ``Router.decide(target="human")``
    computes it (read only; nothing stored)."""
    if not candidates or not graders:
        return {}
    from llm_connect.routing import human_evidence

    return human_evidence(
        ledger,
        task,
        baseline=baseline,
        candidates=candidates,
        grader_ids=graders,
        min_quality=min_quality,
        min_samples=min_samples,
        alpha=alpha,
    )


def _touched(ev: GraderEvidence | None) -> GraderEvidence | None:
    """``ev`` when the sampler or people have touched its group (shown beside the judge), else ``None``."""
    if ev is None or not (
        ev.labels_used or ev.labels_pending or ev.labels_left_out or ev.human_estimate is not None
    ):
        return None
    return ev
