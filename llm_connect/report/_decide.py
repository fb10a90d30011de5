"""Per task: the routing decision and every candidate x judge figure, from the evidence module.

Nothing here computes a statistic of its own: each candidate x judge figure is
:func:`llm_connect.routing.assess` over the ledger's per-case totals (the
function ``Router.decide``, the ``grade`` table and ``ledger summary`` use, with
the same ``min_quality`` / ``min_samples`` / ``confidence`` and the Bonferroni
share ``alpha = (1 - confidence) / k``), and the choice is the router's rule:
the cheapest candidate proven on every usable routing judge (an LLM judge only
after a passing calibration, :meth:`Router.usable_graders`), else the baseline.
The decision is built as a :class:`~llm_connect.routing.RoutingDecision` but
never stored: a report does not write to the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError
from llm_connect.values import CandidateEvidence, GraderEvidence, RoutingDecision
from llm_connect.values._decision import TARGETS

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = ["BINS", "GroupFigures", "TaskReport", "check_settings", "decide_task", "task_sides"]

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


def check_settings(min_quality: float, min_samples: int, confidence: float) -> None:
    """Raise :class:`ConfigurationError` for settings the router would refuse."""
    if not 0.0 <= min_quality <= 1.0:
        raise ConfigurationError(f"min_quality must lie in 0..1, not {min_quality!r}")
    if not 0.0 < confidence < 1.0:
        raise ConfigurationError(f"confidence must lie strictly between 0 and 1, not {confidence!r}")
    if isinstance(min_samples, bool) or not isinstance(min_samples, int) or min_samples < 2:
        raise ConfigurationError(f"min_samples must be an int >= 2, not {min_samples!r}")


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


def _weighted(pairs: Sequence[tuple[float | None, int]]) -> float | None:
    """Mean of per-group means weighted by their counts of known values (as the router does)."""
    total = sum(c for m, c in pairs if m is not None and c)
    if total == 0:
        return None
    return sum(float(m) * c for m, c in pairs if m is not None and c) / total


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
    route_on: Sequence[str] = (),
    min_quality: float,
    confidence: float,
    min_samples: int,
    target: str = "judge",
) -> TaskReport:
    """The decision and the figures of every candidate x judge of ``task`` (reads only).

    ``route_on`` narrows the judges that decide (default: every judge given);
    the others are shown as diagnostic. ``target="human"`` decides on what people would say,
    as ``Router.decide(target="human")`` does (each routing judge's grades corrected by
    people's labels of the sampled cases; an LLM judge needs no calibration there); the
    figures per candidate x judge stay the judges', with people's estimate beside them.
    """
    from llm_connect.routing import Router, assess, candidate_alpha, cheapest_proven, explain_decision

    cands = list(dict.fromkeys(candidates))
    graders = list(dict.fromkeys(grader_ids))
    routing = [g for g in graders if not route_on or g in route_on]
    if target not in TARGETS:
        raise ConfigurationError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    on_people = target == "human"
    # The router's rule: people's labels correct an LLM judge's bias, so the human target
    # needs no calibration (``Router.decide`` passes the same).
    used, ignored = (
        Router(ledger).usable_graders(task, routing, allow_uncalibrated=on_people) if cands else (routing, [])
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
    alpha = candidate_alpha(confidence, len(cands))
    people = _people(
        ledger, task, baseline, cands, graders, min_quality=min_quality, min_samples=min_samples, alpha=alpha
    )
    evidence = {
        (m, g): assess(
            series.get((m, g)),
            g,
            min_quality=min_quality,
            min_samples=min_samples,
            alpha=alpha,
            confidence=confidence,
        )
        for m in cands
        for g in graders
    }
    usable = set(used)
    records = [t for t in totals if t.grader_id in usable]
    base_cost = _weighted([(r.baseline_mean_cost_usd, r.baseline_cost_n) for r in records])
    base_latency = _weighted([(r.baseline_mean_latency_ms, r.baseline_latency_n) for r in records])
    found: list[CandidateEvidence] = []
    for model in cands:
        mine = [by_key[(model, g)] for g in used if (model, g) in by_key]
        cost = _weighted([(r.candidate_mean_cost_usd, r.candidate_cost_n) for r in mine])
        latency = _weighted([(r.candidate_mean_latency_ms, r.candidate_latency_n) for r in mine])
        evs = tuple(people[(model, g)] if on_people else evidence[(model, g)] for g in used)
        found.append(
            CandidateEvidence(
                model=model,
                graders=evs,
                passed=bool(evs) and all(e.passed for e in evs),
                mean_cost_usd=cost,
                mean_latency_ms=latency,
                cost_ratio=_ratio(cost, base_cost),
                latency_ratio=_ratio(latency, base_latency),
            )
        )
    chosen = cheapest_proven(found, cands)
    decision = RoutingDecision(
        model=baseline if chosen is None else chosen.model,
        reason=explain_decision(
            chosen,
            task,
            baseline,
            found,
            used,
            ignored,
            min_quality=min_quality,
            min_samples=min_samples,
            alpha=alpha,
            target=target,
        ),
        task=task,
        baseline=baseline,
        candidates=tuple(found),
        grader_ids=tuple(routing),
        used_grader_ids=tuple(used),
        ignored_graders=tuple(ignored),
        min_quality=float(min_quality),
        confidence=float(confidence),
        min_samples=min_samples,
        allow_uncalibrated=False,
        baseline_mean_cost_usd=base_cost,
        baseline_mean_latency_ms=base_latency,
        target=target,
    )
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
                    evidence=evidence[(model, g)],
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
    from llm_connect.routing._human_cache import human_evidence

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
