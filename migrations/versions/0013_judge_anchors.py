"""judge anchors: a judge's frozen grades on chosen cases, and every check of them

Revision ID: 0013_judge_anchors
Revises: 0012_drop_evidence_snapshots
Create Date: 2026-11-28 20:40:00.000000

``judge_anchors`` keeps one judge's anchor set on a task (active or replaced) with the
judge's identity when it was frozen; ``judge_anchor_cases`` the frozen grades in the order
a check asks them; ``judge_checks`` every check: the new grades, the figures, the drift
test's state after it, and its verdict (``stable``, ``drifted``, ``not settled`` or
``incomplete`` when a call failed). Issue 37; ``docs/ledger.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_judge_anchors"
down_revision: str | None = "0012_drop_evidence_snapshots"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "judge_anchors",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("grader_id", sa.String(300), nullable=False),
        sa.Column("task", sa.String(200), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("tolerance", sa.Float(), nullable=False),
        sa.Column("identity", sa.JSON(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_anchors")),
    )
    op.create_index("ix_judge_anchors_judge", "judge_anchors", ["grader_id", "task", "active"])
    op.create_table(
        "judge_anchor_cases",
        sa.Column("anchor_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("grade_id", sa.BigInteger(), nullable=False),
        sa.Column("case_id", sa.String(200), nullable=True),
        sa.Column("frozen_score", sa.Float(), nullable=False),
        sa.Column("labelled", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["anchor_id"],
            ["judge_anchors.id"],
            name=op.f("fk_judge_anchor_cases_anchor_id_judge_anchors"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("anchor_id", "position", name=op.f("pk_judge_anchor_cases")),
    )
    op.create_table(
        "judge_checks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("anchor_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("scores", sa.JSON(), nullable=False),
        sa.Column("figures", sa.JSON(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("identity", sa.JSON(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('stable', 'drifted', 'not settled', 'incomplete')",
            name=op.f("ck_judge_checks_status_value"),
        ),
        sa.ForeignKeyConstraint(
            ["anchor_id"],
            ["judge_anchors.id"],
            name=op.f("fk_judge_checks_anchor_id_judge_anchors"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_checks")),
    )
    op.create_index("ix_judge_checks_anchor", "judge_checks", ["anchor_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_judge_checks_anchor", table_name="judge_checks")
    op.drop_table("judge_checks")
    op.drop_table("judge_anchor_cases")
    op.drop_index("ix_judge_anchors_judge", table_name="judge_anchors")
    op.drop_table("judge_anchors")
