"""The README's SQL queries run on both backends against a ledger with data and return rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from markdown_it import MarkdownIt

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "Query the ledger with SQL"


def readme_sql_blocks() -> list[str]:
    """Every ```sql block of the README section ``## Query the ledger with SQL``."""
    tokens = MarkdownIt().parse(README.read_text(encoding="utf-8"))
    blocks: list[str] = []
    inside = False
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h2":
            inside = tokens[i + 1].content.strip() == SECTION
        elif inside and token.type == "fence" and token.info.strip() == "sql":
            blocks.append(token.content)
    return blocks


def test_the_readme_has_four_sql_queries() -> None:
    assert len(readme_sql_blocks()) == 4


def test_readme_queries_return_rows(ledger: QualityLedger, make_result: Callable[..., GradingResult]) -> None:
    for task in ("support", "extraction"):
        for model, score in (("gpt-4o-mini", 0.9), ("llama-3.1-8b", 0.6)):
            ledger.record_many(
                [
                    make_result(score - i / 100, candidate_model=model, grader_id=g)
                    for i in range(3)
                    for g in ("exact", "embedding")
                ],
                task=task,
                run_id=f"r-{task}-{model}",
                case_id=None,
            )
    blocks = readme_sql_blocks()
    with ledger.engine.connect() as conn:
        for sql in blocks:
            rows = conn.exec_driver_sql(sql.strip().rstrip(";")).all()
            assert rows, f"no rows from README query:\n{sql}"
