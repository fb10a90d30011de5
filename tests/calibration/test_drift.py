"""The judge-drift test (issue 37, ``calibration._drift``): seeded histories of checks."""

from __future__ import annotations

import numpy as np
import pytest

from llm_connect.calibration._drift import (
    DRIFTED,
    NOT_SETTLED,
    STABLE,
    DriftState,
    change_upper,
    changes,
    continue_drift,
    verdict,
)


def _history(judge, pairwise: bool, seed: int, checks: int = 20, anchor: int = 100) -> int | None:
    """The check (1-based) at which a history is first called drifted, or None."""
    rng = np.random.default_rng(seed)
    frozen = rng.choice([0.0, 0.5, 1.0], anchor) if pairwise else rng.beta(2.0, 2.0, anchor)
    state = DriftState()
    for c in range(checks):
        state = continue_drift(state, changes(frozen, judge(rng, frozen)))
        if state.drifted(0.05):  # what verdict() calls drifted
            return c + 1
    return None


def test_a_judge_at_the_tolerance_is_rarely_called_drifted_however_often_it_is_checked() -> None:
    """Expected change exactly at the tolerance (a pairwise judge turning 10% of its verdicts
    into ties at every check), 20 checks: drifted in at most 5% of 300 histories nominally
    (measured 0.7%; the bound here leaves room for the binomial noise)."""
    ties = lambda rng, f: np.where(rng.random(f.size) < 0.1, 0.5, f)  # noqa: E731
    drifted = sum(_history(ties, True, seed) is not None for seed in range(300))
    assert drifted <= 25


def test_a_stable_judge_is_stable_and_a_moved_one_drifted_at_once() -> None:
    rng = np.random.default_rng(4)
    frozen = rng.beta(2.0, 2.0, 100)
    moved = rng.random(100) < 0.1
    noisy = np.clip(frozen + np.where(moved, rng.uniform(-0.05, 0.05, 100), 0.0), 0.0, 1.0)
    calm = verdict(frozen, noisy, DriftState())
    assert (
        calm.status == STABLE
        and calm.change_upper < 0.05
        and calm.changed_share == pytest.approx(0.1, abs=0.06)
    )
    shifted = verdict(frozen, np.clip(frozen + 0.15, 0.0, 1.0), calm.state)
    assert shifted.status == DRIFTED and shifted.shift_low > 0.05 and shifted.state.checks == 2
    assert "drifted" in shifted.why


def test_flipping_pairwise_verdicts_are_caught_within_three_checks() -> None:
    flips = lambda rng, f: np.where(rng.random(f.size) < 0.2, 1.0 - f, f)  # noqa: E731
    when = [_history(flips, True, 1000 + seed, checks=3) for seed in range(100)]
    assert sum(w is not None for w in when) >= 95


def test_a_small_anchor_set_is_not_settled_and_drifted_stays_drifted() -> None:
    frozen = np.full(20, 0.7)
    small = verdict(frozen, frozen, DriftState())
    assert small.status == NOT_SETTLED and change_upper(np.zeros(20), 0.05) > 0.05
    state = continue_drift(DriftState(), np.full(100, 0.3))
    assert state.drifted(0.05)
    later = verdict(np.full(100, 0.7), np.full(100, 0.7), state)  # a calm check after drift
    assert later.status == DRIFTED  # the test never forgets; `judges accept` starts a new anchor


def test_bad_grades_name_the_case() -> None:
    with pytest.raises(ValueError, match="anchor case 2"):
        verdict([0.1, 0.2, 1.5], [0.1, 0.2, 0.3], DriftState())
    with pytest.raises(ValueError, match="3 frozen grades but 2"):
        verdict([0.1, 0.2, 0.3], [0.1, 0.2], DriftState())
