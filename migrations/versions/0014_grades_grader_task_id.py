"""grades: index (grader_id, task, id) instead of (grader_id, task)

Revision ID: 0014_grades_grader_task_id
Revises: 0013_judge_anchors
Create Date: 2026-11-28 23:55:00.000000

A routing decision flags a judge whose newest grade on the task names another served model or
fingerprint (issue 37), reading that judge's newest and first grade. With the id in the index
both are one index probe on PostgreSQL as on SQLite (whose indexes end in the row id anyway);
the old two-column index served the same equality lookups and is dropped, so a grade written
still pays for one index here, not two.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014_grades_grader_task_id"
down_revision: str | None = "0013_judge_anchors"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("grades") as batch_op:
        batch_op.create_index("ix_grades_grader_task_id", ["grader_id", "task", "id"], unique=False)
        batch_op.drop_index("ix_grades_grader_task")


def downgrade() -> None:
    with op.batch_alter_table("grades") as batch_op:
        batch_op.create_index("ix_grades_grader_task", ["grader_id", "task"], unique=False)
        batch_op.drop_index("ix_grades_grader_task_id")
