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

from collections.abc import Callable, Hashable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from llm_connect.routing._bounds import cases_needed, lower_bound, mean_interval, upper_bound
from llm_connect.values import GraderEvidence
from llm_connect.values._decision import INSUFFICIENT, NO_GRADES, PROVEN, RULED_OUT, UNDECIDED

if TYPE_CHECKING:
    from llm_connect.ledger import CaseSeries, QualityLedger

__all__ = [
    "INSUFFICIENT",
    "NO_GRADES",
    "PROVEN",
    "RULED_OUT",
    "UNDECIDED",
    "assess",
    "candidate_alpha",
    "gather",
    "method_name",
    "snapshot_settings",
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
    min_quality: float,
    min_samples: int,
    alpha: float,
    confidence: float,
    fixed_n: bool = False,
) -> GraderEvidence:
    """The evidence one grader's grades give about one candidate (``series`` ``None``: no grades).

    ``alpha`` is each bound's one-sided error rate (:func:`candidate_alpha`);
    ``confidence`` is the two-sided level of the paired-difference interval.
    """
    import numpy as np

    method = method_name(fixed_n)
    if series is None or series.n_cases == 0:
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
        )
    grades = np.asarray(series.grades, dtype=float)
    values = np.clip(np.asarray(series.sum_quality, dtype=float) / grades, 0.0, 1.0)
    n = int(values.size)
    mean = float(values.mean())
    var = float(values.var())
    std = float(values.std(ddof=1)) if n > 1 else None
    low = lower_bound(values, alpha, fixed_n=fixed_n)
    high = upper_bound(values, alpha, fixed_n=fixed_n)
    assert low is not None and high is not None

    delta_counts = np.asarray(series.delta_n, dtype=float)
    has_delta = delta_counts > 0
    delta_mean = delta_low = delta_high = None
    delta_cases = int(has_delta.sum())
    if delta_cases:
        deltas = np.asarray(series.delta_sum, dtype=float)[has_delta] / delta_counts[has_delta]
        delta_mean = float(deltas.mean())
        delta_low, delta_high = mean_interval(deltas, 1.0 - confidence, low=-1.0, high=1.0, fixed_n=fixed_n)

    grades_total = int(grades.sum())
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
    else:
        projected = cases_needed(mean, var, min_quality, alpha, fixed_n=fixed_n)
        if low >= min_quality:
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
    )


def gather(
    ledger: QualityLedger,
    task: str,
    *,
    baseline: str,
    candidates: Sequence[str],
    grader_ids: Sequence[str],
    min_quality: float,
    confidence: float,
    min_samples: int,
    fixed_n: bool = False,
    n_candidates: int | None = None,
    versions: Mapping[tuple[str, str], Hashable] | None = None,
    cache: MutableMapping[Hashable, tuple[Hashable, GraderEvidence]] | None = None,
    stored: Callable[[], Mapping[tuple[str, str], tuple[Hashable, Mapping[str, Any]]]] | None = None,
    computed: list[tuple[str, str]] | None = None,
) -> dict[tuple[str, str], GraderEvidence]:
    """Evidence for every (candidate, grader id) of ``task`` against ``baseline``, one ledger query.

    ``n_candidates`` is the ``k`` of the Bonferroni correction (default: the
    number of candidates given). With ``versions`` (a value per (candidate,
    grader) that changes whenever its grades change, e.g. the running totals'
    count and sums) and a ``cache`` mapping, groups whose version is unchanged
    since the last call are not read or computed again; ``stored`` (called only
    when the cache misses) gives evidence stored by an earlier decision, used when
    its version matches. The pairs computed afresh are appended to ``computed``.
    """
    cands = list(dict.fromkeys(candidates))
    graders = list(dict.fromkeys(grader_ids))
    alpha = candidate_alpha(confidence, len(cands) if n_candidates is None else n_candidates)
    settings = (task, baseline, min_quality, confidence, min_samples, fixed_n, alpha)
    out: dict[tuple[str, str], GraderEvidence] = {}
    missing: list[tuple[str, str]] = []
    for pair in ((m, g) for m in cands for g in graders):
        version = None if versions is None else versions.get(pair)
        hit = None if cache is None or version is None else cache.get((*settings, *pair))
        if hit is not None and hit[0] == version:
            out[pair] = hit[1]
        else:
            missing.append(pair)
    if missing and stored is not None and versions is not None:
        snapshots = stored()
        still: list[tuple[str, str]] = []
        for pair in missing:
            snap = snapshots.get(pair)
            if snap is not None and snap[0] == versions.get(pair):
                out[pair] = GraderEvidence.from_dict(snap[1])
                if cache is not None:
                    cache[(*settings, *pair)] = (snap[0], out[pair])
            else:
                still.append(pair)
        missing = still
    series: dict[tuple[str, str], Any] = {}
    if missing:
        for s in ledger.case_series(
            task=task,
            baseline_model=baseline,
            candidate_model=list(dict.fromkeys(m for m, _ in missing)),
            grader_id=list(dict.fromkeys(g for _, g in missing)),
        ):
            series[(s.candidate_model, s.grader_id)] = s
    for pair in missing:
        ev = assess(
            series.get(pair),
            pair[1],
            min_quality=min_quality,
            min_samples=min_samples,
            alpha=alpha,
            confidence=confidence,
            fixed_n=fixed_n,
        )
        out[pair] = ev
        if computed is not None:
            computed.append(pair)
        version = None if versions is None else versions.get(pair)
        if cache is not None and version is not None:
            cache[(*settings, *pair)] = (version, ev)
    return {pair: out[pair] for pair in ((m, g) for m in cands for g in graders)}


RULE_VERSION = 1
"""Bumped whenever the statistics change, so evidence stored under an older rule is not reused."""


def snapshot_settings(
    *, min_quality: float, confidence: float, min_samples: int, fixed_n: bool, alpha: float
) -> str:
    """The key stored evidence is filed under: every parameter the evidence depends on."""
    return (
        f"rule={RULE_VERSION};q={min_quality!r};conf={confidence!r};alpha={alpha!r};"
        f"min={min_samples};fixed_n={int(fixed_n)}"
    )
