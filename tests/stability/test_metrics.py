"""The metrics, claims, config and fingerprint rules on fixed data (no model, no server)."""

from __future__ import annotations

import json
import math

import pytest

from llm_connect.errors import ConfigurationError
from llm_connect.stability import (
    FINGERPRINTS,
    StabilityConfig,
    claim_counts,
    detect_structure,
    normalized_answer,
    tool_signature,
)
from llm_connect.stability._fingerprint import identify_fingerprints
from llm_connect.stability._metrics import (
    agreement_rates,
    answer_text,
    length_consistency,
    semantic_consistency,
    tool_consistency,
)
from llm_connect.stability._report import ClaimSummary, MetricResult
from llm_connect.types import LLMResponse, ToolCall

CONFIG = StabilityConfig()


def response(text: str = "", *calls: tuple[str, str]) -> LLMResponse:
    return LLMResponse(text, "m", "test", tool_calls=tuple(ToolCall(n, a) for n, a in calls))


@pytest.mark.parametrize(
    ("text", "structure"),
    [
        ('{"a": 1}', "json"),
        ("  [1, 2, 3]\n", "json"),
        ('```json\n{"a": 1}\n```', "json"),
        ("```python\nprint(1)\n```", "code"),
        ("Here:\n```\nls -l\n```", "code"),
        ("# Title\nSome text.", "markdown"),
        ("This is **important**.", "markdown"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "markdown"),
        ("- one\n- two", "list"),
        ("1. first\n2. second", "list"),
        ("Paris is the capital of France.", "text"),
        ("42", "text"),
        ("{not json", "text"),
        ("", "text"),
    ],
)
def test_detect_structure(text, structure):
    assert detect_structure(text) == structure


def test_tool_signature_ignores_call_order_and_argument_formatting():
    a = [ToolCall("search", '{"q": "tokyo", "limit": 5}'), ToolCall("book", "{}")]
    b = [ToolCall("book", ""), ToolCall("search", '{"limit":5,"q":"tokyo"}')]
    assert tool_signature(a) == tool_signature(b)
    assert tool_signature([ToolCall("search", '{"q": "osaka"}')]) != tool_signature(
        [ToolCall("search", '{"q": "tokyo"}')]
    )
    assert tool_signature([ToolCall("s", "not json ")]) == (("s", "not json"),)
    twice = [ToolCall("s", "{}"), ToolCall("s", "{}")]
    assert tool_signature(twice) != tool_signature(twice[:1])  # a multiset: calling twice is not calling once


def test_tool_consistency_is_the_share_of_the_most_common_call_set():
    runs = [response("", ("a", "{}"))] * 6 + [response("", ("b", "{}"))] * 2 + [response("text")] * 2
    result = tool_consistency(runs, CONFIG)
    assert result.score == pytest.approx(0.6) and result.variance == "HIGH"
    assert result.details["tool_usage_rate"] == pytest.approx(0.8)
    assert result.details["distinct_call_sets"] == 3 and result.details["runs_per_tool"] == {"a": 6, "b": 2}
    assert tool_consistency([response("x")] * 3, CONFIG).score == 1.0  # no tools at all: consistent


def test_answer_text_spells_out_tool_calls():
    assert answer_text(response("", ("lookup", '{"id": 4}'))) == 'lookup({"id":4})'
    assert answer_text(response("ok", ("a", "{}"))) == "ok\na({})"


def test_length_score_from_the_coefficient_of_variation():
    lengths = [10, 20, 10, 20]
    cv = 5 / 15
    result = length_consistency(lengths, CONFIG)
    assert result.details["cv"] == pytest.approx(cv)
    assert result.score == pytest.approx(max(0.0, 1 - cv / 0.4))
    assert result.variance == "HIGH"
    assert length_consistency([100, 110, 90], CONFIG).variance == "LOW"  # CV 0.08
    assert length_consistency([10, 10, 10], CONFIG).score == 1.0
    short = length_consistency([1, 4, 1, 4], CONFIG)  # mean 2.5 words: too short to measure
    assert short.score == 1.0 and short.details["too_short_to_measure"]


@pytest.mark.parametrize(("cv", "variance"), [(0.0, "LOW"), (0.149, "LOW"), (0.15, "MEDIUM"), (0.3, "HIGH")])
def test_length_variance_thresholds(cv, variance):
    assert CONFIG.variance("length", cv) == variance


@pytest.mark.parametrize(
    ("metric", "score", "variance"),
    [
        ("semantic", 0.85, "LOW"),
        ("semantic", 0.84, "MEDIUM"),
        ("semantic", 0.70, "MEDIUM"),
        ("semantic", 0.69, "HIGH"),
        ("tool", 0.95, "LOW"),
        ("tool", 0.80, "MEDIUM"),
        ("tool", 0.79, "HIGH"),
        ("structural", 0.95, "LOW"),
        ("structural", 0.85, "MEDIUM"),
        ("structural", 0.84, "HIGH"),
    ],
)
def test_variance_thresholds_are_the_seeds(metric, score, variance):
    assert CONFIG.variance(metric, score) == variance


@pytest.mark.parametrize(
    ("score", "verdict"), [(0.9, "SAFE"), (0.899, "RISKY"), (0.7, "RISKY"), (0.69, "DO_NOT_SHIP")]
)
def test_verdict_thresholds(score, verdict):
    assert CONFIG.verdict(score) == verdict


