"""run_skips: the (case, judge, candidate) outcomes of a run that were not applicable

Revision ID: 0003_run_skips
Revises: 0002_grade_stats
Create Date: 2026-11-22 01:29:07.221187

A rule judge with no case data for a case (``--judge schema`` on a case
without ``expected.schema``) neither grades nor fails it. Recording that
outcome lets ``grade --resume`` treat the pair as done instead of grading the
case again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_run_skips"
down_revision: str | None = "0002_grade_stats"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_skips",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("run_id", sa.String(length=200), nullable=False),
        sa.Column("case_id", sa.String(length=200), nullable=False),
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("grader_id", sa.String(length=300), nullable=False),
        sa.Column("candidate_model", sa.String(length=200), nullable=False),
        sa.Column("candidate", sa.String(length=300), nullable=False),
        sa.Column("field", sa.String(length=200), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_run_skips_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_skips")),
        sa.UniqueConstraint(
            "run_id",
            "case_id",
            "grader_id",
            "candidate_model",
            name=op.f("uq_run_skips_run_id_case_id_grader_id_candidate_model"),
        ),
    )


def downgrade() -> None:
    op.drop_table("run_skips")
