"""Derived state cannot go stale or be forgotten (issue 33, item 4).

Whatever a decision reads besides the grades and the labels themselves is kept by the store
that owns it, in the write's own transaction (the running totals ``grade_stats`` and
``case_stats``), or by a Router in memory, checked against those totals and the label
versions on every read. No call user code must remember. Here a ledger is written through
every public path; after each write a Router kept since the start decides on both targets,
the running totals are compared with a rebuild from the grades (``rebuild_stats``), and the
decisions are compared with those of a new Router on the rebuilt ledger.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sqlalchemy import text

from llm_connect.labels import HumanLabel, choose_for_labels, import_labels, write_labels
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.report import serve
from llm_connect.routing import Router, RoutingPolicy
from tests.cli._util import invoke, pair_suite
from tests.fixtures.databases import _make_result
from tests.report.test_label import next_case, own, request

POLICIES = (
    RoutingPolicy(min_quality=0.5, min_samples=5, route_on=("exact",)),
    RoutingPolicy(min_quality=0.5, min_samples=5, route_on=("exact",), target="human"),
)


def _rounded(value: Any) -> Any:
    """``value`` with every float rounded to 9 significant digits (sums kept by a write and sums
    rebuilt in another order may differ in the last bit), and the decision's time left out (and
    the time of a streak the decision would start, which is its own)."""
    if isinstance(value, dict):
        if value.get("routed_since") and value["routed_since"].get("decision_id") is None:
            value = value | {"routed_since": {k: v for k, v in value["routed_since"].items() if k != "at"}}
        return {k: _rounded(v) for k, v in value.items() if k not in ("created_at", "decision_id")}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    if isinstance(value, float) and math.isfinite(value) and value != 0.0:
        return float(f"{value:.9g}")
    return value


def _totals(ledger: QualityLedger) -> dict[str, list[Any]]:
    """The running totals as stored, in key order."""
    with ledger.engine.connect() as conn:
        return {
            table: _rounded(
                [list(r) for r in conn.execute(text(f"SELECT * FROM {table} ORDER BY 1, 2, 3, 4, 5"))]
            )
            for table in ("grade_stats", "case_stats")
        }


def _check(ledger: QualityLedger, router: Router, step: str) -> None:
    warm = [router.evaluate("qa", baseline="big", candidates=["small"], policy=p).to_dict() for p in POLICIES]
    kept = _totals(ledger)
    ledger.rebuild_stats()
    assert _totals(ledger) == kept, f"after {step}: the running totals differ from a rebuild"
    fresh = [
        Router(ledger).evaluate("qa", baseline="big", candidates=["small"], policy=p).to_dict()
        for p in POLICIES
    ]
    for w, f, policy in zip(warm, fresh, POLICIES, strict=True):
        assert _rounded(w) == _rounded(f), f"after {step}, target {policy.target}: a stale decision"


def _grade(path: Path, ledger_url: str, n: int, same: int, *extra: str) -> None:
    result = invoke("grade", str(pair_suite(path, n, same=same)), "--db", ledger_url, *extra)
    assert result.exit_code in (0, 5), result.output


def test_every_public_write_path_leaves_every_decision_as_a_rebuild_gives(
    tmp_path: Path, ledger_url: str
) -> None:
    postgres = ledger_url.startswith("postgresql")
    _grade(tmp_path / "s1.jsonl", ledger_url, 40, 32, "--run-id", "r1")
    with QualityLedger(ledger_url) as ledger:
        router = Router(ledger)  # kept across every write below, as routing code keeps one
        _check(ledger, router, "grade")

        # record and record_many: new cases, and a replicate of a known case
        ledger.record(
            _make_result(1.0, baseline_model="big", candidate_model="small"), task="qa", case_id="c40"
        )
        _check(ledger, router, "record")
        ledger.record_batch(
            [
                RecordItem(_make_result(s, baseline_model="big", candidate_model="small", prompt=f"q{i}"),
                           "qa", "r9", f"c{i}")
                for i, s in ((41, 0.0), (42, 1.0), (3, 0.0))
            ]
        )  # fmt: skip
        _check(ledger, router, "record_batch (with a replicate of c3)")

        # the sampler, then labels by record_labels
        chosen = choose_for_labels(ledger, task="qa", candidate="small", grader_id="exact", rate=0.5, seed=7)
        assert chosen
        _check(ledger, router, "choose_for_labels")
        ledger.record_labels([HumanLabel("qa", c, "small", "ana", preference="tie") for c in chosen[:5]])
        _check(ledger, router, "record_labels")

        # labels import from a file, one of them replacing an earlier label
        sheet = tmp_path / "labels.jsonl"
        with sheet.open("w", encoding="utf-8") as out:
            write_labels(
                [HumanLabel("qa", c, "small", "bo", preference="baseline") for c in chosen[5:9]]
                + [HumanLabel("qa", chosen[0], "small", "ana", preference="candidate")],
                out,
            )
        import_labels(ledger, sheet, replace=True)
        _check(ledger, router, "labels import")

        # the Label page: a label saved over HTTP with the page's token and Origin
        server = serve(ledger, port=0, label=True)
        try:
            assert server.labels is not None
            case = next_case(server, annotator="cy", query="&task=qa&candidate=small")["case"]
            body = {"ref": case["ref"], "choice": "tie", "annotator": "cy"}
            assert request(server, "POST", "/api/label", body, own(server, server.labels.token))[0] == 200
        finally:
            server.shutdown()
        _check(ledger, router, "the Label page")

        # grade re-runs: the same cases graded again (replicates), then new ones
        _grade(tmp_path / "s2.jsonl", ledger_url, 40, 20, "--run-id", "r2")
        _check(ledger, router, "a grade re-run")
        _grade(tmp_path / "s3.jsonl", ledger_url, 60, 50, "--run-id", "r3")
        if postgres:  # a shared run's workers record through claims (PostgreSQL only)
            _grade(tmp_path / "s4.jsonl", ledger_url, 70, 60, "--run-id", "w1", "--shared")
        more = choose_for_labels(ledger, task="qa", candidate="small", grader_id="exact", rate=0.5, seed=7)
        ledger.record_labels([HumanLabel("qa", c, "small", "ana", preference="baseline") for c in more[:6]])
        _check(ledger, router, "grade re-runs" + (" and a shared run" if postgres else ""))
        decision = router.evaluate("qa", baseline="big", candidates=["small"], policy=POLICIES[1])
        assert decision.candidates[0].graders[0].labels_used >= 10  # people's labels did count
