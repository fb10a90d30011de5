"""docs/ledger.md documents every table and column of the schema."""

from __future__ import annotations

from pathlib import Path

from llm_connect.ledger._models import Base

DOC = Path(__file__).resolve().parents[2] / "docs" / "ledger.md"


def test_every_table_and_column_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = [
        f"{table.name}.{column.name}"
        for table in Base.metadata.sorted_tables
        for column in table.columns
        if f"`{column.name}`" not in text
    ]
    assert all(f"### `{t.name}`" in text for t in Base.metadata.sorted_tables)
    assert "### `quality_summary` (view)" in text
    assert not missing, f"undocumented columns: {missing}"
