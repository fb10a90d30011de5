"""Crossed bounds: a candidate whose grades' mean moved within its stream says so.

The anytime bounds only tighten (the lower one is a running maximum, the upper one a running
minimum), so a stream that was good early and poor lately can end with its lower bound above its
upper one: no one mean fits every case. Every surface then says "the bounds cross ... the mean
moved" instead of showing a reversed interval such as ``[0.850, 0.375]``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from llm_connect.grading import GradingResult
from llm_connect.ledger import CaseSeries, QualityLedger, RecordItem
from llm_connect.report import render_report
from llm_connect.routing import Router, RoutingPolicy
from llm_connect.routing._evidence import assess
from tests.cli._util import invoke

MakeResult = Callable[..., GradingResult]


def _record(ledger: QualityLedger, make_result: MakeResult, scores: list[float]) -> None:
    ledger.record_batch(
        [
            RecordItem(
                make_result(s, candidate_model="small", baseline_model="big", grader_id="exact"),
                "qa",
                "r1",
                f"c{i:04d}",
            )
            for i, s in enumerate(scores)
        ]
    )


def test_a_mean_that_moved_is_named_on_every_surface_never_a_reversed_interval(
    ledger: QualityLedger, make_result: MakeResult, tmp_path: object
) -> None:
    _record(ledger, make_result, [1.0] * 200 + [0.3] * 400)  # good first, poor lately
    policy = RoutingPolicy(min_quality=0.85, min_samples=30)
    decision = Router(ledger).evaluate("qa", policy=policy, baseline="big", candidates=["small"])
    ev = decision.evidence_for("small").graders[0]
    assert ev.status == "ruled out" and not decision.routed
    assert ev.lower_bound is not None and ev.upper_bound is not None
    assert ev.lower_bound > ev.upper_bound and ev.bounds_cross
    assert "the bounds cross (lower 0.850 above upper" in ev.why
    assert "no one mean fits all 600 cases, the grades' mean moved within them" in ev.why
    assert ev.bounds_text().startswith("bounds cross (lower 0.850 above upper ")
    reversed_interval = f"[{ev.lower_bound:.3f}, {ev.upper_bound:.3f}]"

    out = invoke("route", "-t", "qa", "-b", "big", "-c", "small", "-j", "exact", "--min-quality", "0.85",
                 "--min-samples", "30", "--db", ledger.url)  # fmt: skip
    assert (
        out.exit_code == 0 and "the grades' mean moved" in out.output and reversed_interval not in out.output
    )
    shown = invoke("route", "-t", "qa", "-b", "big", "-c", "small", "-j", "exact", "--min-quality", "0.85",
                   "--min-samples", "30", "--db", ledger.url, "--json")  # fmt: skip
    assert "no one mean fits all 600 cases" in json.dumps(json.loads(shown.stdout))
    html = render_report(ledger, policy=policy)
    assert "bounds cross: the mean moved" in html and reversed_interval not in html


def test_a_steady_stream_seldom_crosses_its_bounds() -> None:
    """Under a constant mean the bounds cross with chance at most 2 alpha (each side errs with
    alpha): 400 seeded streams of 400 cases at a mean of 0.8, alpha 0.05: at most 40 expected
    at that rate, none seen in practice; 20 is far above what a working bound gives."""
    rng = np.random.default_rng(20261129)
    crossed = 0
    for _ in range(400):
        values = tuple(float(v) for v in (rng.random(400) < 0.8).astype(float))
        n = len(values)
        series = CaseSeries("qa", "big", "exact", "small", (1,) * n, values, (0,) * n, (0.0,) * n)
        ev = assess(series, "exact", min_quality=0.8, min_samples=30, alpha=0.05, confidence=0.95)
        crossed += ev.bounds_cross
    assert crossed <= 20
