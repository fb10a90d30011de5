"""The static report: self-contained, escaped, the router's decision, truncation, bad selections."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text

from llm_connect.errors import ConfigurationError
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.report import render_report, write_report
from llm_connect.routing import Router
from tests.fixtures.databases import _make_result

EVIL = "</script><script>alert(1)</script> & <b>bold</b>"


def fill_ledger(
    ledger: QualityLedger,
    *,
    tasks: tuple[str, ...] = ("support", "billing"),
    cases: int = 40,
    run_id: str = "r1",
    evil: bool = True,
) -> int:
    """Grades of two candidates on two judges per task: ``mini`` is near 0.99, ``llama`` near 0.6."""
    items = []
    for task in tasks:
        for cand, base_q, cost in (("mini", 0.99, 0.0006), ("llama", 0.6, 0.0001)):
            for judge in ("embedding", "vrty"):
                for i in range(cases):
                    score = min(1.0, base_q + ((i * 7919) % 11 - 5) / 400)
                    answer = EVIL if (evil and i == 0) else f"The answer {i} to {task} is here, with words"
                    result = _make_result(
                        score,
                        grader_id=judge,
                        candidate_model=cand,
                        candidate_cost=cost,
                        prompt=f"question {i} on {task}",
                        baseline_text=f"The answer {i} to {task} is there, with other words",
                        candidate_text=answer,
                        notes=f"note {i} <i>x</i>",
                    )
                    items.append(
                        RecordItem(result, task=task, run_id=run_id, case_id=f"{task}-{i}", metadata={"n": i})
                    )
    ledger.record_batch(items)
    return len(items)


def table_counts(ledger: QualityLedger) -> dict[str, int]:
    """Rows in every table of the ledger (to prove nothing was written)."""
    names = inspect(ledger.engine).get_table_names()
    with ledger.engine.connect() as conn:
        return {n: int(conn.execute(text(f'SELECT COUNT(*) FROM "{n}"')).scalar_one()) for n in names}


def case_data(html: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="case-data">(.*?)</script>', html, re.S)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    return data


@pytest.fixture
def filled(tmp_path: Path) -> QualityLedger:
    ledger = QualityLedger(f"sqlite:///{tmp_path / 'ledger.db'}")
    fill_ledger(ledger)
    return ledger


def test_the_file_is_self_contained(filled: QualityLedger, tmp_path: Path) -> None:
    info = write_report(filled, tmp_path / "r.html")
    html = info.path.read_text(encoding="utf-8")
    assert info.bytes == len(html.encode("utf-8")) and info.grades == 320 and not info.truncated
    for attr in re.findall(r'\b(?:src|href|xlink:href|action)\s*=\s*["\']([^"\']*)', html, re.I):
        assert attr.startswith("#"), attr  # only links within the page
    assert not re.search(r"<link\b", html, re.I)
    assert "@import" not in html
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", html, re.I)
    assert not re.search(r"<(?:img|image|iframe|object|embed)\b", html, re.I)
    assert "Content-Security-Policy" in html  # and the page forbids any request anyway
    for section in ("routing", "evidence", "charts", "distributions", "cases"):
        assert f'<section id="{section}"' in html
    assert 'id="calibration"' not in html and 'id="stability"' not in html and 'id="truncated"' not in html
    for control in (
        'select id="f-task"',
        'select id="f-candidate"',
        'select id="f-judge"',
        'id="f-min"',
        'id="f-max"',
        'id="f-failures"',
        'id="f-search"',
        'select id="f-sort"',
        'id="case-count"',
    ):
        assert control in html
    assert 'value="score-asc"' in html and 'value="score-desc"' in html
    assert html.count("<svg") == 2 + 8  # a chart per task, a histogram per task x candidate x judge
    assert "<text" in html  # svg.fonttype none: labels stay text, no glyph paths or fonts


def test_texts_are_escaped_and_cannot_break_out(filled: QualityLedger) -> None:
    html = render_report(filled)
    assert "<script>alert(1)" not in html and "</script><script>" not in html
    assert "<b>bold</b>" not in html and "<i>x</i>" not in html
    # exactly three script elements: the decisions, the case data and the page's own code
    assert len(re.findall(r"<script\b", html)) == 3
    assert len(re.findall(r'<script type="application/json"', html)) == 2
    data = case_data(html)
    texts = ["".join(seg[1] for seg in diff if seg[0] != "-") for diff in data["diffs"]]
    assert EVIL in texts  # the answer comes back intact from the JSON, as text
    assert "\\u003c/script\\u003e" in html and "\\u0026" in html
    # the page's code inserts data with textContent only
    script = re.findall(r"<script>(.*?)</script>", html, re.S)[-1]
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "document.write" not in script


def test_the_decision_is_what_the_router_decides(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ledger = QualityLedger(f"sqlite:///{path}")
    fill_ledger(ledger, tasks=("support",), cases=60, evil=False)
    # an uncalibrated LLM judge on the same task: the router ignores it, so must the report
    items = [
        RecordItem(
            _make_result(0.2, grader_id="llm:openai:judge:rubric-v1", candidate_model=c, asks_llm=True,
                         prompt=f"question {i} on support"),
            task="support", run_id="r1", case_id=f"support-{i}",
        )
        for c in ("mini", "llama")
        for i in range(60)
    ]  # fmt: skip
    ledger.record_batch(items)
    info = write_report(ledger, tmp_path / "r.html")
    (mine,) = info.decisions
    copy = tmp_path / "copy.db"
    ledger.close()  # checkpoints the WAL into the file
    shutil.copy(path, copy)
    with QualityLedger(f"sqlite:///{copy}") as other:
        theirs = Router(other).decide(
            "support", baseline="gpt-4o", candidates=["mini", "llama"],
            grader_id=["embedding", "vrty", "llm:openai:judge:rubric-v1"],
        )  # fmt: skip
    assert mine.model == theirs.model == "mini" and mine.routed, (mine.reason, theirs.reason)
    assert mine.used_grader_ids == theirs.used_grader_ids == ("embedding", "vrty")
    assert [g.grader_id for g in mine.ignored_graders] == ["llm:openai:judge:rubric-v1"]
    for a, b in zip(mine.candidates, theirs.candidates, strict=True):
        assert (a.model, a.status, a.passed, a.cost_ratio, a.latency_ratio) == (
            b.model, b.status, b.passed, b.cost_ratio, b.latency_ratio,
        )  # fmt: skip
        for ga, gb in zip(a.graders, b.graders, strict=True):
            assert ga.to_dict() == gb.to_dict()
    assert {c.model: c.status for c in mine.candidates} == {"mini": "proven", "llama": "ruled out"}
    html = info.path.read_text(encoding="utf-8")
    assert 'route to <strong class="model">mini</strong>' in html
    assert 'data-candidate="llama" data-judge="vrty" data-verdict="ruled out"' in html


def test_the_report_writes_nothing_to_the_ledger(filled: QualityLedger, tmp_path: Path) -> None:
    before = table_counts(filled)
    write_report(filled, tmp_path / "r.html", run_ids=["r1"], tasks=["support"], since="2000-01-01")
    assert table_counts(filled) == before


def test_truncation_keeps_every_aggregate_and_says_so(filled: QualityLedger, tmp_path: Path) -> None:
    full = write_report(filled, tmp_path / "full.html")
    cut = write_report(filled, tmp_path / "cut.html", max_cases=16)
    assert cut.truncated and not full.truncated
    assert cut.grades == full.grades == 320 and cut.cases_embedded == 16
    a, b = (p.read_text(encoding="utf-8") for p in (full.path, cut.path))

    def section(html: str, name: str) -> str:
        found = re.search(rf'<section id="{name}">(.*?)</section>', html, re.S)
        assert found is not None
        return found.group(1)

    for name in ("routing", "evidence", "distributions"):
        assert section(a, name) == section(b, name)
    assert 'id="truncated"' in b and "16 of 320 grades" in b
    rows = case_data(b)["rows"]
    # every task x candidate x judge keeps its worst and its best grade
    groups = {(r["task"], r["cand"], r["judge"]) for r in rows}
    assert len(groups) == 8
    everything = case_data(a)["rows"]
    for g in groups:
        scores = [r["score"] for r in everything if (r["task"], r["cand"], r["judge"]) == g]
        kept = [r["score"] for r in rows if (r["task"], r["cand"], r["judge"]) == g]
        assert min(kept) == min(scores)


def test_an_unknown_run_id_or_an_empty_selection_writes_no_file(
    filled: QualityLedger, tmp_path: Path
) -> None:
    target = tmp_path / "out" / "r.html"
    target.parent.mkdir()
    with pytest.raises(ConfigurationError, match="'nope'"):
        write_report(filled, target, run_ids=["r1", "nope"])
    with pytest.raises(ConfigurationError, match=r"selection is empty.*task other"):
        write_report(filled, target, tasks=["other"])
    with pytest.raises(ConfigurationError, match="selection is empty"):
        write_report(filled, target, since="2999-01-01")
    with pytest.raises(ConfigurationError, match="ISO 8601"):
        write_report(filled, target, since="yesterday")
    assert list(target.parent.iterdir()) == []


def test_the_selection_narrows_tasks_and_cases(filled: QualityLedger) -> None:
    html = render_report(filled, tasks=["billing"])
    rows = case_data(html)["rows"]
    assert {r["task"] for r in rows} == {"billing"} and len(rows) == 160
    assert 'data-task="support"' not in html
    assert {"base_served", "cand_served", "tools_base", "tools_cand", "meta", "notes"} <= set(rows[0])


def test_calibration_and_stability_appear_when_stored(filled: QualityLedger) -> None:
    filled.record_calibration(
        judge_grader_id="llm:openai:judge:rubric-v1",
        references=["embedding"],
        task="support",
        figures={
            "threshold": 0.5,
            "references": [{"reference": "embedding", "n": 3, "status": "pass",
                            "spearman": {"value": 0.9}, "cohen_kappa": {"value": 0.8}}],
            "probes": {"position": {"status": "ok", "consistency_rate": {"value": 0.95}, "flagged": False}},
            "scores": {"embedding": [[0.9, 0.8], [0.2, 0.3], [0.7, 0.75]]},
        },
        verdict="passes: <agrees>",
        passed=True,
    )  # fmt: skip
    filled.record_stability(
        task="support", model="mini", adapter_id="openai:mini", prompt_sha256="0" * 64, runs=10,
        successful_runs=10, overall_score=0.62, verdict="RISKY",
        report={"fingerprints": [{"name": "VERBOSITY_DRIFT", "severity": "MEDIUM", "evidence": "cv 0.4"}]},
    )  # fmt: skip
    html = render_report(filled)
    assert '<section id="calibration">' in html and '<section id="stability">' in html
    assert "passes: &lt;agrees&gt;" in html and "VERBOSITY_DRIFT" in html and "0.900" in html
    assert html.count('<svg class="chart"') == 3  # two tasks and one judge-vs-reference scatter


def test_word_diff_round_trips() -> None:
    from llm_connect.report._diff import diff_html, word_diff

    a, b = "the quick brown fox <jumps>", "the slow brown fox <jumps> high"
    segments = word_diff(a, b)
    assert "".join(t for op, t in segments if op != "+") == a
    assert "".join(t for op, t in segments if op != "-") == b
    assert ["-", "quick "] in segments and ["+", "slow "] in segments
    base, cand = '<mark class="diff-base">', '<mark class="diff-cand">'
    assert diff_html(segments, "baseline") == f"the {base}quick </mark>brown fox &lt;jumps&gt;"
    assert (
        diff_html(segments, "candidate") == f"the {cand}slow </mark>brown fox &lt;jumps&gt;{cand} high</mark>"
    )


def test_all_is_sorted_and_importable() -> None:
    import llm_connect.report as report

    def key(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)

    assert list(report.__all__) == sorted(report.__all__, key=key)
    assert all(getattr(report, name) is not None for name in report.__all__)
