"""Response cache, runs, failures and calibrations (both backends)."""

from __future__ import annotations

import pytest

from llm_connect.errors import LedgerError
from llm_connect.ledger import CalibrationRow, FailureRow, QualityLedger
from llm_connect.types import LLMResponse, RunConfig, ToolCall, Usage

RESPONSE = LLMResponse(
    text="Paris.",
    model="gpt-4o-mini-2024-07-18",
    provider="openai",
    latency_ms=123.0,
    usage=Usage(20, 2),
    cost_usd=0.00001,
    tool_calls=(ToolCall("f", "{}"),),
    finish_reason="stop",
)


def test_cache_key_depends_on_adapter_prompt_system_prompt_and_config() -> None:
    config = RunConfig(temperature=0.0, max_tokens=10)
    key = QualityLedger.cache_key("openai:gpt-4o-mini", "Capital of France?", config)
    assert len(key) == 64 and key == QualityLedger.cache_key(
        "openai:gpt-4o-mini", "Capital of France?", config
    )
    assert key != QualityLedger.cache_key("openai:gpt-4o", "Capital of France?", config)
    assert key != QualityLedger.cache_key("openai:gpt-4o-mini", "Capital of Spain?", config)
    assert key != QualityLedger.cache_key(
        "openai:gpt-4o-mini", "Capital of France?", config.replace(system_prompt="Be terse.")
    )
    assert key != QualityLedger.cache_key(
        "openai:gpt-4o-mini", "Capital of France?", config.replace(temperature=0.5)
    )
    # secrets are not part of the config's identity
    assert key == QualityLedger.cache_key(
        "openai:gpt-4o-mini", "Capital of France?", config.replace(model_params={"api_key": "sk-x"})
    )


def test_cache_key_covers_the_endpoint_and_the_request_never_secrets() -> None:
    config = RunConfig(temperature=0.0, max_tokens=10)

    def key(config: RunConfig = config, endpoint: str | None = "http://127.0.0.1:8080/v1") -> str:
        return QualityLedger.cache_key("openai:llama3", "hi", config, endpoint=endpoint)

    base = key()
    assert base != key(endpoint="https://api.example.com/v1")  # same model name, other server
    assert base != key(endpoint=None)
    assert base != key(config.replace(max_tokens=11))
    assert base != key(config.replace(model_params={"seed": 7}))
    assert base != key(config.replace(model_params={"extra_headers": {"X-Deployment": "eu"}}))
    # The timeout does not change the answer; keys and secret headers never reach the key.
    assert base == key(config.replace(timeout_s=5.0))
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
    assert base == key(config.replace(model_params={"api_key": secret}))
    assert base == key(config.replace(model_params={"extra_headers": {"Authorization": f"Bearer {secret}"}}))
    assert base == key(
        config.replace(model_params={"extra_headers": {"Ocp-Apim-Subscription-Key": "k" * 32}})
    )


def test_cache_put_get_and_duplicates(ledger: QualityLedger) -> None:
    key = QualityLedger.cache_key("openai:gpt-4o-mini", "q", RunConfig())
    assert ledger.cache_get(key) is None
    ledger.cache_put(key, "openai:gpt-4o-mini", RESPONSE)
    ledger.cache_put(key, "openai:gpt-4o-mini", LLMResponse("other", "m", "openai"))  # ignored
    assert ledger.cache_get(key) == RESPONSE
    keys = [f"{i:064x}" for i in range(1200)]
    for k in keys[:3]:
        ledger.cache_put(k, "a", RESPONSE)
    found = ledger.cache_get_many([*keys, key])
    assert set(found) == {*keys[:3], key}


def test_cache_put_many_keeps_first_entry_and_existing_ones(ledger: QualityLedger) -> None:
    other = LLMResponse("other", "m", "openai")
    ledger.cache_put("k-old", "a", RESPONSE)
    keys = [f"{i:064x}" for i in range(1200)]  # more rows than one INSERT chunk
    entries = [(k, "a", RESPONSE) for k in keys]
    entries += [("k-old", "a", other), ("k-dup", "b", RESPONSE), ("k-dup", "b", other)]
    ledger.cache_put_many(entries)
    ledger.cache_put_many([])  # nothing to do
    found = ledger.cache_get_many([*keys, "k-old", "k-dup"])
    assert len(found) == 1202 and all(r == RESPONSE for r in found.values())
    ledger.cache_put_many([(keys[0], "a", other)])  # an existing entry is kept
    assert ledger.cache_get(keys[0]) == RESPONSE


def test_runs_are_idempotent_and_finish_with_a_status(ledger: QualityLedger) -> None:
    ledger.start_run("r1", suite="examples/support.jsonl", config={"judges": ["exact"], "concurrency": 8})
    ledger.start_run("r1", suite="ignored.jsonl", config={"judges": ["other"]})
    run = ledger.run("r1")
    assert run is not None and run.status == "running" and run.suite == "examples/support.jsonl"
    assert run.config == {"judges": ["exact"], "concurrency": 8} and run.finished_at is None
    ledger.finish_run("r1", "completed")
    run = ledger.run("r1")
    assert run is not None and run.status == "completed" and run.finished_at is not None
    ledger.start_run("r1")  # resumed
    assert ledger.run("r1").status == "running"  # type: ignore[union-attr]
    assert ledger.run("nope") is None
    with pytest.raises(LedgerError, match="no run 'nope'"):
        ledger.finish_run("nope", "completed")


