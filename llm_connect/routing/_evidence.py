"""The one place every figure about a candidate comes from: case-level evidence and its verdict.

:func:`assess` turns the per-case totals of one (task, baseline, candidate,
grader) into a :class:`GraderEvidence`: distinct cases and grades, the mean
of the per-case means, the lower and upper confidence bounds
(:mod:`llm_connect.routing._bounds`), the status (``proven``, ``ruled out``,
``undecided``, ``insufficient``), roughly how many cases would settle an
undecided candidate, and, for judges that score each response on its own, the
mean paired difference candidate − baseline with its interval.
:func:`gather` reads the ledger and assesses every (candidate, grader) of a
task. ``Router.decide``, the ``grade`` report, ``ledger summary`` and the JSON
output all print what these return.

The rule (``docs/decisions.md``): with ``k`` candidates each bound is
one-sided at ``alpha = (1 - confidence) / k`` (Bonferroni: the chance that the
decision routes to *any* candidate whose true mean is below ``min_quality`` is
at most ``1 - confidence``). A candidate must pass every routing judge, so no
correction over judges is needed. By default the bounds are anytime-valid
(they hold however often they are asked); ``fixed_n=True`` uses the
single-look interval, for one look at a sample size fixed in advance.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, MutableMapping, Sequence
from itertools import accumulate, chain
from typing import TYPE_CHECKING, Any, cast

from llm_connect.routing._betting import betting_bounds
from llm_connect.routing._betting import cases_needed_many as betting_cases_needed
from llm_connect.routing._bounds import bounds_many, cases_needed_many, continue_bounds
from llm_connect.routing._series import CachedSeries, GroupBounds, read_series
from llm_connect.values import (
    INSUFFICIENT,
    NO_GRADES,
    PROVEN,
    RULED_OUT,
    UNDECIDED,
    GraderEvidence,
    crossed_bounds,
)

if TYPE_CHECKING:
    from llm_connect.ledger import CaseSeries, QualityLedger

__all__ = [
    "INSUFFICIENT",
    "NO_GRADES",
    "PROVEN",
    "RULED_OUT",
    "UNDECIDED",
    "assess",
    "assess_many",
    "candidate_alpha",
    "gather",
    "method_name",
]


def candidate_alpha(confidence: float, n_candidates: int) -> float:
    """The one-sided error rate of each candidate's bounds: ``(1 - confidence) / k`` (Bonferroni)."""
    return (1.0 - confidence) / max(1, n_candidates)


def method_name(fixed_n: bool) -> str:
    """How the bounds were computed, as the reasons name it."""
    return "single-look (fixed n)" if fixed_n else "anytime-valid"


def assess(
    series: CaseSeries | None,
    grader_id: str,
    *,
    min_quality: float | Mapping[str, float],
    min_samples: int,
    alpha: float,
    confidence: float,
    fixed_n: bool = False,
) -> GraderEvidence:
    """The evidence one grader's grades give about one candidate (``series`` ``None``: no grades).

    ``alpha`` is each bound's one-sided error rate (:func:`candidate_alpha`);
    ``confidence`` is the two-sided level of the paired-difference interval.
    """
    (evidence,) = assess_many(
        [(series, grader_id)],
        min_quality=min_quality,
        min_samples=min_samples,
        alpha=alpha,
        confidence=confidence,
        fixed_n=fixed_n,
    )
    return evidence


def threshold_of(min_quality: float | Mapping[str, float], grader_id: str) -> float:
    """``grader_id``'s threshold: ``min_quality`` itself, or its entry when it maps grader ids
    to thresholds (:meth:`RoutingPolicy.threshold`)."""
    return float(min_quality) if isinstance(min_quality, int | float) else float(min_quality[grader_id])


def _no_grades(
    grader_id: str, min_samples: int, alpha: float, method: str, min_quality: float
) -> GraderEvidence:
    return GraderEvidence(
        grader_id=grader_id,
        n=0,
        mean=None,
        lower_bound=None,
        passed=False,
        why=f"{grader_id}: no grades (insufficient evidence, 0 of {min_samples} cases)",
        n_grades=0,
        status=NO_GRADES,
        alpha=alpha,
        method=method,
        min_quality=min_quality,
    )


def _column(values: Sequence[Sequence[Any]], total: int) -> Any:
    """The per-case tuples of several series, end to end, as one float array."""
    import numpy as np

    return np.fromiter(chain.from_iterable(values), dtype=float, count=total)


