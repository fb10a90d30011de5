"""label sampling: which graded cases go to people, with their inclusion probability

Revision ID: 0010_label_sampling
Revises: 0009_human_labels
Create Date: 2026-11-27 14:00:00.000000

``label_sampling`` keeps the sampler's decision about each graded case of a
(task, candidate model, grader id): the inclusion probability fixed before any
label of the case existed, whether it was chosen, the strategy, rate, floor and
seed, and the case's arrival position. Routing on what people would say
(``Router.decide(target="human")``) reads it with the labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_label_sampling"
down_revision: str | None = "0009_human_labels"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "label_sampling",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(200), nullable=False),
        sa.Column("candidate", sa.String(200), nullable=False),
        sa.Column("grader_id", sa.String(300), nullable=False),
        sa.Column("case_id", sa.String(200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("inclusion", sa.Float(), nullable=False),
        sa.Column("chosen", sa.Boolean(), nullable=False),
        sa.Column("strategy", sa.String(20), nullable=False),
        sa.Column("rate", sa.Float(), nullable=False),
        sa.Column("floor", sa.Float(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "inclusion > 0.0 AND inclusion <= 1.0", name=op.f("ck_label_sampling_inclusion_range")
        ),
        sa.CheckConstraint("rate > 0.0 AND rate <= 1.0", name=op.f("ck_label_sampling_rate_range")),
        sa.CheckConstraint(
            "floor > 0.0 AND floor <= inclusion AND floor <= rate", name=op.f("ck_label_sampling_floor_range")
        ),
        sa.CheckConstraint(
            "strategy IN ('uniform', 'active', 'imported')", name=op.f("ck_label_sampling_strategy_value")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_label_sampling")),
        sa.UniqueConstraint(
            "task",
            "candidate",
            "grader_id",
            "case_id",
            name=op.f("uq_label_sampling_task_candidate_grader_id_case_id"),
        ),
        sa.UniqueConstraint(
            "task",
            "candidate",
            "grader_id",
            "position",
            name=op.f("uq_label_sampling_task_candidate_grader_id_position"),
        ),
    )


def downgrade() -> None:
    op.drop_table("label_sampling")
