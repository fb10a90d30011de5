"""PostgreSQL helpers shared by the benchmarks: a throwaway schema, and a raw psycopg connection to it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import create_engine, make_url, text


def pg_schema(base: str) -> tuple[str, Callable[[], None]]:
    """Create a fresh schema on ``base``; returns (a URL selecting it via search_path, drop)."""
    engine = create_engine(base, isolation_level="AUTOCOMMIT")
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with engine.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))

    def drop() -> None:
        with engine.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()

    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}", drop


def raw_connect(url: str) -> Any:
    """A plain psycopg connection to the database and schema (search_path) of a ledger ``url``."""
    import psycopg

    sa_url = make_url(url)
    schema = str(sa_url.query["options"]).split("=", 1)[1]
    return psycopg.connect(
        host=sa_url.host,
        port=sa_url.port,
        user=sa_url.username,
        password=sa_url.password,
        dbname=sa_url.database,
        options=f"-csearch_path={schema}",
    )
