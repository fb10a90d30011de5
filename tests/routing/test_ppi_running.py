"""The prediction-powered sequence continued from running sums equals the full computation
(contracts/routing.md, H17-H18).

Random series (pairwise-like and continuous grades, uniform and varying inclusion), fed in
random pieces: after every piece the continued bounds equal ``ppi_sequence``'s bit for bit,
and ``human_bound_continued`` from the previous state equals a fresh ``human_bound``,
including labels that arrive late for pending cases (the sequence stops at the first
pending case and continues from there once its label comes).
"""

from __future__ import annotations

import numpy as np
import pytest

from llm_connect.routing._ppi import (
    _tuning,
    human_bound,
    human_bound_continued,
    labels_share,
    ppi_sequence,
)
from llm_connect.routing._ppi_running import continue_sequence, start_state


def _series(rng: np.random.Generator, n: int, kind: int) -> tuple[np.ndarray, ...]:
    judge = rng.random(n) if kind % 2 else rng.choice([0.0, 0.5, 1.0], n)
    uniform = kind % 3 == 0
    p = np.ones(n) if kind >= 6 else np.full(n, 0.3) if uniform else rng.uniform(0.1, 1.0, n)
    chosen = rng.random(n) < p
    human = np.where(chosen, np.clip(judge - 0.1 + rng.normal(0.0, 0.2, n), 0.0, 1.0), np.nan)
    return judge, p, chosen, human


@pytest.mark.parametrize("kind", range(8))
def test_continued_sequence_equals_the_full_one_bit_for_bit(kind: int) -> None:
    """H17: after every random piece, the continued (lower, upper) are the full sequence's
    (kinds 0 and 3: uniform labelling, the labels arm mixed in; 6 and 7: every case labelled,
    the labels arm alone)."""
    rng = np.random.default_rng(kind)
    for _ in range(10):
        n = int(rng.integers(1, 600))
        j, p, ch, h = _series(rng, n, kind)
        floor = float(p.min())
        q = float(rng.choice([0.5, 0.6, 0.9]))
        share = labels_share(p, q)  # 1 (kinds 6, 7), the mixture's (0, 3) or 0
        seq = ppi_sequence(j, p, ch, h, 0.025, floor=floor, labels_share=share, threshold=q)
        state, k = start_state(0.025, floor, share, q), 0
        while k < n:
            m = int(rng.integers(1, 80))
            state = continue_sequence(state, j[k : k + m], p[k : k + m], ch[k : k + m], h[k : k + m])
            k = min(n, k + m)
            assert state.bounds() == (float(seq.lower[k - 1]), float(seq.upper[k - 1]))
        lam, c = _tuning(j, p, ch, np.where(ch, np.nan_to_num(h), 0.0))
        assert state.coefficients() == (float(lam[-1]), float(c[-1]))


@pytest.mark.parametrize("kind", range(8))
def test_human_bound_continued_with_late_labels_equals_a_fresh_bound(kind: int) -> None:
    """H18: cases arrive in pieces, chosen cases get their label some pieces later (pending
    meanwhile); each call continues from the state the previous one returned and gives the
    HumanBound a fresh call gives, field for field."""
    rng = np.random.default_rng(100 + kind)
    for _ in range(6):
        n = int(rng.integers(20, 500))
        j, p, ch, h_final = _series(rng, n, kind)
        arrives = np.arange(n) + rng.integers(0, 60, n)  # when each label comes (case index)
        state, k = None, 0
        while k < n:
            k = min(n, k + int(rng.integers(1, 50)))
            h = np.where(ch[:k] & (arrives[:k] < k), h_final[:k], np.nan)
            kw = {"alpha": 0.025, "min_quality": 0.5, "floor": 0.1, "min_samples": 30}
            fresh = human_bound(j[:k], p[:k], ch[:k], h, **kw)
            got, state = human_bound_continued(j[:k], p[:k], ch[:k], h, start=state, **kw)
            assert got == fresh
            if state is not None:
                assert state.t == fresh.cases_used


def test_a_start_with_other_settings_or_past_the_pending_case_is_not_used() -> None:
    """A state at another alpha or threshold, or longer than the cases now usable (a label went missing
    before it), is ignored: the figures are a fresh computation's."""
    rng = np.random.default_rng(7)
    j, p, ch, h = _series(rng, 300, 1)
    kw = {"min_quality": 0.5, "floor": 0.1, "min_samples": 30}
    _, state = human_bound_continued(j, p, ch, h, alpha=0.05, **kw)
    assert state is not None
    assert human_bound_continued(j, p, ch, h, alpha=0.025, start=state, **kw)[0] == human_bound(
        j, p, ch, h, alpha=0.025, **kw
    )
    uniform = np.full(300, 0.3)
    _, state = human_bound_continued(j, uniform, ch, h, alpha=0.05, **kw)
    other = {**kw, "min_quality": 0.6}
    assert human_bound_continued(j, uniform, ch, h, alpha=0.05, start=state, **other)[0] == human_bound(
        j, uniform, ch, h, alpha=0.05, **other
    )
    gap = h.copy()
    gap[int(np.flatnonzero(ch)[3])] = np.nan  # pending again, before the state's end
    assert human_bound_continued(j, p, ch, gap, alpha=0.05, start=state, **kw)[0] == human_bound(
        j, p, ch, gap, alpha=0.05, **kw
    )


def test_the_state_is_a_frozen_dataclass_of_plain_numbers_with_a_version() -> None:
    """A snapshot may serialise PPIState field by field: plain floats, ints, tuples of them and
        nested frozen dataclasses of the same; STATE_VERSION names the fields' meaning ("2": a scale
        and sums per side, the two arms mixed under uniform labelling; "4": the labels arm is the
    betting sequence aimed at the threshold the state carries)."""
    import dataclasses

    from llm_connect.routing._ppi_running import STATE_VERSION

    rng = np.random.default_rng(3)
    j, p, ch, h = _series(rng, 200, 0)
    state = continue_sequence(start_state(0.05, 0.3, labels_share(p, 0.7), 0.7), j, p, ch, h)

    def plain(value: object) -> bool:
        if dataclasses.is_dataclass(value):
            params = getattr(type(value), "__dataclass_params__", None)
            assert params is not None and params.frozen
            return all(plain(getattr(value, f.name)) for f in dataclasses.fields(value))
        if isinstance(value, tuple):
            return all(plain(v) for v in value)
        return type(value) in (int, float)

    assert STATE_VERSION == "4" and plain(state) and state.labels[0].t == int(ch.sum())
