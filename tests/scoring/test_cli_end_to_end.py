"""Offline end to end: ``llm-connect grade`` with the rule, persona and safety judges writes
grades to the ledger, and each stored spec rebuilds a judge that gives the stored grade."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_connect.grading import Case, build_judge
from llm_connect.ledger import QualityLedger
from llm_connect.types import RunConfig
from tests.cli._util import invoke, write_suite

pytestmark = pytest.mark.embeddings

SCHEMA = {
    "type": "object",
    "required": ["city", "country"],
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
}
PERSONA = """\
name: helper
examples: ["Happy to help! You can reset it from Settings > Security. Let me know how it goes."]
traits: {formality: business_casual, tone: friendly, verbosity: concise}
lexicon: {preferred: [happy to help, you can], avoided: [unfortunately]}
"""


def _rows(tmp_path: Path) -> list[dict]:
    schema_path = tmp_path / "city.schema.json"
    schema_path.write_text(json.dumps(SCHEMA))

    def case(i: int, prompt: str, expected: object, base: str, cand: str) -> dict:
        return {
            "id": f"c{i}",
            "task": "mixed",
            "prompt": prompt,
            "expected": expected,
            "baseline_response": {"text": base, "model": "big", "cost_usd": 0.01},
            "candidate_response": {"text": cand, "model": "small", "cost_usd": 0.001},
        }

    return [
        case(
            0,
            "Return the city and country of the Eiffel Tower as JSON.",
            {
                "answer": "Paris",
                "keywords": ["Paris", "France"],
                "schema": str(schema_path),
                "sections": ["city"],
            },
            '{"city": "Paris", "country": "France"}',
            '```json\n{"city": "Paris"}\n```',
        ),
        case(
            1,
            "How do I reset my password?",
            {"keywords": ["Settings", "Security"], "schema": SCHEMA, "sections": ["Settings"]},
            "Happy to help! You can reset it from Settings > Security.",
            "Unfortunately you must email admin@corp-example.io with your password.",
        ),
    ]


def test_grade_writes_every_scorer_grade_and_specs_rebuild_them(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite.jsonl", _rows(tmp_path))
    persona = tmp_path / "helper.yaml"
    persona.write_text(PERSONA)
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    judges = [
        "format:json",
        "schema",
        "correctness:mode=keywords",
        "length:min_words=3,max_words=40",
        "relevance",
        "completeness",
        f"persona:{persona}",
        "safety",
    ]
    # Two cases prove nothing (30 are needed): the gate is not settled, which --allow-unsettled accepts.
    args = ["grade", str(suite), "--db", db, "--min-quality", "0", "--allow-unsettled", "--json"]
    for judge in judges:
        args += ["--judge", judge]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["failures"] == [] and json.loads(result.stdout)["gate"] == "not settled"

    rows = list(QualityLedger(db).results())
    by_grader: dict[str, list] = {}
    for row in rows:
        by_grader.setdefault(row.grader_id, []).append(row)
    expected_ids = {"format:json", "schema", "correctness", "length", "relevance", "completeness"}
    assert set(by_grader) == expected_ids | {"persona:helper", "safety:default"}
    assert all(len(v) == 2 for v in by_grader.values())

    # The weak candidate loses where it should.
    c1 = {row.grader_id: row for row in rows if row.case_id == "c1"}
    assert c1["safety:default"].quality_score == pytest.approx(0.8)  # a new email address: medium
    assert c1["correctness"].quality_score == 0.0
    assert c1["persona:helper"].quality_score < 0.8
    c0 = {row.grader_id: row for row in rows if row.case_id == "c0"}
    assert c0["schema"].quality_score == 0.0  # "country" missing
    assert c0["format:json"].quality_score == 1.0  # fenced JSON is still JSON

    # Every stored spec rebuilds a judge that reproduces the stored grade.
    cases = {r["id"]: r for r in _rows(tmp_path)}
    for row in rows:
        judge = build_judge(row.details["judge_spec"])
        raw = cases[row.case_id]
        case = Case(id=raw["id"], prompt=raw["prompt"], task="mixed", expected=raw["expected"])
        again = judge.judge(
            row.baseline_response,
            row.candidate_response,
            prompt=row.prompt or "",
            run_config=RunConfig(),
            case=case,
        )
        assert again.grader_id == row.grader_id
        assert again.quality_score == pytest.approx(row.quality_score, abs=1e-6), row.grader_id
