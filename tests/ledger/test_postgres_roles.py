"""PostgreSQL deployments with a restricted role: the ledger still records (and dedupes) grades."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import create_engine, make_url, text

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger, RecordItem

MakeResult = Callable[..., GradingResult]

pytestmark = pytest.mark.postgres


@pytest.fixture
def role_without_temp(postgres_url: str) -> Iterator[str]:
    """The URL of a login role that may use the ledger's schema but not create temporary tables.

    TEMPORARY is granted to PUBLIC by default; hardened servers revoke it. The grant is
    restored afterwards (superusers, like the other tests' role, are never affected).
    """
    url = make_url(postgres_url)
    schema = url.query["options"].split("=", 1)[1]
    role = f"llmc_notemp_{uuid.uuid4().hex[:8]}"
    QualityLedger(postgres_url).close()  # migrated by the owner
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    database = url.database
    with admin.connect() as conn:
        conn.execute(text(f'CREATE ROLE "{role}" LOGIN'))
        conn.execute(text(f'REVOKE TEMPORARY ON DATABASE "{database}" FROM PUBLIC'))
        conn.execute(text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
        conn.execute(text(f'GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
        conn.execute(text(f'GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}"'))
    try:
        yield url.set(username=role).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'GRANT TEMPORARY ON DATABASE "{database}" TO PUBLIC'))
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    f"WHERE usename = '{role}' AND pid <> pg_backend_pid()"
                )
            )
            conn.execute(text(f'DROP OWNED BY "{role}"'))
            conn.execute(text(f'DROP ROLE "{role}"'))
        admin.dispose()


def test_a_role_that_may_not_create_temporary_tables_still_records(
    role_without_temp: str, make_result: MakeResult
) -> None:
    with QualityLedger(role_without_temp) as ledger:
        with ledger.engine.connect() as conn:
            may_temp = conn.execute(
                text("SELECT has_database_privilege(current_database(), 'TEMPORARY')")
            ).scalar_one()
        assert may_temp is False  # the fixture works: COPY staging is not available to this role
        first = ledger.record_batch([RecordItem(make_result(0.1), "t", run_id="r", case_id=c) for c in "ab"])
        pad = [RecordItem(make_result(0.9), "t", run_id="r", case_id=f"p{i}") for i in range(100)]
        ids = ledger.record_batch(  # large enough for the COPY path, were the role allowed it
            [
                RecordItem(make_result(0.1), "t", run_id="r", case_id="a"),  # the stored grade again: a no-op
                RecordItem(make_result(0.3), "t"),  # keyless: new
                RecordItem(make_result(0.4), "t", run_id="r", case_id="c"),  # new
                *pad,
            ]
        )
        assert ids[0] == first[0] and len(set(ids) | set(first)) == 104
        scores = {row.id: row.quality_score for row in ledger.results()}
        assert [scores[i] for i in ids[:3]] == [0.1, 0.3, 0.4]
        (row,) = ledger.summary(task="t")
        assert row.n == 104
