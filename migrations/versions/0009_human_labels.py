"""human labels: a person's preference or score per (task, case, candidate, annotator)

Revision ID: 0009_human_labels
Revises: 0008_embedding_cache
Create Date: 2026-11-27 10:00:00.000000

``human_labels`` keeps what people said about a candidate's answer against the
baseline's: a preference (candidate, baseline, tie) or a 0..1 score, one per
(task, case id, candidate model, annotator). ``ix_grades_task_case`` finds a
case's grades by (task, case id): a batch of labels checks that its cases and
candidates were graded through it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_human_labels"
down_revision: str | None = "0008_embedding_cache"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "human_labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(200), nullable=False),
        sa.Column("case_id", sa.String(200), nullable=False),
        sa.Column("candidate", sa.String(200), nullable=False),
        sa.Column("annotator", sa.String(200), nullable=False),
        sa.Column("preference", sa.String(20), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("run_id", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "(preference IS NULL AND score IS NOT NULL) OR (preference IS NOT NULL AND score IS NULL)",
            name=op.f("ck_human_labels_preference_or_score"),
        ),
        sa.CheckConstraint(
            "preference IN ('candidate', 'baseline', 'tie')", name=op.f("ck_human_labels_preference_value")
        ),
        sa.CheckConstraint("score >= 0.0 AND score <= 1.0", name=op.f("ck_human_labels_score_range")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_human_labels")),
        sa.UniqueConstraint(
            "task",
            "case_id",
            "candidate",
            "annotator",
            name=op.f("uq_human_labels_task_case_id_candidate_annotator"),
        ),
    )
    op.create_index("ix_grades_task_case", "grades", ["task", "case_id"])


def downgrade() -> None:
    op.drop_index("ix_grades_task_case", table_name="grades")
    op.drop_table("human_labels")
