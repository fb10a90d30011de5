"""Bias probes on plain arrays: each flags the bias it is named after, and only that."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llm_connect.calibration import length_probe, model_family, position_probe, self_preference_probe


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("gpt-4o-mini", "gpt"),
        ("openai:gpt-4o", "gpt"),
        ("llm:openai:gpt-4o-mini:rubric-v1", "gpt"),
        ("o3-mini", "gpt"),
        ("claude-3-5-sonnet-latest", "claude"),
        ("anthropic:claude-opus-4", "claude"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama"),
        ("ollama:llama3.2", "llama"),
        ("gemini-1.5-pro", "gemini"),
        ("mistral:mixtral-8x7b", "mistral"),
        ("ollama:mistral", "mistral"),
        ("Qwen/Qwen2.5-7B", "qwen"),
        ("judge-v2", "judge"),
    ],
)
def test_model_family_is_provider_agnostic(name: str, family: str) -> None:
    assert model_family(name) == family


def test_position_probe_relative_scale_flags_a_judge_that_marks_down_the_candidate_slot() -> None:
    # Whoever sits in the candidate slot gets 0.3: both orientations fail, a contradiction.
    biased = position_probe([0.3] * 20, [0.3] * 20)
    assert biased.status == "ok" and biased.flagged
    assert biased.consistency_rate.value == 0.0 and biased.inconsistent == 20
    assert biased.mean_shift.value == pytest.approx(-0.7)
    # An unbiased judge on a capped scale: the worse side fails, the better side gets 1.0.
    rng = np.random.default_rng(3)
    quality_gap = rng.uniform(-0.6, 0.6, 20)  # candidate minus baseline
    orig = 1.0 + np.minimum(quality_gap, 0.0)
    swapped = 1.0 + np.minimum(-quality_gap, 0.0)
    fair = position_probe(orig, swapped)
    assert not fair.flagged
    assert fair.consistency_rate.value == 1.0 and fair.mean_shift.value == 0.0


def test_position_probe_symmetric_scale_mirrors_the_swapped_score() -> None:
    orig = np.linspace(0.05, 0.95, 20)
    fair = position_probe(orig, 1.0 - orig, scale="symmetric")
    assert fair.consistency_rate.value == 1.0 and fair.mean_shift.value == pytest.approx(0.0)
    # favouring the baseline slot by 0.3 everywhere: mirrored verdicts disagree near the middle
    biased = position_probe(np.clip(orig - 0.3, 0, 1), np.clip(1.0 - orig - 0.3, 0, 1), scale="symmetric")
    assert biased.mean_shift.value is not None and biased.mean_shift.value < -0.4
    assert biased.flagged


def test_position_probe_with_too_few_pairs_is_insufficient_data() -> None:
    probe = position_probe([0.2] * 3, [0.2] * 3)
    assert probe.status == "insufficient data" and not probe.flagged
    assert probe.consistency_rate.value is None
    json.dumps(probe.to_dict(), allow_nan=False)


def test_length_probe_flags_a_judge_that_follows_length_more_than_the_references() -> None:
    rng = np.random.default_rng(5)
    ratios = rng.uniform(0.2, 3.0, 60)
    quality = rng.uniform(0, 1, 60)
    verbose_judge = np.clip(ratios / 3.0, 0, 1)
    probe = length_probe(verbose_judge, ratios, {"embedding:m": (quality, ratios)})
    assert probe.flagged and probe.excess is not None and probe.excess > 0.5
    assert probe.judge.value == pytest.approx(1.0)
    fair = length_probe(quality + rng.normal(0, 0.05, 60), ratios, {"embedding:m": (quality, ratios)})
    assert not fair.flagged
    json.dumps(probe.to_dict(), allow_nan=False)


def test_length_probe_reports_undefined_judge_correlation_without_flagging() -> None:
    ratios = np.linspace(0.5, 2.0, 20)
    probe = length_probe([1.0] * 20, ratios, {"vrty": (list(np.linspace(0, 1, 20)), ratios)})
    assert probe.judge.value is None and probe.excess is None and not probe.flagged
    assert "undefined" in (probe.reason or "")


def test_self_preference_probe_uses_the_reference_to_remove_real_quality_differences() -> None:
    n = 40
    models = ["gpt-4o-mini"] * (n // 2) + ["claude-3-haiku"] * (n // 2)
    ref = np.array([0.9] * (n // 2) + [0.5] * (n // 2))  # gpt candidates really are better
    fair = self_preference_probe("openai:gpt-4o", ref + 0.02, models, {"vrty": list(ref)})
    assert fair.status == "ok" and fair.judge_family == "gpt"
    assert fair.difference.value == pytest.approx(0.4)
    assert not fair.flagged  # the residual difference is 0
    lifted = ref - 0.3 + np.array([0.3] * (n // 2) + [0.0] * (n // 2))  # +0.3 for its own family only
    partial = self_preference_probe("openai:gpt-4o", lifted, models, {"vrty": list(ref)})
    assert partial.residual_difference["vrty"].value == pytest.approx(0.3)
    assert partial.flagged
    few = self_preference_probe("openai:gpt-4o", [0.5] * 6, ["gpt-4o"] * 5 + ["claude-3"], None)
    assert few.status == "insufficient data" and not few.flagged
