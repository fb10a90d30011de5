"""Alembic environment of the QualityLedger.

llm-connect runs migrations from code over an existing connection
(``config.attributes["connection"]``); the ``alembic`` command line works too
when ``sqlalchemy.url`` is set (``alembic -x url=sqlite:///llm_connect.db``
or ``$LLM_CONNECT_DATABASE_URL``).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from llm_connect.ledger._engine import make_engine, resolve_url
from llm_connect.ledger._models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    """Emit SQL to stdout instead of running it (``alembic upgrade --sql``)."""
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    context.configure(
        url=str(resolve_url(url)),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run the migrations on the connection llm-connect passed in, or on a new one."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    engine = make_engine(resolve_url(url))
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
