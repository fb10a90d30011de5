"""A ledger written by the previous release (schema ``0003_run_skips``) upgrades and keeps every row.

The fixtures were written by llm-connect at schema 0003 (the release before
requested/served model names): ``ledger-0003.db.gz`` is the SQLite file itself,
``ledger-0003.json.gz`` the same rows table by table, loaded into a database
migrated to 0003 (so PostgreSQL is tested with the same data). It holds 57
grades (recorded suite: vrty, exact and schema judges; one live-style grade whose
server reported dated names), 28 not-applicable pairs, a failure, a cache entry,
a calibration and two routing decisions.
"""

from __future__ import annotations

import gzip
import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import DateTime, MetaData, create_engine, text

from llm_connect.ledger import QualityLedger, current_revision, head_revision, upgrade
from llm_connect.ledger._migrate import alembic_config
from llm_connect.routing import Router

FIXTURES = Path(__file__).parent / "fixtures"
OLD_TABLES = (
    "runs",
    "grades",
    "grade_stats",
    "response_cache",
    "run_failures",
    "run_skips",
    "calibrations",
    "routing_decisions",
)


def _old_rows() -> dict[str, Any]:
    with gzip.open(FIXTURES / "ledger-0003.json.gz", "rt", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def _load_into_0003(url: str) -> None:
    """Migrate ``url`` to 0003 and insert the fixture's rows as they were stored."""
    data = _old_rows()
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0003_run_skips")
        meta = MetaData()
        meta.reflect(engine, only=list(OLD_TABLES))
        with engine.begin() as conn:
            for name in OLD_TABLES:
                table = meta.tables[name]
                cols = data[name]["columns"]
                rows = []
                for raw in data[name]["rows"]:
                    row = dict(zip(cols, raw, strict=True))
                    for col in table.columns:
                        value = row.get(col.name)
                        if isinstance(col.type, DateTime) and isinstance(value, str):
                            row[col.name] = datetime.fromisoformat(value)
                        elif isinstance(value, str) and col.type.__class__.__name__ in ("JSON", "JSONB"):
                            row[col.name] = json.loads(value)
                        elif col.type.__class__.__name__ == "BOOLEAN" and value is not None:
                            row[col.name] = bool(value)
                    rows.append(row)
                if rows:
                    conn.execute(table.insert(), rows)
            if conn.dialect.name == "postgresql":
                for name in ("grades", "run_failures", "run_skips", "calibrations", "routing_decisions"):
                    conn.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
                            f"(SELECT COALESCE(MAX(id), 1) FROM {name}))"
                        )
                    )
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite-file", "sqlite-rows", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite-file":
        path = tmp_path / "old.db"
        with gzip.open(FIXTURES / "ledger-0003.db.gz", "rb") as src, path.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        return f"sqlite:///{path}"
    url = (
        f"sqlite:///{tmp_path / 'rows.db'}"
        if request.param == "sqlite-rows"
        else request.getfixturevalue("postgres_url")
    )
    _load_into_0003(url)
    return url


def _grades(url: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [
                tuple(r)
                for r in conn.execute(
                    text(
                        "SELECT id, run_id, case_id, grader_id, baseline_model, candidate_model, "
                        "quality_score, candidate_text_sha256, notes FROM grades ORDER BY id"
                    )
                )
            ]
    finally:
        engine.dispose()


def test_a_ledger_of_the_previous_schema_upgrades_and_keeps_every_row(old_ledger: str) -> None:
    data = _old_rows()
    assert current_revision(old_ledger) == "0003_run_skips"
    before = _grades(old_ledger)
    assert len(before) == len(data["grades"]["rows"]) == 57

    assert upgrade(old_ledger) == head_revision()
    assert _grades(old_ledger) == before  # same ids, keys, names, scores, texts

    with QualityLedger(old_ledger) as ledger:
        rows = list(ledger.results())
        assert len(rows) == 57
        for row in rows:  # the served name is the one the old release stored
            assert row.candidate_served_model == row.candidate_model
            assert row.baseline_served_model == row.baseline_model
            assert row.asks_llm is False and row.metadata is None
        live = [r for r in rows if r.run_id == "run-live-0003"]
        assert [r.candidate_model for r in live] == ["gpt-4o-mini-2024-07-18"]
        for name in ("run_failures", "run_skips", "response_cache", "calibrations", "routing_decisions"):
            with ledger.engine.connect() as conn:
                count = conn.execute(text(f"SELECT COUNT(*) FROM {name}")).scalar_one()
            assert count == len(data[name]["rows"]), name
        assert len(ledger.not_applicable("run-fixture-0003")) == 28
        assert ledger.latest_calibration("llm:openai:gpt-4o-mini:rubric-v1").passed  # type: ignore[union-attr]
        assert len(ledger.completed_keys("run-fixture-0003")) == 14 * 2 * 3

        # The evidence the old release decided on is all there after the upgrade (case_stats is
        # filled from the grades: one run, so as many cases as the old grade counts); the rule is
        # the new one (anytime-valid bounds), which does not route on 14 cases where the old
        # t-interval did.
        old = ledger.decisions(task="support")[-1]
        new = Router(ledger).decide(
            "support",
            baseline=old.baseline,
            candidates=[c.model for c in old.candidates],
            grader_id=old.grader_ids,
            min_quality=old.min_quality,
            confidence=old.confidence,
            min_samples=old.min_samples,
        )
        assert old.model == "gpt-4o-mini" and new.model == old.baseline
        assert [(c.model, c.n) for c in new.candidates] == [(c.model, c.n) for c in old.candidates]
        assert all(g.n_grades == g.n for c in new.candidates for g in c.graders)
        (totals,) = [
            s
            for s in ledger.summary(task="support", grader_id="vrty:1.0.1")
            if s.candidate_model == "gpt-4o-mini"
        ]
        assert totals.n == 14


def test_old_llm_grades_keep_the_calibration_gate_after_the_upgrade(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rows.db'}"
    _load_into_0003(url)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:  # an LLM judge's grade as the old release stored it
            conn.execute(
                text(
                    "UPDATE grades SET grader_id = 'llm:openai:judge:rubric-v1' "
                    "WHERE grader_id = 'exact' AND run_id = 'run-live-0003'"
                )
            )
            conn.execute(text("DELETE FROM grade_stats"))
    finally:
        engine.dispose()
    upgrade(url)
    with QualityLedger(url) as ledger:
        ledger.rebuild_stats()
        (row,) = [r for r in ledger.results() if r.run_id == "run-live-0003"]
        assert row.asks_llm is True