def assess_many(
    items: Sequence[tuple[CaseSeries | None, str]],
    *,
    min_quality: float | Mapping[str, float],
    min_samples: int,
    alpha: float,
    confidence: float,
    fixed_n: bool = False,
    priors: Sequence[GroupBounds | None] | None = None,
    bounds_out: list[GroupBounds | None] | None = None,
) -> list[GraderEvidence]:
    """:func:`assess` of each (series, grader id), computed together (one decision's groups).

    ``priors`` (anytime bounds only) gives, per item, the running bounds of an earlier,
    shorter version of the same series (its first cases, unchanged): the bounds continue
    from them over the new cases alone. ``bounds_out`` receives each item's running bounds
    (``None`` for no grades or fixed n) for the next call.

    The per-case values of all series are one array, and the bounds and the
    projections of all groups are computed in one pass each
    (:func:`~llm_connect.routing._bounds.bounds_many`,
    :func:`~llm_connect.routing._bounds.cases_needed_many`); every figure is
    the one :func:`assess` would give for the series alone.
    """
    import numpy as np

    method = method_name(fixed_n)
    quality = [threshold_of(min_quality, grader_id) for _, grader_id in items]
    out: list[GraderEvidence | None] = [None] * len(items)
    if bounds_out is not None:
        bounds_out[:] = [None] * len(items)
    full = [i for i, (series, _) in enumerate(items) if series is not None and series.n_cases > 0]
    for i, (series, grader_id) in enumerate(items):
        if series is None or series.n_cases == 0:
            out[i] = _no_grades(grader_id, min_samples, alpha, method, quality[i])
    if not full:
        return cast(list[GraderEvidence], out)
    group = [cast("CaseSeries", items[i][0]) for i in full]
    sizes = [s.n_cases for s in group]
    total = sum(sizes)
    ends = list(accumulate(sizes))
    spans = [slice(end - size, end) for size, end in zip(sizes, ends, strict=True)]
    grades = _column([s.grades for s in group], total)
    values = np.clip(_column([s.sum_quality for s in group], total) / grades, 0.0, 1.0)
    delta_counts = _column([s.delta_n for s in group], total)
    has_delta = delta_counts > 0
    delta_unit: Any = None
    if has_delta.any():
        deltas = np.where(has_delta, _column([s.delta_sum for s in group], total), 0.0) / np.where(
            has_delta, delta_counts, 1.0
        )
        # mean_interval's rescaling of [-1, 1] onto [0, 1]
        delta_unit = np.clip((deltas + 1.0) / 2.0, 0.0, 1.0)

    # Per group, as numpy's mean/var/std compute them on the group's own array.
    value_parts = [values[span] for span in spans]
    means = [float(part.sum()) / part.size for part in value_parts]
    centred = values - np.repeat(means, sizes)
    squares = centred * centred
    sums_sq = [float(squares[span].sum()) for span in spans]

    rows: list[Any] = list(value_parts)
    alphas = [alpha] * len(group)
    delta_rows: list[tuple[int, Any, Any]] = []  # (group, deltas, unit deltas) with deltas
    if delta_unit is not None:
        for k, (mask, unit, raw) in enumerate(
            (has_delta[span], delta_unit[span], deltas[span]) for span in spans
        ):
            if mask.any():
                delta_rows.append((k, raw[mask], unit[mask]))
        rows += [unit for _, _, unit in delta_rows]
        alphas += [(1.0 - confidence) / 2.0] * len(delta_rows)
    if fixed_n:
        lows, highs = bounds_many(rows, alphas, fixed_n=True)
        group_bounds: list[GroupBounds | None] = [None] * len(group)
    else:
        lows, highs, group_bounds = _continued(
            value_parts,
            delta_rows,
            alphas,
            [None if priors is None else priors[i] for i in full],
            [quality[i] for i in full],
        )
    if bounds_out is not None:
        for k, i in enumerate(full):
            bounds_out[i] = group_bounds[k]

    q = [quality[i] for i in full]
    settled = [
        cast(float, highs[k]) < q[k] or (cast(float, lows[k]) >= q[k] and sizes[k] >= min_samples)
        for k in range(len(group))
    ]
    projected: dict[int, int | None] = {}
    open_ = [k for k in range(len(group)) if not settled[k]]
    if fixed_n:
        for threshold in sorted({q[k] for k in open_}):
            same = [k for k in open_ if q[k] == threshold]
            needed = cases_needed_many(
                [means[k] for k in same], [sums_sq[k] / sizes[k] for k in same], threshold, alpha,
                fixed_n=True,
            )  # fmt: skip
            projected.update(zip(same, needed, strict=True))
    elif open_:
        needed = betting_cases_needed(
            [means[k] for k in open_], [sums_sq[k] / sizes[k] for k in open_], [q[k] for k in open_], alpha
        )
        projected.update(zip(open_, needed, strict=True))
    delta_of = {
        k: (raw, lows[len(group) + j], highs[len(group) + j]) for j, (k, raw, _) in enumerate(delta_rows)
    }
    grade_totals = np.add.reduceat(grades, [span.start for span in spans])
    for k, i in enumerate(full):
        n = sizes[k]
        delta = delta_of.get(k)
        out[i] = _verdict(
            items[i][1],
            n=n,
            grades_total=int(grade_totals[k]),
            mean=means[k],
            std=math.sqrt(sums_sq[k] / (n - 1)) if n > 1 else None,
            low=cast(float, lows[k]),
            high=cast(float, highs[k]),
            projected=projected.get(k),
            delta=None if delta is None else (float(delta[0].mean()), *delta[1:]),
            delta_cases=0 if delta is None else int(delta[0].size),
            min_quality=q[k],
            min_samples=min_samples,
            alpha=alpha,
            method=method,
        )
    return cast(list[GraderEvidence], out)


