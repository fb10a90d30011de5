"""``route --slice-by`` and ``grade --slice-by`` (issue 38): the slice table, ``--json``'s
``slices``, the report's slice section, and bad keys as exit 2 with nothing written."""

from __future__ import annotations

import json
import random
from pathlib import Path

from llm_connect.ledger import QualityLedger, RecordItem
from tests.cli._util import invoke, write_suite
from tests.fixtures.databases import _make_result


def _ledger(url: str) -> None:
    """Task support: 100 cases each of lang:en and lang:fr near 0.98, lang:de near 0.6."""
    rng = random.Random(5)
    items = []
    for name, mean in {"en": 0.98, "fr": 0.98, "de": 0.6}.items():
        for i in range(100):
            score = min(1.0, max(0.0, rng.gauss(mean, 0.04)))
            result = _make_result(score, candidate_model="mini", grader_id="exact", prompt=f"{name} {i}")
            items.append(RecordItem(result, "support", "r1", f"{name}-{i}", (f"lang:{name}",)))
    rng.shuffle(items)
    with QualityLedger(url) as ledger:
        ledger.record_batch(items)


def _route(url: str, *extra: str) -> object:
    return invoke("route", "--db", url, "-t", "support", "-b", "gpt-4o", "-c", "mini", "-j", "exact", *extra)


def test_route_prints_the_slice_table_and_json(ledger_url: str, tmp_path: Path) -> None:
    _ledger(ledger_url)
    result = _route(ledger_url, "--slice-by", "tag:lang")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    lines = result.stdout.splitlines()  # type: ignore[attr-defined]
    assert lines[0] == "gpt-4o"  # the whole task hides the bad slice, and keeps the baseline
    head = next(i for i, line in enumerate(lines) if line.startswith("slices of support by tag:lang"))
    assert "3 slices; e-BH" in lines[head]
    table = [line.split() for line in lines[head + 1 :]]
    assert table[0] == ["slice", "cases", "decision", "bound"]
    assert table[1][:4] == ["de", "100", "gpt-4o", "(mini"] and table[1][4:6] == ["ruled", "out)"]
    assert table[2][:4] == ["en", "100", "mini", "(proven)"] and float(table[2][4]) >= 0.9
    assert table[3][:4] == ["fr", "100", "mini", "(proven)"]
    data = json.loads(_route(ledger_url, "--slice-by", "tag:lang", "--json").stdout)  # type: ignore[attr-defined]
    assert data["model"] == "gpt-4o" and data["decision_id"] is not None
    assert data["slices"]["slice_by"] == "tag:lang" and data["slices"]["method"] == "e-BH"
    assert {s["name"]: s["model"] for s in data["slices"]["slices"]} == {
        "de": "gpt-4o",
        "en": "mini",
        "fr": "mini",
    }
    # the report shows the newest stored slice decision
    out = tmp_path / "r.html"
    assert invoke("report", "--db", ledger_url, "-o", str(out)).exit_code == 0
    html = out.read_text(encoding="utf-8")
    assert '<section id="slices">' in html and f"Decision #{data['decision_id']}" in html
    assert '<tr data-slice="fr"><td>fr</td><td>100</td>' in html


def test_bad_slice_keys_are_exit_2_naming_them_and_write_nothing(ledger_url: str) -> None:
    _ledger(ledger_url)
    result = _route(ledger_url, "--slice-by", "language")
    assert result.exit_code == 2 and "--slice-by" in result.output and "'language'" in result.output  # type: ignore[attr-defined]
    result = _route(ledger_url, "--slice-by", "meta:customer_tier")
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert "metadata key 'customer_tier'" in result.output and "support" in result.output  # type: ignore[attr-defined]
    with QualityLedger(ledger_url) as ledger:
        assert ledger.decisions() == []


def _suite(path: Path, tags: bool = True) -> Path:
    rows = []
    for i in range(160):
        lang = "en" if i % 2 else "fr"
        rows.append(
            {
                "id": f"c{i}",
                "prompt": f"question {i}",
                "task": "qa",
                "tags": [f"lang:{lang}"] if tags else [],
                "baseline_response": {"text": f"answer {i}", "model": "big", "cost_usd": 0.01},
                "candidate_response": {
                    "text": f"answer {i}" if lang == "en" else f"other {i}",
                    "model": "small",
                    "cost_usd": 0.001,
                },
            }
        )
    return write_suite(path, rows)


def test_grade_prints_the_slice_table_and_json(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    suite = _suite(tmp_path / "s.jsonl")
    result = invoke("grade", str(suite), "--db", db, "--slice-by", "tag:lang", "--min-samples", "20")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("slices of qa by tag:lang"))
    assert lines[head + 2].split()[:4] == ["en", "80", "small", "(proven)"]
    assert lines[head + 3].split()[:3] == ["fr", "80", "big"]
    result = invoke(
        "grade", str(suite), "--db", db, "--slice-by", "tag:lang", "--min-samples", "20", "--json"
    )
    data = json.loads(result.stdout)
    (sliced,) = data["slices"]
    assert sliced["task"] == "qa" and sliced["decision_id"] is not None
    assert {s["name"]: s["model"] for s in sliced["slices"]} == {"en": "small", "fr": "big"}


def test_grade_refuses_a_bad_key_before_anything_runs(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    suite = _suite(tmp_path / "s.jsonl")
    result = invoke("grade", str(suite), "--db", db, "--slice-by", "tools:x")
    assert result.exit_code == 2 and "--slice-by" in result.output and "'tools:x'" in result.output
    result = invoke("grade", str(suite), "--db", db, "--slice-by", "tag:region")
    assert result.exit_code == 2 and "tag:region" in result.output and "'qa'" in result.output
    assert not (tmp_path / "l.db").exists() or QualityLedger(db).results() == []
