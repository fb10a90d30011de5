"""All-or-nothing batches, the score CHECK constraint, and secrets never reaching the ledger."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from llm_connect.errors import GradingValidationError, LedgerError
from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.types import RunConfig

MakeResult = Callable[..., GradingResult]


def _dump(ledger: QualityLedger) -> str:
    """Every row of every table, as text."""
    with ledger.engine.connect() as conn:
        names = [*sorted(inspect(conn).get_table_names()), "quality_summary"]
        return "\n".join(f"{name}: {conn.execute(text(f'SELECT * FROM {name}')).all()!r}" for name in names)


def _bad_score(make_result: MakeResult) -> GradingResult:
    result = make_result(0.5)
    object.__setattr__(result, "quality_score", 1.5)  # what a buggy caller could smuggle in
    return result


def test_an_invalid_item_rejects_the_whole_batch(ledger: QualityLedger, make_result: MakeResult) -> None:
    ledger.record(make_result(), task="t", run_id="r", case_id="0")
    before = _dump(ledger)
    with pytest.raises(GradingValidationError, match="item 2"):
        ledger.record_many([make_result(), make_result(), {"quality_score": 1.0}], task="t")  # type: ignore[list-item]
    with pytest.raises(GradingValidationError, match="task"):
        ledger.record_batch([RecordItem(make_result(), "")])
    assert _dump(ledger) == before


@pytest.mark.parametrize("size", [5, 120], ids=["small", "large"])  # PostgreSQL: executemany / COPY
def test_a_constraint_violation_rolls_back_the_whole_batch(
    ledger: QualityLedger, make_result: MakeResult, size: int
) -> None:
    ledger.record(make_result(), task="t")
    before = _dump(ledger)
    items = [RecordItem(make_result(), "t", run_id="r", case_id=str(i)) for i in range(size)]
    items.append(RecordItem(_bad_score(make_result), "t", run_id="r", case_id="bad"))
    with pytest.raises(LedgerError, match="recording grades failed"):
        ledger.record_batch(items)
    assert _dump(ledger) == before
    assert len(ledger.record_batch(items[:size])) == size  # the good items alone go in afterwards
    assert ledger.count() == 1 + size


def test_check_constraint_enforces_the_score_range_in_sql(ledger: QualityLedger) -> None:
    with pytest.raises(IntegrityError), ledger.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO grades (created_at, task, tags, prompt_sha256, baseline_adapter_id, "
                "baseline_provider, baseline_model, baseline_text_sha256, candidate_adapter_id, "
                "candidate_provider, candidate_model, candidate_text_sha256, grader_id, quality_score, "
                "notes, details, llm_connect_version) VALUES (CURRENT_TIMESTAMP, 't', '[]', 'x', 'a', 'p', "
                "'m', 'x', 'a', 'p', 'm', 'x', 'g', 1.01, '', '{}', '0')"
            )
        )
    assert ledger.count() == 0


@pytest.mark.postgres
def test_a_dropped_connection_mid_batch_leaves_nothing(postgres_url: str, make_result: MakeResult) -> None:
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    # patience 0: the write is not run again (with patience it would be, and land whole, once)
    with QualityLedger(postgres_url, patience_s=0) as ledger:
        ledger.record(make_result(), task="t")
        with admin.connect() as conn:  # a trigger that stalls on one row, half-way through the batch
            conn.execute(text(STALL_FUNCTION))
            conn.execute(
                text("CREATE TRIGGER stall BEFORE INSERT ON grades FOR EACH ROW EXECUTE FUNCTION stall()")
            )
        killed: list[int] = []

        def kill_when_stalled() -> None:
            deadline = time.monotonic() + 30
            with admin.connect() as conn:
                while time.monotonic() < deadline and not killed:
                    pids = (
                        conn.execute(
                            text(
                                "SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND pid <> pg_backend_pid()"
                            )
                        )
                        .scalars()
                        .all()
                    )
                    for pid in pids:
                        conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
                        killed.append(pid)
                    time.sleep(0.05)

        killer = threading.Thread(target=kill_when_stalled)
        killer.start()
        items = [RecordItem(make_result(i / 1000), "t", run_id="r", case_id=str(i)) for i in range(800)]
        items[400] = RecordItem(make_result(), "t", run_id="r", case_id="stall")
        try:
            with pytest.raises(LedgerError, match="recording grades failed"):
                ledger.record_batch(items)
        finally:
            killer.join()
        assert killed
        with admin.connect() as conn:
            conn.execute(text("DROP TRIGGER stall ON grades"))
        assert ledger.count() == 1
        assert len(ledger.record_batch(items)) == 800  # the ledger recovers with a new connection
        assert ledger.count() == 801
    admin.dispose()


STALL_FUNCTION = """
CREATE FUNCTION stall() RETURNS trigger AS $$
BEGIN
    IF NEW.case_id = 'stall' THEN PERFORM pg_sleep(60); END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql
"""


SECRET = "sk-test-THISMUSTNEVERBESTORED0123456789"
BEARER = "Bearer tok_ALSONEVERSTORED987654321"


def test_secrets_never_reach_the_ledger(ledger: QualityLedger, make_result: MakeResult) -> None:
    config = RunConfig(
        temperature=0.0,
        model_params={
            "api_key": SECRET,
            "Authorization": BEARER,
            "extra_headers": {"X-Api-Key": SECRET},
            "seed": 3,
        },
    )
    result = make_result(
        run_config=config,
        details={
            "judge_spec": {"name": "llm", "args": {"api_key": SECRET}},
            "request": {"authorization": BEARER},
        },
        notes=f"judge failed once with key {SECRET}",
    )
    ledger.record(result, task="t", run_id="r", case_id="c")
    ledger.start_run(
        "r",
        suite="s.jsonl",
        config={"api_key": SECRET, "judges": ["exact"], "headers": {"Authorization": BEARER}},
    )
    ledger.record_failure(
        run_id="r",
        case_id="c2",
        task="t",
        stage="candidate",
        error_type="AuthenticationError",
        message=f"Incorrect API key provided: {SECRET}; header {BEARER}",
    )
    dump = _dump(ledger)
    assert "THISMUSTNEVERBESTORED" not in dump
    assert "ALSONEVERSTORED" not in dump
    (row,) = ledger.results()
    assert row.run_config is not None
    # redact_secrets removes header-style secret names (X-Api-Key) before the ledger sees them
    assert dict(row.run_config["model_params"]) == {"seed": 3, "extra_headers": {}}
    assert ledger.run("r").config == {"judges": ["exact"], "headers": {}}  # type: ignore[union-attr]
