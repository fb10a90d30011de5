"""Schema management: fresh databases migrate, models match migrations, unknown revisions are refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text

from llm_connect.errors import LedgerError, SchemaVersionError
from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger, current_revision, head_revision, upgrade
from llm_connect.ledger._migrate import alembic_config
from llm_connect.ledger._models import QUALITY_SUMMARY_VIEW_SQL, Base

TABLES = {
    "alembic_version",
    "calibrations",
    "grade_stats",
    "case_stats",
    "conversations",
    "embedding_cache",
    "stability_responses",
    "stability_runs",
    "fleet_workers",
    "grades",
    "human_labels",
    "judge_anchor_cases",
    "judge_anchors",
    "judge_checks",
    "label_sampling",
    "rate_buckets",
    "response_cache",
    "routing_decisions",
    "run_failures",
    "run_cases",
    "run_skips",
    "run_suites",
    "runs",
    "watch_offsets",
}


def _snapshot(url: str) -> tuple[set[str], list[tuple[str, ...]]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            names = set(inspect(conn).get_table_names())
            version = (
                [tuple(r) for r in conn.execute(text("SELECT version_num FROM alembic_version"))]
                if "alembic_version" in names
                else []
            )
        return names, version
    finally:
        engine.dispose()


def test_fresh_database_is_migrated_to_head_with_every_table_and_the_view(ledger_url: str) -> None:
    assert current_revision(ledger_url) is None
    with QualityLedger(ledger_url) as ledger:
        assert ledger.revision == head_revision()
        with ledger.engine.connect() as conn:
            insp = inspect(conn)
            assert set(insp.get_table_names()) == TABLES
            assert "quality_summary" in insp.get_view_names()
            grade_columns = {c["name"] for c in insp.get_columns("grades")}
    assert grade_columns == set(Base.metadata.tables["grades"].columns.keys())
    assert current_revision(ledger_url) == head_revision()


def test_models_and_migrations_agree(ledger_url: str) -> None:
    upgrade(ledger_url)
    with QualityLedger(ledger_url) as ledger, ledger.engine.connect() as conn:
        command.check(alembic_config(conn))  # Alembic's autogenerate diff: raises on drift


def test_view_sql_in_migration_matches_models() -> None:
    from llm_connect.ledger._migrate import migrations_dir

    source = (migrations_dir() / "versions" / "0001_initial.py").read_text()
    assert QUALITY_SUMMARY_VIEW_SQL in source


def test_upgrade_is_idempotent_and_reversible(ledger_url: str) -> None:
    assert upgrade(ledger_url) == head_revision()
    assert upgrade(ledger_url) == head_revision()
    engine = create_engine(ledger_url)
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "base")
        assert _snapshot(ledger_url)[0] == {"alembic_version"}
    finally:
        engine.dispose()
    assert upgrade(ledger_url) == head_revision()
    assert _snapshot(ledger_url)[0] == TABLES


def test_head_is_alembics_head_and_an_opened_ledger_is_at_it(ledger_url: str) -> None:
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head_revision() == head
    with QualityLedger(ledger_url) as ledger, ledger.engine.connect() as conn:
        assert ledger.revision == head
        assert MigrationContext.configure(conn).get_current_heads() == (head,)


def test_unknown_newer_revision_is_refused_and_nothing_changes(
    ledger_url: str, make_result: Callable[..., GradingResult]
) -> None:
    with QualityLedger(ledger_url) as ledger:
        ledger.record(make_result(), task="t")
        with ledger.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    before = _snapshot(ledger_url)
    with pytest.raises(SchemaVersionError, match="9999_from_the_future") as info:
        QualityLedger(ledger_url)
    assert "newer llm-connect" in str(info.value)
    with pytest.raises(SchemaVersionError):
        upgrade(ledger_url)
    assert _snapshot(ledger_url) == before
    assert isinstance(info.value, LedgerError)


def test_auto_migrate_false_on_a_fresh_database_says_how_to_migrate(ledger_url: str) -> None:
    with pytest.raises(LedgerError, match="llm-connect db upgrade"):
        QualityLedger(ledger_url, auto_migrate=False)
    assert _snapshot(ledger_url)[0] == set()
    upgrade(ledger_url)
    with QualityLedger(ledger_url, auto_migrate=False) as ledger:
        assert ledger.revision == head_revision()


def test_foreign_grades_table_is_not_taken_over(ledger_url: str) -> None:
    engine = create_engine(ledger_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE grades (id INTEGER PRIMARY KEY, something TEXT)"))
    finally:
        engine.dispose()
    with pytest.raises(SchemaVersionError, match="not created by llm-connect"):
        QualityLedger(ledger_url)
    assert _snapshot(ledger_url)[0] == {"grades"}


def test_postgres_url_without_driver_uses_psycopg(postgres_url: str) -> None:
    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with QualityLedger(plain) as ledger:
        assert ledger.engine.dialect.driver == "psycopg"


def test_upgrading_from_the_first_revision_backfills_the_running_totals(
    ledger_url: str, make_result: Callable[..., GradingResult]
) -> None:
    with QualityLedger(ledger_url) as ledger:
        ledger.record_many([make_result(0.5), make_result(1.0, candidate_model="m2")], task="t")
        expected = ledger.summary()
        with ledger.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0001_initial")
    assert current_revision(ledger_url) == "0001_initial"
    with QualityLedger(ledger_url) as ledger:  # auto-migrates 0001 -> head
        assert ledger.revision == head_revision()
        assert ledger.summary() == expected
