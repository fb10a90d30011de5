"""watch offsets: how far each watch has settled each file it follows

Revision ID: 0015_watch_offsets
Revises: 0014_grades_grader_task_id
Create Date: 2026-11-29 10:00:00.000000

``llm-connect watch`` (issue 38) follows trace and log files as they grow and grades a sampled
share of new calls in shadow. ``watch_offsets`` keeps, per watch and file path, the byte offset
(and line count) before which every call is settled (graded, failed or skipped), with the file's
device and inode and a fingerprint of its first bytes, so a restarted watch goes on where it
stopped and tells a rotated or truncated file from the one it read. ``docs/ledger.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_watch_offsets"
down_revision: str | None = "0014_grades_grader_task_id"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "watch_offsets",
        sa.Column("watch", sa.String(200), nullable=False),
        sa.Column("path", sa.String(1000), nullable=False),
        sa.Column("file_id", sa.String(64), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("fingerprint_bytes", sa.Integer(), nullable=False),
        sa.Column("byte_offset", sa.BigInteger(), nullable=False),
        sa.Column("line", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("watch", "path", name=op.f("pk_watch_offsets")),
    )


def downgrade() -> None:
    op.drop_table("watch_offsets")
