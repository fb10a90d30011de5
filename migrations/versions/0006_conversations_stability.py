"""conversations and stability analyses

Revision ID: 0006_conversations_stability
Revises: 0005_case_stats
Create Date: 2026-11-23 16:00:00.000000

``conversations`` stores each distinct conversation graded (messages, tools,
tool choice) once, keyed by its digest, which is the ``prompt_sha256`` of its
grades. ``stability_runs`` stores a stability analysis (a model asked the same
request N times: verdict, overall score, the full report) per task and model;
``stability_responses`` each run's answer or error.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_conversations_stability"
down_revision: str | None = "0005_case_stats"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("messages", sa.JSON(), nullable=False),
        sa.Column("tools", sa.JSON(), nullable=True),
        sa.Column("tool_choice", sa.JSON(), nullable=True),
        sa.Column("created_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_conversations")),
    )
    op.create_table(
        "stability_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("task", sa.String(200), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("adapter_id", sa.String(300), nullable=False),
        sa.Column("endpoint", sa.String(500), nullable=True),
        sa.Column("prompt_sha256", sa.String(64), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("successful_runs", sa.Integer(), nullable=False),
        sa.Column("overall_score", sa.Float(), nullable=False),
        sa.Column("verdict", sa.String(20), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("llm_connect_version", sa.String(50), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stability_runs")),
    )
    op.create_index("ix_stability_runs_task_model", "stability_runs", ["task", "model", "id"])
    op.create_table(
        "stability_responses",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("stability_run_id", sa.Integer(), nullable=False),
        sa.Column("run_index", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("tool_calls", sa.JSON(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("served_model", sa.String(200), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["stability_run_id"],
            ["stability_runs.id"],
            name=op.f("fk_stability_responses_stability_run_id_stability_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stability_responses")),
    )
    op.create_index("ix_stability_responses_run", "stability_responses", ["stability_run_id", "run_index"])


def downgrade() -> None:
    op.drop_index("ix_stability_responses_run", table_name="stability_responses")
    op.drop_table("stability_responses")
    op.drop_index("ix_stability_runs_task_model", table_name="stability_runs")
    op.drop_table("stability_runs")
    op.drop_table("conversations")
