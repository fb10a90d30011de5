"""case-level evidence: per-case running totals and paired score differences

Revision ID: 0005_case_stats
Revises: 0004_identity
Create Date: 2026-11-23 14:00:00.000000

``evidence_snapshots`` caches the evidence routing computed per group and
settings, with the version of the group's running totals it was computed at.
``case_stats`` keeps, per (task, baseline model, grader id, candidate model)
and case, the number of grades and the sums of their quality scores and score
deltas, plus the case's first grade id (the order cases arrived in). Routing
averages each case's grades into one value before any interval, so the same
ten cases graded in three runs count as ten. ``grades.score_delta`` is the
candidate's score minus the baseline's for judges that score each response on
its own (``details.candidate_score - details.baseline_score``); rows written
before this revision get it from their details, then ``case_stats`` is filled
from every grade.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_case_stats"
down_revision: str | None = "0004_identity"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the SQL at this revision.
_CASE_KEY = "CASE WHEN case_id IS NOT NULL THEN 'id:' || case_id ELSE 'sha256:' || prompt_sha256 END"
_FILL = f"""\
INSERT INTO case_stats (task, baseline_model, grader_id, candidate_model, case_key, n, sum_quality,
    delta_n, delta_sum, first_id)
SELECT task, baseline_model, grader_id, candidate_model, {_CASE_KEY}, COUNT(*), SUM(quality_score),
    COUNT(score_delta), COALESCE(SUM(score_delta), 0.0), MIN(id)
FROM grades
GROUP BY task, baseline_model, grader_id, candidate_model, {_CASE_KEY}"""
_DELTA_SQLITE = """\
UPDATE grades SET score_delta =
    json_extract(details, '$.candidate_score') - json_extract(details, '$.baseline_score')
WHERE json_type(details, '$.candidate_score') IN ('real', 'integer')
  AND json_type(details, '$.baseline_score') IN ('real', 'integer')"""
_DELTA_POSTGRES = """\
UPDATE grades SET score_delta =
    CAST(details ->> 'candidate_score' AS DOUBLE PRECISION)
    - CAST(details ->> 'baseline_score' AS DOUBLE PRECISION)
WHERE json_typeof(details -> 'candidate_score') = 'number'
  AND json_typeof(details -> 'baseline_score') = 'number'"""


def upgrade() -> None:
    op.add_column("grades", sa.Column("score_delta", sa.Float(), nullable=True))
    op.create_table(
        "case_stats",
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("baseline_model", sa.String(length=200), nullable=False),
        sa.Column("grader_id", sa.String(length=300), nullable=False),
        sa.Column("candidate_model", sa.String(length=200), nullable=False),
        sa.Column("case_key", sa.String(length=300), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("sum_quality", sa.Float(), nullable=False),
        sa.Column("delta_n", sa.Integer(), nullable=False),
        sa.Column("delta_sum", sa.Float(), nullable=False),
        sa.Column("first_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "task", "baseline_model", "grader_id", "candidate_model", "case_key", name=op.f("pk_case_stats")
        ),
    )
    op.create_index(
        "ix_case_stats_arrival",
        "case_stats",
        ["task", "baseline_model", "grader_id", "candidate_model", "first_id", "n", "sum_quality",
         "delta_n", "delta_sum"],
    )  # fmt: skip
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
    op.execute(_DELTA_SQLITE if op.get_bind().dialect.name == "sqlite" else _DELTA_POSTGRES)
    op.execute("UPDATE grades SET score_delta = NULL WHERE score_delta < -1.0 OR score_delta > 1.0")
    op.execute(_FILL)


def downgrade() -> None:
    op.drop_table("evidence_snapshots")
    op.drop_index("ix_case_stats_arrival", table_name="case_stats")
    op.drop_table("case_stats")
    op.execute("DROP VIEW IF EXISTS quality_summary")
    with op.batch_alter_table("grades", schema=None) as batch_op:
        batch_op.drop_column("score_delta")
    op.execute(
        """\
CREATE VIEW quality_summary AS
SELECT task,
       baseline_model,
       candidate_model,
       grader_id,
       COUNT(*) AS n,
       AVG(quality_score) AS mean_quality,
       MIN(quality_score) AS min_quality,
       MAX(quality_score) AS max_quality,
       MIN(created_at) AS first_at,
       MAX(created_at) AS last_at
FROM grades
GROUP BY task, baseline_model, candidate_model, grader_id"""
    )
