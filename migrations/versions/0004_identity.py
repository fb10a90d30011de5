"""identity: requested vs served model, endpoint, case metadata, judges that ask an LLM

Revision ID: 0004_identity
Revises: 0003_run_skips
Create Date: 2026-11-23 12:10:00.000000

``grades.baseline_model`` / ``candidate_model`` now hold the model that was
*asked for* (the name routing code uses); the name the server reported (a
dated snapshot such as ``gpt-4o-mini-2024-07-18``) goes to ``*_served_model``
and the server's base URL (no credentials) to ``*_endpoint``. Rows written
before this revision stored the served name in ``*_model``; they keep it
(so they route exactly as before) and get the same name as their served model.

``metadata`` keeps a suite case's ``metadata`` object with each grade.
``asks_llm`` records whether the judge asked an LLM (the calibration gate
reads it); for older rows it is derived from the grader id as the previous
release did (``llm:`` prefix or ``+llm:``), in ``grade_stats`` too.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_identity"
down_revision: str | None = "0003_run_skips"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copy of the view at this revision (unchanged since 0001).
QUALITY_SUMMARY_VIEW_SQL = """\
CREATE VIEW quality_summary AS
SELECT task,
       baseline_model,
       candidate_model,
       grader_id,
       COUNT(*) AS n,
       AVG(quality_score) AS mean_quality,
       MIN(quality_score) AS min_quality,
       MAX(quality_score) AS max_quality,
       MIN(created_at) AS first_at,
       MAX(created_at) AS last_at
FROM grades
GROUP BY task, baseline_model, candidate_model, grader_id"""

_LLM_GRADER = "(grader_id LIKE 'llm:%' OR grader_id LIKE '%+llm:%')"


def upgrade() -> None:
    # Plain ADD COLUMN on both backends (no table copy: SQLite keeps the view and every row id).
    op.add_column("grades", sa.Column("baseline_served_model", sa.String(length=200), nullable=True))
    op.add_column("grades", sa.Column("baseline_endpoint", sa.String(length=500), nullable=True))
    op.add_column("grades", sa.Column("candidate_served_model", sa.String(length=200), nullable=True))
    op.add_column("grades", sa.Column("candidate_endpoint", sa.String(length=500), nullable=True))
    op.add_column("grades", sa.Column("metadata", sa.JSON(), nullable=True))
    op.add_column("grades", sa.Column("asks_llm", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.add_column(
        "grade_stats", sa.Column("asks_llm", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.execute(
        "UPDATE grades SET baseline_served_model = baseline_model, candidate_served_model = candidate_model"
    )
    op.execute(f"UPDATE grades SET asks_llm = TRUE WHERE {_LLM_GRADER}")
    op.execute(f"UPDATE grade_stats SET asks_llm = TRUE WHERE {_LLM_GRADER}")


def downgrade() -> None:
    # The view reads grades: SQLite's table copy in batch mode needs it out of the way.
    op.execute("DROP VIEW IF EXISTS quality_summary")
    with op.batch_alter_table("grade_stats", schema=None) as batch_op:
        batch_op.drop_column("asks_llm")
    with op.batch_alter_table("grades", schema=None) as batch_op:
        batch_op.drop_column("asks_llm")
        batch_op.drop_column("metadata")
        batch_op.drop_column("candidate_endpoint")
        batch_op.drop_column("candidate_served_model")
        batch_op.drop_column("baseline_endpoint")
        batch_op.drop_column("baseline_served_model")
    op.execute(QUALITY_SUMMARY_VIEW_SQL)
