"""``human_value``: what people say about one case, on the judges' 0..1 scale."""

from __future__ import annotations

import pytest

from llm_connect.values import human_value


@pytest.mark.parametrize(
    ("preferences", "scores", "value"),
    [
        (["candidate"], [], 1.0),
        (["baseline"], [0.9], 0.0),  # a preference wins over scores
        (["tie"], [], 0.5),
        ([], [1], 1.0),  # one score, returned as a float
        ([], [0.2, 0.6], 0.4),
        (["candidate", "baseline"], [], 0.5),  # equally common: a tie
        (["candidate", "candidate", "baseline"], [], 1.0),
        ([], [], None),
    ],
)
def test_majority_preference_else_mean_score(
    preferences: list[str], scores: list[float], value: float | None
) -> None:
    got = human_value(preferences, scores)
    assert got == pytest.approx(value) if value is not None else got is None
    assert got is None or type(got) is float
