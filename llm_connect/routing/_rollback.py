"""The watch after the switch (issue 38): an e-detector that rolls a routed candidate back.

Once a decision routes a candidate, each routing judge's per-case grades of that candidate
arriving after it form a stream ``x_1, x_2, ...`` in ``[0, 1]``. The detector tests, at every
case, "the mean has fallen below ``m``" (``m``: the judge's threshold) against "it is at least
``m``", as a change that may start at any case. Each case gives the bets

    L_t(lam) = 1 + lam * (m - x_t),    lam in LAMS(m) = SHARES / (1 - m),

which are e-values under "the mean is at least m" (E[L_t] = 1 + lam * (m - E x_t) <= 1) and never
negative (``lam * (1 - m) <= 0.4``). The Shiryaev-Roberts e-detector of each bet,

    R_t(lam) = L_t(lam) * (R_{t-1}(lam) + 1),   R_0 = 0,

is the sum over every possible change point ``j <= t`` of the e-process started there, and the
detector is their average ``M_t``. It fires at the first ``t`` with ``M_t >= arl``. While the mean
stays at least ``m``, ``M_t - t`` is a supermartingale, so (``docs/decisions.md``, "The watch")
the expected number of cases to a false rollback is at least ``arl`` and the chance of one within
``N`` cases at most ``N / arl`` (Ville's inequality on ``M_t - t + N``). The default
:data:`ROLLBACK_ARL` 20,000 keeps a false rollback within 1,000 cases under 5%.

Pure Python over a few floats per case (five bets): the stream since a decision is read once
by a new Router and then only its new cases (:class:`DetectorState` is kept per group).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from llm_connect.values import Rollback, RoutedSince

if TYPE_CHECKING:
    from llm_connect.ledger import CaseSeries, QualityLedger

__all__ = [
    "ROLLBACK_ARL",
    "SHARES",
    "DetectorState",
    "WatchPlan",
    "advance",
    "lams",
    "plan_watch",
    "restricted_evidence",
    "rollback_of",
    "slice_watch",
]

ROLLBACK_ARL = 20_000
"""The default threshold of the detector: the least expected run of cases to a false rollback."""
SHARES = (0.02, 0.05, 0.1, 0.2, 0.4)
"""Each bet as a share of the largest one that keeps ``L_t`` non-negative, ``1 / (1 - m)``: small
bets catch a small drop, large ones a steep drop quickly; their average pays ``log 5`` for not
knowing which."""


def lams(threshold: float) -> tuple[float, ...]:
    """The bets against "the mean is at least ``threshold``" (each ``share / (1 - threshold)``)."""
    room = max(1.0 - threshold, 1e-9)
    return tuple(share / room for share in SHARES)


@dataclass(frozen=True)
class DetectorState:
    """The detector over one stream after ``n`` cases: each bet's Shiryaev-Roberts statistic and
    CUSUM (the product since its most likely start; the smallest bet's start is the change point
    the reason's recent mean is taken from), the
    sum of the grades, and whether and when it fired (sticky: a rollback is never undone by
    later cases)."""

    threshold: float
    arl: float
    n: int = 0
    total: float = 0.0
    sr: tuple[float, ...] = (0.0,) * len(SHARES)
    cusum: tuple[float, ...] = (1.0,) * len(SHARES)
    cusum_start: tuple[int, ...] = (0,) * len(SHARES)
    fired_at: int | None = None
    """The case (1-based) at which the detector first reached ``arl``."""
    fired_value: float | None = None
    fired_start: int | None = None
    """The most likely change point when it fired (0-based index of the first case after it)."""
    last_id: int = 0
    """The ledger id (``first_id``) of the last case read: the next read starts after it."""

    @property
    def value(self) -> float:
        """The detector ``M_t``: the average of the bets' statistics."""
        return sum(self.sr) / len(self.sr)

    @property
    def fired(self) -> bool:
        """Whether the detector has reached its threshold."""
        return self.fired_at is not None

    @property
    def mean(self) -> float | None:
        """The mean grade of the stream so far."""
        return self.total / self.n if self.n else None


def advance(state: DetectorState, grades: Iterable[float], last_id: int | None = None) -> DetectorState:
    """``state`` after the cases ``grades`` (in arrival order); ``last_id``: the newest one's id."""
    bets = lams(state.threshold)
    m = state.threshold
    sr, cusum, start = list(state.sr), list(state.cusum), list(state.cusum_start)
    n, total = state.n, state.total
    fired_at, fired_value, fired_start = state.fired_at, state.fired_value, state.fired_start
    k = len(bets)
    for x in grades:
        for i in range(k):
            bet = 1.0 + bets[i] * (m - x)
            sr[i] = min(bet * (sr[i] + 1.0), 1e300)  # past any threshold; never overflows
            if cusum[i] < 1.0:  # the product from a later start is larger: start afresh here
                cusum[i], start[i] = 1.0, n
            cusum[i] *= bet
        n += 1
        total += x
        if fired_at is None and sum(sr) / k >= state.arl:
            # the smallest bet's CUSUM restarts least often: its start estimates the change point
            fired_at, fired_value, fired_start = n, sum(sr) / k, start[0]
    return replace(
        state,
        n=n,
        total=total,
        sr=tuple(sr),
        cusum=tuple(cusum),
        cusum_start=tuple(start),
        fired_at=fired_at,
        fired_value=fired_value,
        fired_start=fired_start,
        last_id=state.last_id if last_id is None else last_id,
    )


def _case_means(series: CaseSeries) -> list[float]:
    return [s / n for s, n in zip(series.sum_quality, series.grades, strict=True)]


@dataclass
class WatchPlan:
    """What the stored decisions say before a new one: the streak a routed candidate is on
    (``since``, carried while the same candidate is chosen), a rollback (new, or carried from the
    last decision) and, per rolled-back candidate, the grade id after which its evidence counts."""

    since: RoutedSince | None = None
    rollback: Rollback | None = None
    restrict: dict[str, int] = field(default_factory=dict)

    def outcome(
        self, chosen: str, baseline: str, now: datetime, watermark: Callable[[], int]
    ) -> tuple[RoutedSince | None, Rollback | None]:
        """The new decision's ``routed_since`` and ``rollback`` given the model it chose: the
        streak carried when the same candidate is chosen again (a new one starts at ``now``,
        after the ledger's newest grade); the rollback carried until its candidate is chosen
        (proven again on cases graded after it)."""
        rollback = None if self.rollback is None or self.rollback.model == chosen else self.rollback
        if chosen == baseline:
            return None, rollback
        if self.since is not None and self.since.model == chosen:
            return self.since, rollback
        return RoutedSince(chosen, now, watermark()), rollback


def plan_watch(
    ledger: QualityLedger,
    cache: MutableMapping[tuple[Any, ...], DetectorState],
    task: str,
    baseline: str,
    candidates: Sequence[str],
    thresholds: Mapping[str, float],
    *,
    arl: float | None,
    alpha: float,
    now: datetime,
) -> WatchPlan:
    """Read the newest stored decision of ``task`` and, when it routed a candidate still asked
    for, run the detector of each routing judge (``thresholds``' keys) over that candidate's
    cases graded since it was routed; the first judge whose detector fired rolls it back.
    ``arl`` ``None``: no detector (a streak and a carried rollback still apply)."""
    prior = ledger.decision_store.latest_watch(task, baseline)
    if prior is None:
        return WatchPlan()
    decision_id, chosen, since_json, rollback_json = prior
    since = RoutedSince.from_dict(since_json) if since_json else None
    if since is not None and since.decision_id is None:
        since = replace(since, decision_id=decision_id)
    carried = Rollback.from_dict(rollback_json).carried() if rollback_json else None
    if carried is not None and carried.model not in candidates:
        carried = None
    if since is None or since.model != chosen or chosen not in candidates:
        since = None
    elif arl is not None and thresholds:
        fired = _detect(ledger, cache, task, baseline, since, thresholds, arl, alpha, now)
        if fired is not None:
            restrict = {fired.model: fired.after_id}
            if carried is not None and carried.model != fired.model:
                restrict[carried.model] = carried.after_id
            return WatchPlan(None, fired, restrict)
    return WatchPlan(since, carried, {} if carried is None else {carried.model: carried.after_id})


def _detect(
    ledger: QualityLedger,
    cache: MutableMapping[tuple[Any, ...], DetectorState],
    task: str,
    baseline: str,
    since: RoutedSince,
    thresholds: Mapping[str, float],
    arl: float,
    alpha: float,
    now: datetime,
) -> Rollback | None:
    """Advance each judge's detector over ``since.model``'s new cases (one read for all
    judges); the rollback of the judge that fired first, else ``None``."""
    model = since.model
    states: dict[str, DetectorState] = {}
    for grader_id, threshold in thresholds.items():
        key = (task, baseline, model, grader_id, since.after_id, threshold, arl)
        states[grader_id] = cache.get(key) or DetectorState(threshold, arl, last_id=since.after_id)
    after = {(model, g): s.last_id for g, s in states.items()}
    for series in ledger.case_series(
        task=task, baseline_model=baseline, grader_id=list(states), candidate_model=model, after=after
    ):
        state = states[series.grader_id]
        states[series.grader_id] = advance(state, _case_means(series), last_id=series.first_ids[-1])
    for grader_id, state in states.items():
        cache[(task, baseline, model, grader_id, since.after_id, state.threshold, arl)] = state
    fired = [(s.fired_at, g) for g, s in states.items() if s.fired_at is not None]
    if not fired:
        return None
    grader_id = min(fired)[1]
    (whole,) = ledger.case_series(
        task=task, baseline_model=baseline, grader_id=grader_id, candidate_model=model,
        after={(model, grader_id): since.after_id},
    ) or (None,)  # fmt: skip
    stream = _case_means(whole) if whole is not None else []
    after_id = ledger.decision_store.grade_watermark()
    return rollback_of(states[grader_id], stream, since, grader_id, now=now, after_id=after_id, alpha=alpha)


def rollback_of(
    state: DetectorState,
    stream: Sequence[float],
    since: RoutedSince,
    grader_id: str,
    *,
    now: datetime,
    after_id: int,
    alpha: float,
) -> Rollback:
    """The :class:`Rollback` of a fired ``state`` over ``stream`` (the grades it read, in order):
    the recent cases are those since the smallest bet's last restart, their upper bound at
    ``alpha`` descriptive."""
    from llm_connect.routing._bounds import upper_bound

    assert state.fired_at is not None and state.fired_start is not None and state.fired_value is not None
    recent = list(stream[state.fired_start : state.fired_at])
    return Rollback(
        model=since.model,
        grader_id=grader_id,
        at=now,
        after_id=after_id,
        routed_at=since.at,
        cases=state.fired_at,
        recent_cases=len(recent),
        recent_mean=sum(recent) / len(recent) if recent else None,
        recent_upper=upper_bound(recent, alpha) if recent else None,
        detector=state.fired_value,
        arl=state.arl,
        threshold=state.threshold,
    )


def slice_watch(
    prior: Mapping[str, Any] | None,
    prior_id: int,
    candidates: Sequence[str],
    streams: Callable[[str, str, int], Sequence[float]],
    thresholds: Mapping[str, float],
    *,
    arl: float | None,
    alpha: float,
    now: datetime,
    watermark: Callable[[], int],
) -> WatchPlan:
    """One slice's :class:`WatchPlan` from its entry in the newest stored slice decision
    (``prior``): the candidate serving it is watched over ``streams(model, judge, after_id)``
    (its slice grades first graded after ``after_id``, in order), each judge's detector fresh."""
    if not prior:
        return WatchPlan()
    since = RoutedSince.from_dict(prior["routed_since"]) if prior.get("routed_since") else None
    if since is not None and since.decision_id is None:
        since = replace(since, decision_id=prior_id)
    carried = Rollback.from_dict(prior["rollback"]).carried() if prior.get("rollback") else None
    if carried is not None and carried.model not in candidates:
        carried = None
    restrict = {} if carried is None else {carried.model: carried.after_id}
    if since is None or since.model != prior.get("model") or since.model not in candidates:
        return WatchPlan(None, carried, restrict)
    if arl is not None:
        fired: list[tuple[int, str, DetectorState, Sequence[float]]] = []
        for grader_id, threshold in thresholds.items():
            stream = streams(since.model, grader_id, since.after_id)
            state = advance(DetectorState(threshold, arl), stream)
            if state.fired_at is not None:
                fired.append((state.fired_at, grader_id, state, stream))
        if fired:
            _, grader_id, state, stream = min(fired, key=lambda f: (f[0], f[1]))
            back = rollback_of(state, stream, since, grader_id, now=now, after_id=watermark(), alpha=alpha)
            return WatchPlan(None, back, restrict | {back.model: back.after_id})
    return WatchPlan(since, carried, restrict)


def restricted_evidence(
    ledger: QualityLedger,
    task: str,
    baseline: str,
    restrict: Mapping[str, int],
    judges: Sequence[str],
    thresholds: Mapping[str, float],
    **assess_settings: Any,
) -> dict[tuple[str, str], Any]:
    """The evidence of each rolled-back candidate (``restrict``: candidate -> grade id) on each
    judge from its cases graded after the rollback only (one read): what proves it again."""
    from llm_connect.routing._evidence import assess

    after = {(model, g): after_id for model, after_id in restrict.items() for g in judges}
    found = {
        (s.candidate_model, s.grader_id): s
        for s in ledger.case_series(
            task=task, baseline_model=baseline, grader_id=list(judges), candidate_model=list(restrict),
            after=after,
        )
    }  # fmt: skip
    return {
        (model, g): assess(found.get((model, g)), g, min_quality=thresholds, **assess_settings)
        for model in restrict
        for g in judges
    }
