"""drop evidence_snapshots: a decision recomputes what it needs from the running totals

Revision ID: 0012_drop_evidence_snapshots
Revises: 0011_label_sampling_design
Create Date: 2026-11-28 15:10:00.000000

``evidence_snapshots`` kept the evidence each decision computed (and the human target's
arrays and running sums), so that a new process could decide in under 5 or 50 ms without
reading case rows. Those targets are retired (issue 33): routing code asks for a decision
after a batch, a Router keeps its own state in memory, and a new Router reads the case
rows (a few ms at 1,000,000 grades for the judge's target; a few hundred ms at 100,000
sampled cases for what people would say). Nothing else read the table; its rows were
derived state, so dropping them loses nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_drop_evidence_snapshots"
down_revision: str | None = "0011_label_sampling_design"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_table("evidence_snapshots")


def downgrade() -> None:
    op.create_table(
        "evidence_snapshots",
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("baseline_model", sa.String(length=200), nullable=False),
        sa.Column("grader_id", sa.String(length=300), nullable=False),
        sa.Column("candidate_model", sa.String(length=200), nullable=False),
        sa.Column("settings", sa.String(length=300), nullable=False),
        sa.Column("version_n", sa.Integer(), nullable=False),
        sa.Column("version_sum", sa.Float(), nullable=False),
        sa.Column("version_sum_sq", sa.Float(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            "task", "baseline_model", "grader_id", "candidate_model", "settings",
            name=op.f("pk_evidence_snapshots"),
        ),
    )  # fmt: skip
