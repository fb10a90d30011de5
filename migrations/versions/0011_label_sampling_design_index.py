"""label sampling: a covering index for routing on what people would say

Revision ID: 0011_label_sampling_design
Revises: 0010_label_sampling
Create Date: 2026-11-28 19:30:00.000000

``Router.decide(target="human")`` reads a group's sampled cases in the
sampler's order (task, candidate, grader id, position) with their case id,
whether chosen, inclusion probability and floor. ``ix_label_sampling_design``
holds all of them, so the read never visits the table's rows (SQLite: a
covering index; PostgreSQL: an index-only scan).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011_label_sampling_design"
down_revision: str | None = "0010_label_sampling"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_label_sampling_design",
        "label_sampling",
        ["task", "candidate", "grader_id", "position", "case_id", "chosen", "inclusion", "floor"],
    )


def downgrade() -> None:
    op.drop_index("ix_label_sampling_design", table_name="label_sampling")