def _continued(
    value_parts: Sequence[Any],
    delta_rows: Sequence[tuple[int, Any, Any]],
    alphas: Sequence[float],
    priors: Sequence[GroupBounds | None],
    thresholds: Sequence[float],
) -> tuple[list[float | None], list[float | None], list[GroupBounds | None]]:
    """The anytime bounds of each group's values (the betting sequence aimed at the group's
    threshold, :mod:`~llm_connect.routing._betting`) and paired deltas (rows as in
    :func:`assess_many`), continued from ``priors`` where given; and the running bounds."""
    new: list[Any] = []
    starts: list[Any] = []
    for part, prior in zip(value_parts, priors, strict=True):
        if prior is not None and prior.n <= part.size:
            new.append(part[prior.n :])
            starts.append(prior.values)
        else:
            new.append(part)
            starts.append(None)
    n_groups = len(value_parts)
    lows, highs, value_ends = betting_bounds(new, alphas[:n_groups], thresholds, starts)
    new, starts = [], []
    for k, _, unit in delta_rows:
        prior = priors[k]
        if prior is not None and prior.delta is not None and prior.delta_n <= unit.size:
            new.append(unit[prior.delta_n :])
            starts.append(prior.delta)
        else:
            new.append(unit)
            starts.append(None)
    delta_lows, delta_highs, ends = continue_bounds(new, alphas[n_groups:], starts)
    delta_end = {k: (ends[j], unit.size) for j, (k, _, unit) in enumerate(delta_rows)}
    out: list[GroupBounds | None] = []
    for k, part in enumerate(value_parts):
        delta, delta_n = delta_end.get(k, (None, 0))
        values = value_ends[k]
        assert values is not None
        out.append(GroupBounds(n=part.size, values=values, delta_n=delta_n, delta=delta))
    return lows + delta_lows, highs + delta_highs, out


def _verdict(
    grader_id: str,
    *,
    n: int,
    grades_total: int,
    mean: float,
    std: float | None,
    low: float,
    high: float,
    projected: int | None,
    delta: tuple[float, float | None, float | None] | None,
    delta_cases: int,
    min_quality: float,
    min_samples: int,
    alpha: float,
    method: str,
) -> GraderEvidence:
    """The status and reason of one group from its figures (``projected``: :func:`cases_needed`
    at the observed mean and variance, computed only for a group neither proven nor ruled out)."""
    delta_mean = delta_low = delta_high = None
    if delta is not None:
        delta_mean = delta[0]
        delta_low = None if delta[1] is None else -1.0 + 2.0 * delta[1]
        delta_high = None if delta[2] is None else -1.0 + 2.0 * delta[2]
    counted = f"{n} case{'s' if n != 1 else ''}" + (f" ({grades_total} grades)" if grades_total != n else "")
    needed: int | None = None
    if high < min_quality:
        status = RULED_OUT
        why = (
            f"{grader_id}: ruled out, {counted}, mean {mean:.3f}, {method} upper bound {high:.3f} "
            f"< min_quality {min_quality:g}"
        )
    elif low >= min_quality and n >= min_samples:
        status = PROVEN
        why = (
            f"{grader_id}: proven, {counted}, mean {mean:.3f}, {method} lower bound {low:.3f} "
            f">= min_quality {min_quality:g}"
        )
    elif low >= min_quality:
        status = INSUFFICIENT
        needed = min_samples
        why = (
            f"{grader_id}: insufficient evidence ({n} of {min_samples} cases), mean {mean:.3f}, "
            f"{method} lower bound {low:.3f}"
        )
    else:
        status = INSUFFICIENT if n < min_samples else UNDECIDED
        needed = None if projected is None else max(projected, min_samples, n + 1)
        head = "undecided"
        if status == INSUFFICIENT:
            head = f"insufficient evidence ({n} of {min_samples} cases)"
        if needed is None:
            more = "too close to call: the mean is too near min_quality for any practical number of cases"
        else:
            verb = "prove" if mean >= min_quality else "rule it out"
            more = f"about {needed - n} more cases would {verb} at the observed mean and spread"
        why = (
            f"{grader_id}: {head}, {counted}, mean {mean:.3f}, {method} bounds "
            f"[{low:.3f}, {high:.3f}] around min_quality {min_quality:g}; {more}"
        )
    if low > high:  # they stay crossed: say why the mean lies outside them
        fits = f"no one mean fits all {n} cases, the grades' mean moved within them"
        why += f"; the {crossed_bounds(low, high)}: {fits}"
    return GraderEvidence(
        grader_id=grader_id,
        n=n,
        mean=mean,
        lower_bound=low,
        passed=status == PROVEN,
        why=why,
        n_grades=grades_total,
        upper_bound=high,
        std=std,
        status=status,
        cases_needed=needed,
        alpha=alpha,
        method=method,
        delta_mean=delta_mean,
        delta_low=delta_low,
        delta_high=delta_high,
        delta_cases=delta_cases,
        min_quality=min_quality,
    )