def test_failures_are_recorded_per_run(ledger: QualityLedger) -> None:
    ledger.start_run("r1")
    first = ledger.record_failure(
        run_id="r1",
        case_id="c1",
        task="t",
        stage="candidate",
        error_type="RateLimitError",
        message="429 after 5 retries",
        adapter_id="openai:gpt-4o-mini",
    )
    ledger.record_failure(
        run_id="r2", case_id="c9", task="t", stage="judge", error_type="JudgeOutputError", message="no grade"
    )  # run r2 is registered on the fly
    failures = ledger.failures("r1")
    assert [f.id for f in failures] == [first] and isinstance(failures[0], FailureRow)
    assert failures[0].adapter_id == "openai:gpt-4o-mini" and failures[0].stage == "candidate"
    assert len(ledger.failures()) == 2 and ledger.run("r2") is not None


def test_calibrations_latest_with_task_fallback(ledger: QualityLedger) -> None:
    judge = "llm:openai:gpt-4o-mini"
    assert ledger.latest_calibration(judge) is None
    a = ledger.record_calibration(
        judge_grader_id=judge,
        references=["embedding", "vrty"],
        task=None,
        figures={"embedding": {"spearman": 0.7, "kappa": None}},
        verdict="ok",
        passed=True,
    )
    row = ledger.latest_calibration(judge, task="support")
    assert isinstance(row, CalibrationRow) and row.id == a and row.task is None  # falls back to task-less
    assert row.references == ("embedding", "vrty") and row.figures["embedding"]["kappa"] is None
    assert row.passed is True and row.created_at.tzinfo is not None
    b = ledger.record_calibration(
        judge_grader_id=judge,
        references=["embedding"],
        task="support",
        figures={},
        verdict="bad",
        passed=False,
    )
    assert ledger.latest_calibration(judge, task="support").id == b  # type: ignore[union-attr]
    assert ledger.latest_calibration(judge).id == a  # type: ignore[union-attr]
    assert [c.id for c in ledger.calibrations(judge)] == [a, b]


def test_calibration_figures_never_hold_nan(ledger: QualityLedger) -> None:
    with pytest.raises(LedgerError, match="NaN"):
        ledger.record_calibration(
            judge_grader_id="llm:x",
            references=["exact"],
            task=None,
            figures={"pearson": float("nan")},
            verdict="?",
            passed=False,
        )
    assert ledger.calibrations() == []


def test_not_applicable_outcomes_count_as_done_for_resume(ledger: QualityLedger) -> None:
    from llm_connect.errors import GradingValidationError
    from llm_connect.grading import NotApplicable

    def na(case: str, model: str | None = "gpt-4o-mini", reason: str = "no JSON schema") -> NotApplicable:
        return NotApplicable(case, "t", "schema", "openai:gpt-4o-mini", "expected.schema", reason, 3, model)

    secret = "sk-THISMUSTNEVERBESTORED0123456789"
    assert ledger.record_not_applicable("r1", [na("c1"), na("c2", reason=f"key {secret}")]) == 2
    assert ledger.run("r1") is not None  # the run is registered on first sight
    assert ledger.record_not_applicable("r1", [na("c1", reason="again"), na("c3")]) == 1  # c1 kept
    stored = ledger.not_applicable("r1")
    assert [(s.case_id, s.reason) for s in stored][:1] == [("c1", "no JSON schema")]
    assert [s.case_id for s in stored] == ["c1", "c2", "c3"]
    assert secret not in stored[1].reason and stored[1].candidate_model == "gpt-4o-mini"
    assert stored[0].line is None  # the suite line is not stored
    assert ledger.completed_keys("r1") == {(c, "schema", "gpt-4o-mini") for c in ("c1", "c2", "c3")}
    assert ledger.not_applicable("other") == [] and ledger.completed_keys("other") == set()
    with pytest.raises(GradingValidationError, match="item 0"):
        ledger.record_not_applicable("r1", [na("c9", model=None)])
    assert len(ledger.not_applicable("r1")) == 3


def test_keyed_and_keyless_grades_mixed_in_one_batch(ledger: QualityLedger, make_result) -> None:
    from llm_connect.ledger import RecordItem

    # A NaN latency is no JSON: PostgreSQL's many-rows statement sends JSON, so those rows go one by one.
    odd = make_result(0.2, candidate_latency=float("nan"))
    items = [
        RecordItem(make_result(0.1), "t"),
        RecordItem(odd, "t", "r", "c1"),
        RecordItem(make_result(0.3), "t", "r", "c2"),
    ]
    first = ledger.record_batch([*items, RecordItem(make_result(0.4), "t")])
    again = ledger.record_batch(items[1:])
    assert len(set(first)) == 4 and again == first[1:3]
    assert [r.quality_score for r in ledger.results()] == [0.1, 0.2, 0.3, 0.4]
    assert ledger.grade_totals()[0].n == 4 and sum(s.n_grades for s in ledger.case_series()) == 4


def test_a_reader_that_stops_early_leaves_no_cursor_or_connection_open(
    ledger: QualityLedger, make_result
) -> None:
    """``next(iter(ledger.results()))`` closes the generator at once: its (on PostgreSQL server-side)
    cursor is closed there, not left to the garbage collector as a 'deleted while still open' or
    'unclosed' ResourceWarning in whatever code runs next."""
    import gc
    import warnings

    ledger.record_many([make_result(0.5, candidate_model="m") for _ in range(3)], task="qa")
    gc.collect()  # earlier tests' garbage is theirs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        first = next(iter(ledger.results(task="qa")))
        stopped = ledger.results(task="qa")
        assert next(stopped).id == first.id
        stopped.close()
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert ledger.count() == 3  # the connection went back to the pool in working order