def test_semantic_consistency_is_the_mean_cosine_to_the_centroid():
    vectors = [[1.0, 0.0], [0.0, 2.0]]  # unit vectors (1,0), (0,1); centroid (0.5, 0.5)
    result = semantic_consistency(vectors, CONFIG)
    assert result.score == pytest.approx(math.sqrt(0.5))
    assert semantic_consistency([[3.0, 4.0]] * 5, CONFIG).score == pytest.approx(1.0)


def test_agreement_rates_raw_and_parsed():
    runs = [
        response('{"a": 1, "b": 2}'),
        response('{"b":2,"a":1}'),
        response("Paris  is the capital."),
        response("paris is the capital."),
        response('{"a": 1, "b": 2}'),
    ]
    rates = agreement_rates(runs)
    assert rates.raw_text == pytest.approx(2 / 5) and rates.distinct_texts == 4
    assert rates.parsed_answer == pytest.approx(3 / 5) and rates.distinct_answers == 2
    assert normalized_answer(runs[2]) == normalized_answer(runs[3])
    assert normalized_answer(response("", ("a", "{}"))) != normalized_answer(response("", ("b", "{}")))


def test_claim_categories_are_counted():
    assert claim_counts("Paris is the capital of France.") == {
        "guarantees": 0,
        "false_authority": 0,
        "specific_claims": 0,
        "overconfidence": 0,
    }
    assert claim_counts("This is 100% safe and risk-free, guaranteed.")["guarantees"] == 3
    assert claim_counts("Certified by the FDA. According to our research it works.")["false_authority"] == 2
    assert (
        claim_counts("Released on March 3, 2021 for $49.99; 87% of users, 1,200,000 downloads.")[
            "specific_claims"
        ]
        == 4
    )
    assert claim_counts("I am absolutely certain. Definitely, without a doubt.")["overconfidence"] == 3


def _metric(name: str, score: float, variance: str, **details: object) -> MetricResult:
    return MetricResult(name, score, variance, 0.25, dict(details))  # type: ignore[arg-type]


LOW = {"semantic": _metric("semantic", 1, "LOW"), "structural": _metric("structural", 1, "LOW")}
NO_CLAIMS = ClaimSummary({}, 0, 0.0, "NONE")


def _fingerprints(**changes: object) -> tuple[str, ...]:
    args: dict[str, object] = {
        "semantic": _metric("semantic", 1, "LOW"),
        "tool": _metric("tool", 1, "LOW", tool_usage_rate=0.0),
        "structural": _metric("structural", 1, "LOW"),
        "length": _metric("length", 1, "LOW", cv=0.0),
        "claims": NO_CLAIMS,
        "verdict": "SAFE",
        "tool_sets_among_callers": 0,
    }
    args.update(changes)
    return tuple(f.name for f in identify_fingerprints(**args))  # type: ignore[arg-type]


def test_fingerprint_rules():
    assert _fingerprints() == ()
    high_semantic = _metric("semantic", 0.5, "HIGH")
    assert _fingerprints(semantic=high_semantic) == ("UNDERSPECIFIED_PROMPT",)
    mixed = _fingerprints(semantic=high_semantic, structural=_metric("structural", 0.8, "HIGH", counts={}))
    assert mixed == ("GENERAL_INSTABILITY", "FORMAT_INCONSISTENCY")
    assert _fingerprints(claims=ClaimSummary({}, 5, 0.5, "HIGH")) == ("UNCONSTRAINED_ASSERTIONS",)
    assert _fingerprints(verdict="RISKY") == ("GENERAL_INSTABILITY",)
    routing = _metric("tool", 0.5, "HIGH", tool_usage_rate=0.5, runs_per_tool={"t": 5})
    long_short = _metric("length", 0.0, "HIGH", cv=0.8)
    # tool routing explains the drift in meaning and length: only the tool fingerprint is raised
    assert _fingerprints(
        tool=routing, semantic=high_semantic, length=long_short, tool_sets_among_callers=1
    ) == ("NONDETERMINISTIC_TOOL_ROUTING",)
    both = _fingerprints(tool=routing, tool_sets_among_callers=2)
    assert both == ("NONDETERMINISTIC_TOOL_ROUTING", "TOOL_CONFUSION")
    assert set(FINGERPRINTS) >= set(both) and len(FINGERPRINTS) == 7


def test_fingerprints_are_listed_most_serious_first():
    names = _fingerprints(
        claims=ClaimSummary({}, 5, 0.5, "HIGH"),
        structural=_metric("structural", 0.5, "HIGH", counts={"json": 1, "text": 1}),
    )
    assert names == ("UNCONSTRAINED_ASSERTIONS", "FORMAT_INCONSISTENCY")


def test_config_validation_and_round_trip():
    config = StabilityConfig(safe_threshold=0.95, length_weight=0.1, semantic_weight=0.45)
    assert StabilityConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert StabilityConfig.from_dict({"tool_low": 0.99}).tool_low == 0.99
    for bad in (
        {"semantic_weight": 0.5},  # weights no longer sum to 1
        {"safe_threshold": 1.5},
        {"risky_threshold": 0.95},  # above safe_threshold
        {"tool_low": 0.7},  # below tool_medium
        {"length_cv_zero": 0.0},
        {"min_success_rate": float("nan")},
        {"semantic_low": True},
    ):
        with pytest.raises(ConfigurationError):
            StabilityConfig.from_dict(bad)
    with pytest.raises(ConfigurationError, match="unknown StabilityConfig field 'safe'"):
        StabilityConfig.from_dict({"safe": 0.9})
    with pytest.raises(AttributeError):
        config.safe_threshold = 0.5  # type: ignore[misc]