def gather(
    ledger: QualityLedger,
    task: str,
    *,
    baseline: str,
    candidates: Sequence[str],
    grader_ids: Sequence[str],
    min_quality: float | Mapping[str, float],
    confidence: float,
    min_samples: int,
    fixed_n: bool = False,
    n_candidates: int | None = None,
    versions: Mapping[tuple[str, str], Hashable] | None = None,
    cache: MutableMapping[Hashable, tuple[Hashable, GraderEvidence]] | None = None,
    computed: list[tuple[str, str]] | None = None,
    totals: Mapping[tuple[str, str], tuple[int, float]] | None = None,
    series_cache: MutableMapping[Hashable, CachedSeries] | None = None,
    new_cases: Mapping[tuple[str, str], CaseSeries | None] | None = None,
) -> dict[tuple[str, str], GraderEvidence]:
    """Evidence for every (candidate, grader id) of ``task`` against ``baseline``, one ledger query.

    ``n_candidates`` is the ``k`` of the Bonferroni correction (default: the
    number of candidates given). With ``versions`` (a value per (candidate,
    grader) that changes whenever its grades change, e.g. the running totals'
    count and sums) and a ``cache`` mapping, groups whose version is unchanged
    since the last call are not read or computed again. The pairs computed afresh
    are appended to ``computed``.

    With ``series_cache`` (kept by the caller between calls) and ``totals`` (each
    group's current count of grades and Σ quality, from the running totals), a group
    read before is brought up to date by reading only the cases that arrived since
    (:func:`~llm_connect.routing._series.read_series`), and its anytime bounds are
    continued from their running sums; every figure equals a fresh computation's.
    ``new_cases`` holds such reads already made (pair -> the cases past the cached
    series' last one, ``None`` for none).
    """
    cands = list(dict.fromkeys(candidates))
    graders = list(dict.fromkeys(grader_ids))
    alpha = candidate_alpha(confidence, len(cands) if n_candidates is None else n_candidates)
    settings = (task, baseline, confidence, min_samples, fixed_n, alpha)
    out: dict[tuple[str, str], GraderEvidence] = {}
    missing: list[tuple[str, str]] = []
    for pair in ((m, g) for m in cands for g in graders):
        version = None if versions is None else versions.get(pair)
        key = (*settings, threshold_of(min_quality, pair[1]), *pair)
        hit = None if cache is None or version is None else cache.get(key)
        if hit is not None and hit[0] == version:
            out[pair] = hit[1]
        else:
            missing.append(pair)
    series = (
        read_series(ledger, task, baseline, missing, totals, series_cache, new_cases or {}) if missing else {}
    )

    def bounds_key(pair: tuple[str, str]) -> Hashable:  # the values' bounds aim at the threshold
        return (alpha, confidence, threshold_of(min_quality, pair[1]))

    priors: list[GroupBounds | None] = []
    for pair in missing:
        extends = series[pair][1] if pair in series else None
        priors.append(None if extends is None else extends.bounds.get(bounds_key(pair)))
    bounds: list[GroupBounds | None] = []
    assessed = assess_many(
        [(series[pair][0].series if pair in series else None, pair[1]) for pair in missing],
        min_quality=min_quality,
        min_samples=min_samples,
        alpha=alpha,
        confidence=confidence,
        fixed_n=fixed_n,
        priors=priors,
        bounds_out=bounds,
    )
    for pair, group_bounds in zip(missing, bounds, strict=True):  # each new cache entry's bounds
        if pair in series and group_bounds is not None:
            series[pair][0].bounds = {bounds_key(pair): group_bounds}
    for pair, ev in zip(missing, assessed, strict=True):
        out[pair] = ev
        if computed is not None:
            computed.append(pair)
        version = None if versions is None else versions.get(pair)
        if cache is not None and version is not None:
            cache[(*settings, threshold_of(min_quality, pair[1]), *pair)] = (version, ev)
    return {pair: out[pair] for pair in ((m, g) for m in cands for g in graders)}
