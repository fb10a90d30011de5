"""Case series a Router keeps between decisions, brought up to date by reading only new cases.

Routing code asks ``Router.decide`` after every batch of grades. A group (task,
baseline, candidate, grader) the Router read before is extended by the cases
that arrived since instead of being read again (:func:`read_series`), and its
anytime bounds are continued from their running sums (:class:`GroupBounds`,
:func:`~llm_connect.routing._betting.betting_bounds`) instead of being
recomputed over every case. Both give exactly what a fresh read and a fresh
computation give; the running totals of the ledger say when a change is more
than new cases (a replicate of a known case, a case committed out of order),
and then the group is read and computed in full.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Hashable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from llm_connect.routing._betting import BetState
from llm_connect.routing._bounds import RunningBound

if TYPE_CHECKING:
    from llm_connect.ledger import CaseSeries, QualityLedger

__all__ = ["CachedSeries", "GroupBounds", "read_series"]

_MAX_GROUPS = 10_000


@dataclass(frozen=True, slots=True)
class GroupBounds:
    """One group's anytime bounds as running sums, at one (alpha, confidence, threshold): the
    per-case values' betting states (lower, mirrored upper) after ``n`` cases, and the paired
    deltas' after the ``delta_n`` of those cases that have one (``None`` before the first)."""

    n: int
    values: tuple[BetState, BetState]
    delta_n: int
    delta: tuple[RunningBound, RunningBound] | None


@dataclass(slots=True)
class CachedSeries:
    """A group's series as last read, with its grades and Σ quality and its bounds at its length."""

    series: CaseSeries
    n_grades: int
    sum_quality: float
    bounds: dict[Hashable, GroupBounds] = field(default_factory=dict)


def read_series(
    ledger: QualityLedger,
    task: str,
    baseline: str,
    pairs: Sequence[tuple[str, str]],
    totals: Mapping[tuple[str, str], tuple[int, float]] | None,
    cache: MutableMapping[Hashable, CachedSeries] | None,
    read: Mapping[tuple[str, str], CaseSeries | None],
) -> dict[tuple[str, str], tuple[CachedSeries, CachedSeries | None]]:
    """The case series of ``pairs`` as new cache entries, each with the entry it extends
    (``None``: read in full).

    A pair in ``cache`` gets the cached series plus the cases that arrived since (``read``,
    or one read of each such group's rows past its last known case); the rest, and any pair
    whose totals (grades, Σ quality) show a change other than new cases, are read in full.
    Equal to a full read of every pair. The new entries go into the cache; the caller fills
    in each one's bounds (on that entry: a Router shared by threads may have put a newer one
    in the cache meanwhile, and bounds belong to their own series).
    """
    out: dict[tuple[str, str], tuple[CachedSeries, CachedSeries | None]] = {}
    if cache is not None and totals is not None:
        known: dict[tuple[str, str], CachedSeries] = {}
        for p in pairs:
            cached = cache.get((task, baseline, *p))
            if cached is not None and cached.series.first_ids and p in totals:
                known[p] = cached
        # The new cases of each known group past its last one: read now unless already read.
        unread = {p: c.series.first_ids[-1] for p, c in known.items() if p not in read}
        new = dict(read)
        if unread:
            new.update(_series_of(ledger, task, baseline, list(unread), after=unread))
        for p, cached in known.items():
            merged = _extended(cached, new.get(p), totals[p])
            if merged is not None:
                out[p] = (merged, cached)
    full = [p for p in pairs if p not in out]
    if full:
        for p, s in _series_of(ledger, task, baseline, full).items():
            if p in full:
                out[p] = (CachedSeries(s, s.n_grades, math.fsum(s.sum_quality)), None)
    if cache is not None:
        if len(cache) > _MAX_GROUPS:
            cache.clear()
        for p, (entry, _) in out.items():
            cache[(task, baseline, *p)] = entry
    return out


def _series_of(
    ledger: QualityLedger,
    task: str,
    baseline: str,
    pairs: Sequence[tuple[str, str]],
    *,
    after: Mapping[tuple[str, str], int] | None = None,
) -> dict[tuple[str, str], CaseSeries]:
    """``ledger.case_series`` of the (candidate, grader) ``pairs`` of one task and baseline."""
    return {
        (s.candidate_model, s.grader_id): s
        for s in ledger.case_series(
            task=task,
            baseline_model=baseline,
            candidate_model=list(dict.fromkeys(m for m, _ in pairs)),
            grader_id=list(dict.fromkeys(g for _, g in pairs)),
            after=after,
        )
    }


def _extended(old: CachedSeries, new: CaseSeries | None, total: tuple[int, float]) -> CachedSeries | None:
    """``old``'s series with the cases of ``new`` that arrived after its last one (the group's
    grades and Σ quality being ``total``); ``None`` when ``total`` shows more changed than those
    cases added."""
    series = old.series
    cut = 0 if new is None else bisect_right(new.first_ids, series.first_ids[-1])
    add_grades = 0 if new is None else sum(new.grades[cut:])
    expected = old.sum_quality + (0.0 if new is None else math.fsum(new.sum_quality[cut:]))
    n, sum_quality = total
    if old.n_grades + add_grades != n or abs(expected - sum_quality) > 1e-9 * max(1.0, abs(sum_quality)):
        return None
    if new is None or cut == len(new.first_ids):
        return CachedSeries(series, n, old.sum_quality)
    merged = replace(
        series,
        grades=series.grades + new.grades[cut:],
        sum_quality=series.sum_quality + new.sum_quality[cut:],
        delta_n=series.delta_n + new.delta_n[cut:],
        delta_sum=series.delta_sum + new.delta_sum[cut:],
        first_ids=series.first_ids + new.first_ids[cut:],
    )
    return CachedSeries(merged, n, expected)
