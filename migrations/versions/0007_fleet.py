"""shared (fleet) runs: run suites, run cases with leases, workers, rate buckets

Revision ID: 0007_fleet
Revises: 0006_conversations_stability
Create Date: 2026-11-24 10:00:00.000000

``run_suites`` holds the suite a shared run grades (digest, size);
``run_cases`` its cases in suite order with their claim state (pending,
claimed under a lease, done, failed), claimed with ``FOR UPDATE SKIP LOCKED``
through ``ix_run_cases_claim``; ``fleet_workers`` the run's worker processes
and their heartbeats; ``rate_buckets`` token buckets every process shares.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_fleet"
down_revision: str | None = "0006_conversations_stability"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "run_suites",
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("suite_digest", sa.String(128), nullable=False),
        sa.Column("n_cases", sa.Integer(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_suites")),
    )
    op.create_table(
        "run_cases",
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("case_id", sa.String(200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(200), nullable=False),
        sa.Column("case_digest", sa.String(128), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("worker_id", sa.String(200), nullable=True),
        sa.Column("lease_until", _utc(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["run_suites.run_id"],
            name=op.f("fk_run_cases_run_id_run_suites"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "case_id", name=op.f("pk_run_cases")),
    )
    op.create_index("ix_run_cases_claim", "run_cases", ["run_id", "status", "position"])
    op.create_table(
        "fleet_workers",
        sa.Column("worker_id", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("host", sa.String(300), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", _utc(), nullable=False),
        sa.Column("heartbeat_at", _utc(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("cases_done", sa.Integer(), nullable=False),
        sa.Column("stopped_at", _utc(), nullable=True),
        sa.PrimaryKeyConstraint("worker_id", name=op.f("pk_fleet_workers")),
    )
    op.create_index("ix_fleet_workers_run_id", "fleet_workers", ["run_id"])
    op.create_table(
        "rate_buckets",
        sa.Column("key", sa.String(300), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.Column("rate_per_s", sa.Float(), nullable=False),
        sa.Column("burst", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_rate_buckets")),
    )


def downgrade() -> None:
    op.drop_table("rate_buckets")
    op.drop_index("ix_fleet_workers_run_id", table_name="fleet_workers")
    op.drop_table("fleet_workers")
    op.drop_index("ix_run_cases_claim", table_name="run_cases")
    op.drop_table("run_cases")
    op.drop_table("run_suites")
