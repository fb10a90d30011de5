"""QualityLedger: recording, reading back, idempotency, filters, summary, export (both backends)."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from llm_connect.errors import GradeConflictError, GradingValidationError
from llm_connect.grading import GradingResult
from llm_connect.ledger import ENV_VAR, GradeRow, QualityLedger, RecordItem
from llm_connect.types import LLMResponse, RunConfig, ToolCall, Usage

MakeResult = Callable[..., GradingResult]


def test_record_returns_id_and_row_round_trips_to_result(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    result = make_result(
        0.75,
        run_config=RunConfig(
            temperature=0.2, max_tokens=50, system_prompt="Be brief.", model_params={"seed": 7}
        ),
        details={"judge_spec": {"name": "exact", "args": {}}, "match": False, "nested": {"a": [1, 2]}},
    )
    row_id = ledger.record(result, task="support", run_id="r1", case_id="c1", tags=["faq", "short"])
    rows = list(ledger.results())
    assert [r.id for r in rows] == [row_id]
    row = rows[0]
    assert isinstance(row, GradeRow)
    assert (row.task, row.run_id, row.case_id, row.tags) == ("support", "r1", "c1", ("faq", "short"))
    assert row.created_at.tzinfo is not None and row.created_at.utcoffset() == timedelta(0)
    assert row.baseline_adapter_id == "openai:gpt-4o" and row.candidate_model == "gpt-4o-mini"
    assert row.baseline_prompt_tokens == 12 and row.candidate_completion_tokens == 4
    assert row.llm_connect_version
    assert row.to_result() == result


def test_tool_calls_and_missing_usage_round_trip(ledger: QualityLedger, make_result: MakeResult) -> None:
    base = make_result()
    cand = LLMResponse(
        text="",
        model="gpt-4o-mini",
        provider="openai",
        tool_calls=(ToolCall("lookup", '{"q": "x"}'),),
        finish_reason="tool_calls",
    )
    result = GradingResult(0.0, "no text", "exact", base.baseline_response, cand, prompt="p")
    ledger.record(result, task="t")
    (row,) = ledger.results()
    assert row.candidate_prompt_tokens is None and row.candidate_cost_usd is None
    assert row.to_result() == result


def test_rows_survive_pickle_and_deepcopy(ledger: QualityLedger, make_result: MakeResult) -> None:
    import copy
    import pickle

    cand = LLMResponse("", "gpt-4o-mini", "openai", tool_calls=(ToolCall("lookup", '{"q": "x"}'),))
    result = GradingResult(
        0.5,
        "n",
        "exact",
        make_result().baseline_response,
        cand,
        details={"judge_spec": {"name": "exact", "args": {}}, "n": [1]},
        prompt="p",
        run_config=RunConfig(temperature=0.0, model_params={"seed": 1}),
    )
    ledger.record(result, task="t")
    (row,) = ledger.results()
    for copied in (pickle.loads(pickle.dumps(row)), copy.deepcopy(row)):
        assert copied == row and copied.to_result() == result
        with pytest.raises(TypeError):
            copied.details["n"] = 2  # type: ignore[index]
        with pytest.raises(TypeError):
            copied.candidate_tool_calls[0]["name"] = "x"  # type: ignore[index]


def test_rerecording_a_key_returns_the_existing_id_and_changes_nothing(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    first = ledger.record(make_result(0.9), task="t", run_id="r1", case_id="c1")
    again = ledger.record(make_result(0.9), task="t", run_id="r1", case_id="c1")
    ids = ledger.record_many([make_result(0.9), make_result(0.9)], task="t", run_id="r1", case_id="c1")
    assert again == first and ids == [first, first]
    (row,) = ledger.results()
    assert row.quality_score == 0.9
    (totals,) = ledger.summary()
    assert totals.n == 1


@pytest.mark.parametrize(
    "change",
    [
        {"score": 0.1},
        {"candidate_text": "five"},
        {"baseline_text": "four"},
        {"prompt": "What is 2+3?"},
        {"baseline_model": "gpt-4.1"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_a_different_grade_under_a_stored_key_is_an_error_naming_both(
    ledger: QualityLedger, make_result: MakeResult, change: dict[str, Any]
) -> None:
    first = ledger.record(make_result(0.9), task="t", run_id="r1", case_id="c1")
    other = {"score": 0.9, **change}
    score = other.pop("score")
    with pytest.raises(GradeConflictError) as info:
        ledger.record_batch(
            [
                RecordItem(make_result(0.5), "t", run_id="r1", case_id="c2"),  # fine on its own
                RecordItem(make_result(score, **other), "t", run_id="r1", case_id="c1"),
            ]
        )
    message = str(info.value)
    assert f"grade #{first}" in message and "'r1'" in message and "'c1'" in message
    assert info.value.keys == (("r1", "c1", "exact", "gpt-4o-mini"),)
    assert [r.id for r in ledger.results()] == [first]  # nothing of the batch was written
    (totals,) = ledger.summary()
    assert totals.n == 1


def test_a_key_twice_in_one_batch_with_different_content_is_an_error(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    items = [RecordItem(make_result(s), "t", run_id="r", case_id="c") for s in (0.2, 0.3)]
    with pytest.raises(GradeConflictError, match="earlier grade of this batch"):
        ledger.record_batch(items)
    assert ledger.count() == 0


def test_key_includes_grader_and_candidate_model(ledger: QualityLedger, make_result: MakeResult) -> None:
    a = ledger.record(make_result(grader_id="exact"), task="t", run_id="r", case_id="c")
    b = ledger.record(make_result(grader_id="embedding"), task="t", run_id="r", case_id="c")
    c = ledger.record(make_result(candidate_model="other"), task="t", run_id="r", case_id="c")
    d = ledger.record(make_result(), task="t", run_id="r2", case_id="c")
    assert len({a, b, c, d}) == 4
    assert ledger.completed_keys("r") == {
        ("c", "exact", "gpt-4o-mini"),
        ("c", "embedding", "gpt-4o-mini"),
        ("c", "exact", "other"),
    }


def test_grades_without_run_and_case_are_never_deduplicated(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    ids = ledger.record_many([make_result(), make_result()], task="t")
    ids += [ledger.record(make_result(), task="t", run_id="r1")]
    assert len(set(ids)) == 3 and ledger.count() == 3


def test_record_batch_keeps_per_item_metadata_and_order(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    items = [
        RecordItem(make_result(0.5), "a", run_id="r", case_id="1", tags=("x",)),
        RecordItem(make_result(0.6), "b"),
        RecordItem(make_result(0.7), "a", run_id="r", case_id="2"),
        RecordItem(make_result(0.5), "a", run_id="r", case_id="1"),  # duplicate of the first
    ]
    ids = ledger.record_batch(items)
    assert ids[3] == ids[0] and len(set(ids)) == 3
    by_id = {row.id: row for row in ledger.results()}
    assert [by_id[i].quality_score for i in ids] == [0.5, 0.6, 0.7, 0.5]
    assert by_id[ids[0]].tags == ("x",) and by_id[ids[1]].task == "b"


# PostgreSQL sends batches of 50 rows or more through COPY and smaller ones through executemany:
# padding a batch with PAD more new grades runs the same checks down the COPY path.
PAD = 100


@pytest.mark.parametrize("pad", [0, PAD], ids=["small", "large"])
def test_a_batch_mixing_stored_keys_new_keys_and_keyless_rows(
    ledger: QualityLedger, make_result: MakeResult, pad: int
) -> None:
    stored = ledger.record_batch([RecordItem(make_result(0.1), "t", run_id="r", case_id=c) for c in "ab"])
    items = [
        RecordItem(make_result(0.2), "t", run_id="r", case_id="c"),  # new
        RecordItem(make_result(0.1), "t", run_id="r", case_id="a"),  # stored: the same grade again
        RecordItem(make_result(0.4), "t"),  # keyless: always new
        RecordItem(make_result(0.1), "t", run_id="r", case_id="b"),  # stored
        RecordItem(make_result(0.6), "t", run_id="r", case_id="d"),  # new
        RecordItem(make_result(0.2), "t", run_id="r", case_id="c"),  # the same grade twice in the batch
        *(RecordItem(make_result(0.9), "t", run_id="r", case_id=f"pad{i}") for i in range(pad)),
    ]
    ids = ledger.record_batch(items)
    assert ids[1] == stored[0] and ids[3] == stored[1] and ids[5] == ids[0]
    new = [ids[0], ids[2], ids[4], *ids[6:]]
    assert len(set(new)) == 3 + pad and min(new) > max(stored)
    by_id = {row.id: row.quality_score for row in ledger.results()}
    assert [by_id[i] for i in ids[:6]] == [0.2, 0.1, 0.4, 0.1, 0.6, 0.2]
    assert ledger.count() == 5 + pad
    (row,) = ledger.summary(task="t")
    assert row.n == 5 + pad  # the running totals count each stored grade once


def test_results_filters(ledger: QualityLedger, make_result: MakeResult) -> None:
    ledger.record(make_result(candidate_model="m1", grader_id="g1"), task="a", run_id="r1", case_id="1")
    ledger.record(make_result(candidate_model="m2", grader_id="g1"), task="a", run_id="r1", case_id="1")
    ledger.record(make_result(candidate_model="m1", grader_id="g2", baseline_model="b2"), task="b")
    assert len(list(ledger.results(task="a"))) == 2
    assert len(list(ledger.results(candidate_model="m1"))) == 2
    assert len(list(ledger.results(candidate_model=["m1", "m2"], grader_id="g1"))) == 2
    assert len(list(ledger.results(baseline_model="b2"))) == 1
    assert len(list(ledger.results(run_id="r1"))) == 2
    assert len(list(ledger.results(limit=1))) == 1
    now = datetime.now(UTC)
    assert len(list(ledger.results(since=now - timedelta(minutes=5)))) == 3
    assert list(ledger.results(since=now + timedelta(minutes=5))) == []
    assert list(ledger.results(until=now - timedelta(minutes=5))) == []


def test_summary_gives_grades_mean_and_std(ledger: QualityLedger, make_result: MakeResult) -> None:
    from scipy import stats

    scores = [0.5, 0.7, 0.9, 1.0, 0.8]
    ledger.record_many([make_result(s) for s in scores], task="t")
    ledger.record(make_result(0.4, candidate_model="solo"), task="t")
    rows = {r.candidate_model: r for r in ledger.summary(task="t")}
    row = rows["gpt-4o-mini"]
    mean = sum(scores) / len(scores)
    assert row.n == 5 and row.mean == pytest.approx(mean)
    assert row.std == pytest.approx(stats.tstd(scores))
    assert row.candidate_mean_cost_usd == pytest.approx(0.001)
    assert row.baseline_mean_latency_ms == pytest.approx(800.0)
    assert row.first_at <= row.last_at and row.first_at.tzinfo is not None
    solo = rows["solo"]
    assert solo.n == 1 and solo.std is None


def test_summary_of_constant_scores_has_zero_std(ledger: QualityLedger, make_result: MakeResult) -> None:
    ledger.record_many([make_result(0.95) for _ in range(40)], task="t")
    (row,) = ledger.summary()
    assert row.std == 0.0 and row.mean == pytest.approx(0.95)


def test_summary_counts_cases_and_gives_no_interval_over_grades(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    # 10 cases graded in 5 runs: 50 grades, 10 cases. Routing's bounds count cases; the summary
    # gives none of its own (an interval over the 50 grades would be about 4 times too narrow).
    def grade(run: int, case: int) -> RecordItem:
        return RecordItem(
            make_result(0.2 + 0.06 * case + 0.01 * run), "t", run_id=f"r{run}", case_id=f"c{case}"
        )

    ledger.record_batch([grade(r, c) for r in range(5) for c in range(10)])
    since = datetime(2000, 1, 1, tzinfo=UTC)
    for (row,) in (ledger.summary(), ledger.summary(task="t", since=since)):  # totals, grades
        assert (row.n, row.cases) == (50, 10) and row.mean == pytest.approx(0.2 + 0.06 * 4.5 + 0.01 * 2)
        assert {f.name for f in fields(row)}.isdisjoint({"ci_low", "ci_high", "confidence"})
    middle = datetime.now(UTC)
    ledger.record_batch([grade(5, c) for c in range(3)])  # a sixth run of three known cases
    ledger.record_many([make_result(0.5), make_result(0.5)], task="t")  # no case id: one case, its prompt
    for (row,) in (ledger.summary(task="t"), ledger.summary(until=datetime.now(UTC) + timedelta(days=1))):
        assert (row.n, row.cases) == (55, 11)
    (row,) = ledger.summary(since=middle)
    assert (row.n, row.cases) == (5, 4)
    assert ledger.summary(until=since) == []


def test_summary_with_unknown_costs_reports_none(ledger: QualityLedger, make_result: MakeResult) -> None:
    ledger.record_many([make_result(candidate_cost=None, baseline_cost=None)] * 3, task="t")
    (row,) = ledger.summary()
    assert row.candidate_mean_cost_usd is None and row.baseline_mean_cost_usd is None


def test_store_text_false_keeps_only_digests(ledger_url: str, make_result: MakeResult) -> None:
    with QualityLedger(ledger_url, store_text=False) as ledger:
        ledger.record(
            make_result(prompt="private prompt", baseline_text="secret a", candidate_text="secret b"),
            task="t",
        )
        (row,) = ledger.results()
        with ledger.engine.connect() as conn:
            dump = repr(conn.exec_driver_sql("SELECT * FROM grades").all())
    assert row.prompt is None and row.baseline_text is None and row.candidate_text is None
    import hashlib

    assert row.prompt_sha256 == hashlib.sha256(b"private prompt").hexdigest()
    assert row.candidate_text_sha256 == hashlib.sha256(b"secret b").hexdigest()
    assert "private prompt" not in dump and "secret a" not in dump and "secret b" not in dump
    assert row.quality_score == 1.0


def test_every_digest_matches_its_text_in_a_generated_batch(ledger_url: str, make_result: MakeResult) -> None:
    # Items made on the fly (a generator, each result dropped once converted) and texts shared
    # between items: each stored digest is still the SHA-256 of that grade's own texts.
    import hashlib

    def sha(text_: str) -> str:
        return hashlib.sha256(text_.encode()).hexdigest()

    shared = make_result(candidate_text="shared answer")
    items = (
        RecordItem(
            shared if i % 3 == 0 else make_result(prompt=f"q{i}", candidate_text=f"answer {i} " * (i % 7)),
            "t",
            run_id="r",
            case_id=str(i),
        )
        for i in range(200)
    )
    with QualityLedger(ledger_url, store_text=False) as ledger:
        ids = ledger.record_batch(items)  # type: ignore[arg-type]
        rows = {row.id: row for row in ledger.results()}
    assert len(ids) == len(rows) == 200
    for i, row_id in enumerate(ids):
        row = rows[row_id]
        prompt, answer = (
            ("What is 2+2?", "shared answer") if i % 3 == 0 else (f"q{i}", f"answer {i} " * (i % 7))
        )
        assert (row.prompt_sha256, row.candidate_text_sha256) == (sha(prompt), sha(answer)), i
        assert row.baseline_text_sha256 == sha("4")


def test_export_jsonl_and_csv(ledger: QualityLedger, make_result: MakeResult, tmp_path: Path) -> None:
    ledger.record_many([make_result(0.5), make_result(1.0)], task="t", tags=["a"])
    ledger.record(make_result(0.1), task="other")
    assert ledger.export(tmp_path / "g.jsonl", task="t") == 2
    lines = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert [d["quality_score"] for d in lines] == [0.5, 1.0] and lines[0]["tags"] == ["a"]
    assert lines[0]["candidate_model"] == "gpt-4o-mini" and lines[0]["created_at"].endswith("+00:00")
    assert ledger.export(tmp_path / "g.csv", format="csv") == 3
    with open(tmp_path / "g.csv", newline="") as fh:
        records = list(csv.DictReader(fh))
    assert len(records) == 3 and json.loads(records[0]["details"])["judge_spec"]["name"] == "exact"
    with pytest.raises(ValueError, match="format"):
        ledger.export(tmp_path / "g.xml", format="xml")


def test_url_precedence_and_masking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    with QualityLedger() as default:
        assert default.url == "sqlite:///llm_connect.db"
    assert (tmp_path / "llm_connect.db").exists()
    monkeypatch.setenv(ENV_VAR, f"sqlite:///{tmp_path / 'env.db'}")
    with QualityLedger() as from_env:
        assert from_env.url.endswith("env.db")
    with QualityLedger(f"sqlite:///{tmp_path / 'arg.db'}") as from_arg:
        assert from_arg.url.endswith("arg.db")
    assert os.path.exists(tmp_path / "arg.db")


def test_password_is_masked_in_url_and_errors() -> None:
    from llm_connect.errors import LedgerError

    with pytest.raises(LedgerError) as info:
        QualityLedger("postgresql+psycopg://user:hunter2@127.0.0.1:1/nowhere")
    assert "hunter2" not in str(info.value) and "***" in str(info.value)


def test_unsupported_backend_is_a_ledger_error() -> None:
    from llm_connect.errors import LedgerError

    with pytest.raises(LedgerError, match="unsupported database"):
        QualityLedger("mysql://u@localhost/db")


def test_usage_round_trips_zero_tokens(ledger: QualityLedger, make_result: MakeResult) -> None:
    base = make_result()
    cand = LLMResponse("x", "m", "openai", usage=Usage(0, 0))
    result = GradingResult(0.5, "", "g", base.baseline_response, cand, prompt="p")
    ledger.record(result, task="t")
    (row,) = ledger.results()
    assert row.candidate_response.usage == Usage(0, 0)


def _totals(ledger: QualityLedger) -> list[tuple]:
    with ledger.engine.connect() as conn:
        return [tuple(r) for r in conn.exec_driver_sql("SELECT * FROM grade_stats ORDER BY 1, 2, 3, 4").all()]


def test_running_totals_match_the_grades(ledger: QualityLedger, make_result: MakeResult) -> None:
    ledger.record_many([make_result(0.5)], task="a", run_id="r", case_id="1")
    ledger.record_many([make_result(0.9, candidate_cost=None)], task="a", run_id="r", case_id="2")
    ledger.record_batch(
        [
            RecordItem(make_result(s / 10, candidate_model=m, grader_id=g), "b", run_id="r", case_id=str(s))
            for s in range(10)
            for m in ("m1", "m2")
            for g in ("exact", "embedding")
        ]
    )
    ledger.record(make_result(0.1), task="b", run_id="r", case_id="3", tags=None)  # a new key
    ledger.record(make_result(0.3, candidate_model="m1"), task="b", run_id="r", case_id="3")  # the same again
    incremental = _totals(ledger)
    ledger.rebuild_stats()
    rebuilt = _totals(ledger)
    # The sums are added by the database in its own order: equal up to rounding.
    assert [r[:5] for r in incremental] == [r[:5] for r in rebuilt]
    assert [pytest.approx(r[5:15]) for r in incremental] == [r[5:15] for r in rebuilt]
    from_totals = ledger.summary()
    from_grades = ledger.summary(since=datetime(2000, 1, 1, tzinfo=UTC))
    assert [(r.task, r.candidate_model, r.grader_id, r.n) for r in from_totals] == [
        (r.task, r.candidate_model, r.grader_id, r.n) for r in from_grades
    ]
    for a, b in zip(from_totals, from_grades, strict=True):
        assert a.mean == pytest.approx(b.mean) and a.first_at == b.first_at and a.last_at == b.last_at
        assert a.candidate_mean_cost_usd == pytest.approx(b.candidate_mean_cost_usd)
        assert a.baseline_mean_latency_ms == pytest.approx(b.baseline_mean_latency_ms)


def test_details_are_stored_as_validated(ledger: QualityLedger, make_result: MakeResult) -> None:
    # Nested values changed after construction (here to NaN, which strict JSON rejects) do not
    # reach the ledger: it stores the encoding GradingResult validated.
    result = make_result(0.5, details={"judge_spec": {"name": "exact", "args": {}}, "scores": [0.5]})
    result.details["scores"][0] = float("nan")
    ledger.record(result, task="support")
    (row,) = ledger.results()
    assert row.details["scores"] == [0.5]


@pytest.mark.parametrize("pad", [0, PAD], ids=["small", "large"])
def test_awkward_text_round_trips(ledger: QualityLedger, make_result: MakeResult, pad: int) -> None:
    # Tabs, newlines, backslashes and COPY's own markers (\N, \.) pass through PostgreSQL's COPY intact.
    weird = "tab\there\nnewline \\N backslash\\ \\. é 😀 \r cr"
    result = make_result(
        0.5,
        prompt=weird,
        notes=weird,
        candidate_text=weird,
        details={"judge_spec": {"name": "exact", "args": {}}, "s": weird},
    )
    filler = [RecordItem(make_result(), "t") for _ in range(pad)]
    ledger.record_batch([RecordItem(result, "t", tags=("a\tb", "\\N")), *filler])
    row = next(ledger.results())
    assert (row.prompt, row.notes, row.candidate_text, row.details["s"]) == (weird,) * 4
    assert row.tags == ("a\tb", "\\N")
    assert row.to_result() == result


def test_case_metadata_is_stored_queryable_in_sql_and_exported(
    ledger: QualityLedger, make_result: MakeResult, tmp_path: Path
) -> None:
    meta = {"team": "billing", "priority": 2, "labels": ["vip"]}
    ledger.record_batch(
        [
            RecordItem(make_result(0.9), "t", run_id="r", case_id="a", metadata=meta),
            RecordItem(make_result(0.5), "t", run_id="r", case_id="b", metadata={"team": "search"}),
            RecordItem(make_result(0.7), "t", run_id="r", case_id="c"),
        ]
    )
    rows = {r.case_id: r for r in ledger.results()}
    assert dict(rows["a"].metadata or {}) == meta and rows["c"].metadata is None
    team = "json_extract(metadata, '$.team')" if ledger.dialect == "sqlite" else "metadata->>'team'"
    with ledger.engine.connect() as conn:
        found = conn.execute(text(f"SELECT case_id FROM grades WHERE {team} = 'billing'")).scalars().all()
    assert found == ["a"]
    out = tmp_path / "grades.jsonl"
    ledger.export(out)
    exported = {r["case_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert exported["a"]["metadata"] == meta and exported["c"]["metadata"] is None


def test_metadata_that_is_not_a_json_object_is_refused_naming_the_item(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    with pytest.raises(GradingValidationError, match="item 1: metadata"):
        ledger.record_batch(
            [
                RecordItem(make_result(), "t", run_id="r", case_id="a"),
                RecordItem(make_result(), "t", run_id="r", case_id="b", metadata=["not", "an", "object"]),  # type: ignore[arg-type]
            ]
        )
    with pytest.raises(GradingValidationError, match="NaN"):
        ledger.record_batch([RecordItem(make_result(), "t", metadata={"x": float("nan")})])
    assert ledger.count() == 0


def test_record_outcomes_writes_grades_cache_skips_and_failures_together_or_not_at_all(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    from llm_connect.values import NotApplicable

    stored = ledger.record(make_result(0.9), task="t", run_id="r", case_id="x")
    skip = NotApplicable("s", "t", "schema", "openai:m", "expected.schema", "no schema", candidate_model="m")
    failure = {
        "case_id": "f",
        "task": "t",
        "stage": "candidate",
        "error_type": "ServerError",
        "message": "500",
    }
    response = make_result().candidate_response
    # One refused grade (a different grade under the stored key x) and nothing is written.
    with pytest.raises(GradeConflictError):
        ledger.record_outcomes(
            "r",
            records=[
                RecordItem(make_result(0.4), "t", run_id="r", case_id="y"),
                RecordItem(make_result(0.1), "t", run_id="r", case_id="x"),
            ],
            cache=[("k1", "openai:m", response)],
            not_applicable=[skip],
            failures=[failure],
        )
    assert [r.id for r in ledger.results()] == [stored]
    assert ledger.cache_get("k1") is None and ledger.failures() == [] and ledger.not_applicable("r") == []
    ids = ledger.record_outcomes(
        "r",
        records=[RecordItem(make_result(0.4), "t", run_id="r", case_id="y")],
        cache=[("k1", "openai:m", response)],
        not_applicable=[skip],
        failures=[failure],
    )
    assert len(ids) == 1 and ledger.count() == 2
    assert ledger.cache_get("k1") == response
    assert [f.case_id for f in ledger.failures("r")] == ["f"]
    assert [na.case_id for na in ledger.not_applicable("r")] == ["s"]
