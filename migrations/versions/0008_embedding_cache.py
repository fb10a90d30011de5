"""embedding cache: one float32 vector per (embedding model id, text SHA-256)

Revision ID: 0008_embedding_cache
Revises: 0007_fleet
Create Date: 2026-11-25 10:00:00.000000

``embedding_cache`` keeps every vector an embedding judge (or persona,
stability, calibration) computed, keyed by the embedder's adapter id and the
SHA-256 of the text, as float32 little-endian bytes with their length, so a
text is embedded once per model for the life of the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_embedding_cache"
down_revision: str | None = "0007_fleet"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "embedding_cache",
        sa.Column("model_id", sa.String(300), nullable=False),
        sa.Column("text_sha256", sa.String(64), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("model_id", "text_sha256", name=op.f("pk_embedding_cache")),
    )


def downgrade() -> None:
    op.drop_table("embedding_cache")
