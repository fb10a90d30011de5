"""The watch after the switch (issue 38): the e-detector, and the Router rolling a routed
candidate back when its quality falls, keeping the rollback until it is proven again."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger
from llm_connect.routing import PolicyError, Router, RoutingDecision, RoutingPolicy, SliceDecisions
from llm_connect.routing._rollback import DetectorState, advance

MakeResult = Callable[..., GradingResult]


def _bernoulli(rng: random.Random, p: float, n: int) -> list[float]:
    return [float(rng.random() < p) for _ in range(n)]


def test_a_stable_stream_never_fires_and_a_drop_does() -> None:
    rng = random.Random(5)
    stable = advance(DetectorState(0.9, 20_000), _bernoulli(rng, 0.95, 20_000))
    assert not stable.fired and stable.n == 20_000
    dropped = advance(stable, _bernoulli(rng, 0.80, 2_000))
    assert dropped.fired and dropped.fired_at is not None and 20_000 < dropped.fired_at < 20_600
    # the change point the reason reads the recent mean from lies near the drop
    assert dropped.fired_start is not None and abs(dropped.fired_start - 20_000) < 300


def test_reading_in_batches_is_reading_at_once_and_a_rollback_is_sticky() -> None:
    rng = random.Random(6)
    stream = _bernoulli(rng, 0.96, 500) + _bernoulli(rng, 0.5, 200) + _bernoulli(rng, 1.0, 3_000)
    whole = advance(DetectorState(0.9, 1_000), stream)
    state = DetectorState(0.9, 1_000)
    starts = range(0, len(stream), 37)
    for start in starts:
        state = advance(state, stream[start : start + 37], last_id=1_000 + start)
    assert state.sr == pytest.approx(whole.sr) and state.fired_at == whole.fired_at is not None
    assert state.value < 1_000  # the statistic fell back after the good cases: still fired
    assert state.fired and state.last_id == 1_000 + starts[-1]


def test_the_false_alarm_rate_at_the_threshold_is_within_n_over_arl() -> None:
    """A stream whose mean is exactly the threshold (the worst case of "at least m"): a false
    rollback within N cases in at most N / arl of the runs (here 5%), with margin."""
    rng = random.Random(7)
    runs, n, arl = 400, 100, 2_000.0
    fired = sum(advance(DetectorState(0.9, arl), _bernoulli(rng, 0.9, n)).fired for _ in range(runs))
    assert fired <= runs * n / arl  # 20 of 400; the e-detector's bound, seldom near it
    assert fired < runs * 0.03


def _grades(make_result: MakeResult, start: int, p: float, n: int, rng: random.Random) -> list[GradingResult]:
    return [
        make_result(float(rng.random() < p), candidate_model="small", prompt=f"case {i}")
        for i in range(start, start + n)
    ]


def _decide(router: Router) -> RoutingDecision:
    return router.decide("qa", baseline="gpt-4o", candidates=["small"], grader_id="exact")


def test_the_router_rolls_back_keeps_it_and_routes_again_when_proven(
    ledger_url: str, make_result: MakeResult
) -> None:
    rng = random.Random(8)
    with QualityLedger(ledger_url) as ledger:
        router = Router(ledger)
        ledger.record_many(_grades(make_result, 0, 0.99, 200, rng), task="qa")
        first = _decide(router)
        assert first.model == "small" and first.routed_since is not None and first.rollback is None
        # stable after the switch: the streak carries the first decision's id, nothing fires
        ledger.record_many(_grades(make_result, 200, 0.97, 1_000, rng), task="qa")
        kept = _decide(router)
        assert kept.model == "small" and kept.rollback is None
        assert kept.routed_since is not None and kept.routed_since.decision_id == first.decision_id
        assert kept.routed_since.after_id == first.routed_since.after_id

        # the candidate gets worse: asked after each batch of 25, the router rolls it back
        done, fell = 1_200, None
        for _ in range(40):
            ledger.record_many(_grades(make_result, done, 0.75, 25, rng), task="qa")
            done += 25
            fell = _decide(router)
            if fell.rollback is not None:
                break
        assert fell is not None and fell.rollback is not None and fell.rollback.new
        assert fell.model == "gpt-4o" and fell.routed_since is None
        back = fell.rollback
        assert back.model == "small" and back.grader_id == "exact" and back.threshold == 0.9
        assert back.cases > 1_000 and back.recent_mean is not None and back.recent_mean < 0.9
        assert (
            fell.reason.startswith("small was rolled back at ") and "routes again once proven" in fell.reason
        )

        # stored: a new Router (another process) keeps the rollback, not as new
        again = _decide(Router(ledger))
        assert again.model == "gpt-4o" and again.rollback is not None and not again.rollback.new
        (stored,) = [d for d in ledger.decisions("qa") if d.decision_id == fell.decision_id]
        assert stored.rollback == back and "Note: small was rolled back" in again.reason
        # the evidence counts only cases graded after the rollback
        (evidence,) = again.evidence_for("small").graders
        assert evidence.n == 0

        # proven again on later cases: routed, a new streak, the rollback gone
        for _ in range(20):
            ledger.record_many(_grades(make_result, done, 1.0, 25, rng), task="qa")
            done += 25
            routed = _decide(router)
            if routed.model == "small":
                break
        assert routed.model == "small" and routed.rollback is None
        assert routed.routed_since is not None and routed.routed_since.after_id >= back.after_id
        assert 30 <= routed.evidence_for("small").graders[0].n <= 500


def test_no_watch_without_an_arl_and_a_bad_arl_is_refused(ledger_url: str, make_result: MakeResult) -> None:
    rng = random.Random(9)
    with pytest.raises(PolicyError, match="rollback_arl"):
        RoutingPolicy(rollback_arl=1)
    with QualityLedger(ledger_url) as ledger:
        router = Router(ledger)
        policy = RoutingPolicy(rollback_arl=None)
        ledger.record_many(_grades(make_result, 0, 1.0, 1_000, rng), task="qa")
        args = {"baseline": "gpt-4o", "candidates": ["small"], "grader_id": "exact", "policy": policy}
        assert router.decide("qa", **args).model == "small"
        ledger.record_many(_grades(make_result, 1_000, 0.6, 200, rng), task="qa")
        unwatched = router.decide("qa", **args)
        # the all-time bound (mean about 0.93) still routes, and nobody watched the last 200
        assert unwatched.model == "small" and unwatched.rollback is None
        watched = router.decide("qa", baseline="gpt-4o", candidates=["small"], grader_id="exact")
        assert watched.rollback is not None and watched.model == "gpt-4o"


def _slice_cases(
    ledger: QualityLedger,
    make_result: MakeResult,
    name: str,
    start: int,
    n: int,
    mean: float,
    rng: random.Random,
) -> None:
    from llm_connect.ledger import RecordItem

    ledger.record_batch(
        [
            RecordItem(
                make_result(
                    min(1.0, max(0.0, rng.gauss(mean, 0.04))), candidate_model="small", prompt=f"{name} {i}"
                ),
                "qa",
                "r1",
                f"{name}-{i}",
                (f"lang:{name}",),
            )
            for i in range(start, start + n)
        ]
    )


def test_a_slice_that_gets_worse_is_rolled_back_alone(ledger_url: str, make_result: MakeResult) -> None:
    """Per slice (issue 38, item 3): the slice whose candidate got worse goes back to the baseline,
    the others keep it; the next decision carries the rollback and ``--on-rollback`` payloads
    name the slice."""
    rng = random.Random(10)
    policy = RoutingPolicy(slice_by="tag:lang")

    def decide(router: Router) -> Any:
        return router.decide_slices("qa", baseline="gpt-4o", candidates=["small"], policy=policy)

    with QualityLedger(ledger_url) as ledger:
        router = Router(ledger)
        for name in ("en", "fr"):
            _slice_cases(ledger, make_result, name, 0, 150, 0.98, rng)
        first = decide(router)
        assert {s.name: s.model for s in first.slices} == {"en": "small", "fr": "small"}
        assert all(s.routed_since is not None and s.rollback is None for s in first.slices)
        done, fell = 150, None
        for _ in range(40):
            # the task as a whole stays above 0.9 (40 good en cases for 5 bad fr ones)
            _slice_cases(ledger, make_result, "en", 4 * done, 40, 0.98, rng)
            _slice_cases(ledger, make_result, "fr", done, 5, 0.55, rng)
            done += 10
            fell = decide(router)
            if fell.new_rollbacks():
                break
        assert fell is not None and [(n, r.model) for n, r in fell.new_rollbacks()] == [("fr", "small")]
        by = {s.name: s for s in fell.slices}
        assert by["fr"].model == "gpt-4o" and by["en"].model == "small" and fell.whole.rollback is None
        assert by["en"].routed_since == first.slice("en").routed_since.__class__(
            **{**vars(first.slice("en").routed_since), "decision_id": first.decision_id}
        )  # the en streak goes on from the first decision
        assert fell.model_for({"tags": ["lang:fr"]}) == "gpt-4o"
        again = decide(Router(ledger))
        back = again.slice("fr").rollback
        assert back is not None and not back.new and again.slice("fr").model == "gpt-4o"
        assert again.slice("fr").candidates[0].n == 0  # judged on cases after the rollback only
        stored = SliceDecisions.from_dict(json.loads(json.dumps(again.to_dict())))
        assert stored.slice("fr").rollback == back


def test_slices_watch_nothing_without_an_arl(ledger_url: str, make_result: MakeResult) -> None:
    """``rollback_arl=None`` turns the slices' watch off too (the slices decide under the
    caller's setting, not the default the stored decision's policy would give)."""
    rng = random.Random(12)
    policy = RoutingPolicy(slice_by="tag:lang", rollback_arl=None)
    with QualityLedger(ledger_url) as ledger:
        router = Router(ledger)
        for name in ("en", "fr"):
            _slice_cases(ledger, make_result, name, 0, 150, 0.98, rng)
        router.decide_slices("qa", baseline="gpt-4o", candidates=["small"], policy=policy)
        for done in range(150, 250, 10):
            _slice_cases(ledger, make_result, "en", 4 * done, 40, 0.98, rng)
            _slice_cases(ledger, make_result, "fr", done, 5, 0.55, rng)
            sliced = router.decide_slices("qa", baseline="gpt-4o", candidates=["small"], policy=policy)
            assert all(s.rollback is None for s in sliced.slices) and sliced.whole.rollback is None
