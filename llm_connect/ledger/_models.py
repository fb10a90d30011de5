"""The ledger's tables as typed SQLAlchemy models.

The Alembic migrations under ``migrations/`` create exactly these tables (a
test runs ``alembic check`` on SQLite and PostgreSQL); the ``quality_summary``
view is created by the migration from :data:`QUALITY_SUMMARY_VIEW_SQL`.

Timestamps are timezone-aware UTC on both backends (:class:`UTCDateTime`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from llm_connect._version import __version__
from llm_connect.types import utcnow

__all__ = [
    "CASE_KEY_SQL",
    "CASE_STATS_REBUILD_SQL",
    "GRADE_STATS_REBUILD_SQL",
    "NAMING_CONVENTION",
    "QUALITY_SUMMARY_VIEW_SQL",
    "Base",
    "Calibration",
    "CaseStats",
    "EvidenceSnapshot",
    "Grade",
    "GradeStats",
    "ResponseCacheEntry",
    "RoutingDecisionRecord",
    "Run",
    "RunFailure",
    "RunSkip",
    "UTCDateTime",
    "utcnow",
]

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware.

    SQLite has no time zone type: values are stored as naive UTC text and
    tagged UTC on the way out. PostgreSQL stores ``timestamp with time zone``.
    Naive datetimes passed in are taken to be UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base of the ledger's tables, with a constraint naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {  # noqa: RUF012 - SQLAlchemy reads this class attribute
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[Any]: JSON(),
    }


class Grade(Base):
    """One stored grade: a candidate response judged against a baseline response."""

    __tablename__ = "grades"
    __table_args__ = (
        CheckConstraint("quality_score >= 0.0 AND quality_score <= 1.0", name="quality_score_range"),
        UniqueConstraint("run_id", "case_id", "grader_id", "candidate_model"),
        # Serves Router.decide and summary(): equality on the first four columns,
        # the aggregated columns read from the index alone.
        Index(
            "ix_grades_routing",
            "task",
            "baseline_model",
            "grader_id",
            "candidate_model",
            "quality_score",
            "candidate_cost_usd",
            "baseline_cost_usd",
            "candidate_latency_ms",
            "baseline_latency_ms",
        ),
        Index("ix_grades_grader_task", "grader_id", "task"),
        Index("ix_grades_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    run_id: Mapped[str | None] = mapped_column(String(200))
    case_id: Mapped[str | None] = mapped_column(String(200))
    task: Mapped[str] = mapped_column(String(200))
    tags: Mapped[list[Any]] = mapped_column(default=list)
    prompt: Mapped[str | None] = mapped_column(Text)
    prompt_sha256: Mapped[str] = mapped_column(String(64))
    system_prompt_sha256: Mapped[str | None] = mapped_column(String(64))

    baseline_adapter_id: Mapped[str] = mapped_column(String(300))
    baseline_provider: Mapped[str] = mapped_column(String(100))
    baseline_model: Mapped[str] = mapped_column(String(200))
    baseline_text: Mapped[str | None] = mapped_column(Text)
    baseline_text_sha256: Mapped[str] = mapped_column(String(64))
    baseline_latency_ms: Mapped[float | None] = mapped_column(Float)
    baseline_prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    baseline_completion_tokens: Mapped[int | None] = mapped_column(Integer)
    baseline_cost_usd: Mapped[float | None] = mapped_column(Float)
    baseline_finish_reason: Mapped[str | None] = mapped_column(String(50))
    baseline_tool_calls: Mapped[list[Any] | None] = mapped_column(JSON)
    baseline_served_model: Mapped[str | None] = mapped_column(String(200))
    baseline_endpoint: Mapped[str | None] = mapped_column(String(500))

    candidate_adapter_id: Mapped[str] = mapped_column(String(300))
    candidate_provider: Mapped[str] = mapped_column(String(100))
    candidate_model: Mapped[str] = mapped_column(String(200))
    candidate_text: Mapped[str | None] = mapped_column(Text)
    candidate_text_sha256: Mapped[str] = mapped_column(String(64))
    candidate_latency_ms: Mapped[float | None] = mapped_column(Float)
    candidate_prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    candidate_completion_tokens: Mapped[int | None] = mapped_column(Integer)
    candidate_cost_usd: Mapped[float | None] = mapped_column(Float)
    candidate_finish_reason: Mapped[str | None] = mapped_column(String(50))
    candidate_tool_calls: Mapped[list[Any] | None] = mapped_column(JSON)
    candidate_served_model: Mapped[str | None] = mapped_column(String(200))
    candidate_endpoint: Mapped[str | None] = mapped_column(String(500))

    grader_id: Mapped[str] = mapped_column(String(300))
    quality_score: Mapped[float] = mapped_column(Float)
    notes: Mapped[str] = mapped_column(Text, default="")
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    run_config: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    llm_connect_version: Mapped[str] = mapped_column(String(50), default=__version__)
    case_metadata: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON)
    asks_llm: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    score_delta: Mapped[float | None] = mapped_column(Float)
    """Candidate score minus baseline score, for judges that score each response on its own
    (``details.candidate_score - details.baseline_score``); ``None`` otherwise."""


class GradeStats(Base):
    """Running totals of ``grades`` per (task, baseline model, grader id, candidate model).

    Maintained by every write of the ledger in the same transaction as the
    grades themselves, so routing and unfiltered summaries read a handful of
    rows however large the ledger grows. Averages are ``*_sum / *_n`` (``*_n``
    counts the grades where the value is known). Grades inserted behind the
    ledger's back (raw SQL) are counted after :meth:`QualityLedger.rebuild_stats`.
    """

    __tablename__ = "grade_stats"

    task: Mapped[str] = mapped_column(String(200), primary_key=True)
    baseline_model: Mapped[str] = mapped_column(String(200), primary_key=True)
    grader_id: Mapped[str] = mapped_column(String(300), primary_key=True)
    candidate_model: Mapped[str] = mapped_column(String(200), primary_key=True)
    n: Mapped[int] = mapped_column(Integer)
    sum_quality: Mapped[float] = mapped_column(Float)
    sum_quality_sq: Mapped[float] = mapped_column(Float)
    baseline_cost_sum: Mapped[float] = mapped_column(Float)
    baseline_cost_n: Mapped[int] = mapped_column(Integer)
    candidate_cost_sum: Mapped[float] = mapped_column(Float)
    candidate_cost_n: Mapped[int] = mapped_column(Integer)
    baseline_latency_sum: Mapped[float] = mapped_column(Float)
    baseline_latency_n: Mapped[int] = mapped_column(Integer)
    candidate_latency_sum: Mapped[float] = mapped_column(Float)
    candidate_latency_n: Mapped[int] = mapped_column(Integer)
    first_at: Mapped[datetime] = mapped_column()
    last_at: Mapped[datetime] = mapped_column()
    asks_llm: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """Whether any of these grades came from a judge that asks an LLM (gates routing)."""


class CaseStats(Base):
    """Running totals per *case* of (task, baseline model, grader id, candidate model).

    The case is the unit of evidence: grades of one case from several runs are
    averaged into one value before any interval is computed. ``case_key`` is
    ``id:<case_id>`` when the grade has a case id, else ``sha256:<prompt digest>``.
    ``first_id`` (the case's first grade) orders cases as they arrived, which is
    the order the anytime-valid bound reads them in. Maintained with every write,
    in the same transaction as the grades; :meth:`QualityLedger.rebuild_stats`
    recomputes it.
    """

    __tablename__ = "case_stats"
    __table_args__ = (
        # Routing reads a group's cases in arrival order: this index holds every column it reads,
        # in that order, so the read is one range scan with no sort and no table lookups.
        Index(
            "ix_case_stats_arrival",
            "task",
            "baseline_model",
            "grader_id",
            "candidate_model",
            "first_id",
            "n",
            "sum_quality",
            "delta_n",
            "delta_sum",
        ),
    )

    task: Mapped[str] = mapped_column(String(200), primary_key=True)
    baseline_model: Mapped[str] = mapped_column(String(200), primary_key=True)
    grader_id: Mapped[str] = mapped_column(String(300), primary_key=True)
    candidate_model: Mapped[str] = mapped_column(String(200), primary_key=True)
    case_key: Mapped[str] = mapped_column(String(300), primary_key=True)
    n: Mapped[int] = mapped_column(Integer)
    """Grades of this case."""
    sum_quality: Mapped[float] = mapped_column(Float)
    delta_n: Mapped[int] = mapped_column(Integer)
    """Grades of this case with a ``score_delta`` (single-response scorers)."""
    delta_sum: Mapped[float] = mapped_column(Float)
    first_id: Mapped[int] = mapped_column(Integer)


class ResponseCacheEntry(Base):
    """A cached model response, keyed by :meth:`QualityLedger.cache_key`."""

    __tablename__ = "response_cache"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    adapter_id: Mapped[str] = mapped_column(String(300))
    response: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Run(Base):
    """One grading run (a suite graded with one configuration), for resume and audit."""

    __tablename__ = "runs"

    run_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    suite: Mapped[str | None] = mapped_column(Text)
    config: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(50), default="running")
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column()
    llm_connect_version: Mapped[str] = mapped_column(String(50), default=__version__)


class RunFailure(Base):
    """A case that could not be graded in a run (after retries), instead of a fake score."""

    __tablename__ = "run_failures"
    __table_args__ = (Index("ix_run_failures_run_id", "run_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    run_id: Mapped[str] = mapped_column(String(200), ForeignKey("runs.run_id", ondelete="CASCADE"))
    case_id: Mapped[str] = mapped_column(String(200))
    task: Mapped[str] = mapped_column(String(200))
    stage: Mapped[str] = mapped_column(String(50))
    error_type: Mapped[str] = mapped_column(String(200))
    message: Mapped[str] = mapped_column(Text)
    adapter_id: Mapped[str | None] = mapped_column(String(300))


class RunSkip(Base):
    """A (case, judge, candidate) of a run the judge had no case data for: not a grade, not a failure.

    Kept so that resuming the run does not grade that case again.
    """

    __tablename__ = "run_skips"
    __table_args__ = (UniqueConstraint("run_id", "case_id", "grader_id", "candidate_model"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    run_id: Mapped[str] = mapped_column(String(200), ForeignKey("runs.run_id", ondelete="CASCADE"))
    case_id: Mapped[str] = mapped_column(String(200))
    task: Mapped[str] = mapped_column(String(200))
    grader_id: Mapped[str] = mapped_column(String(300))
    candidate_model: Mapped[str] = mapped_column(String(200))
    candidate: Mapped[str] = mapped_column(String(300))
    field: Mapped[str | None] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(Text)


class Calibration(Base):
    """A stored calibration of an LLM judge against reference judges."""

    __tablename__ = "calibrations"
    __table_args__ = (Index("ix_calibrations_judge", "judge_grader_id", "task"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    judge_grader_id: Mapped[str] = mapped_column(String(300))
    reference_grader_ids: Mapped[list[Any]] = mapped_column()
    task: Mapped[str | None] = mapped_column(String(200))
    figures: Mapped[dict[str, Any]] = mapped_column()
    verdict: Mapped[str] = mapped_column(Text)
    passed: Mapped[bool] = mapped_column(Boolean)
    llm_connect_version: Mapped[str] = mapped_column(String(50), default=__version__)


class EvidenceSnapshot(Base):
    """The evidence routing last computed for one group under one set of settings, with the
    version of the group's running totals it was computed at (``n``, ``Σ``, ``Σ²`` of
    ``grade_stats``).

    A cache shared by every process: a router whose totals read shows the same version uses the
    stored evidence instead of reading every case again; any new grade changes the version. The
    ledger stores the JSON; it never computes or interprets it.
    """

    __tablename__ = "evidence_snapshots"

    task: Mapped[str] = mapped_column(String(200), primary_key=True)
    baseline_model: Mapped[str] = mapped_column(String(200), primary_key=True)
    grader_id: Mapped[str] = mapped_column(String(300), primary_key=True)
    candidate_model: Mapped[str] = mapped_column(String(200), primary_key=True)
    settings: Mapped[str] = mapped_column(String(300), primary_key=True)
    """The rule's parameters (threshold, confidence, error share, min cases, method, rule version)."""
    version_n: Mapped[int] = mapped_column(Integer)
    version_sum: Mapped[float] = mapped_column(Float)
    version_sum_sq: Mapped[float] = mapped_column(Float)
    evidence: Mapped[dict[str, Any]] = mapped_column()
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class RoutingDecisionRecord(Base):
    """One :class:`~llm_connect.routing.RoutingDecision`, kept for audit."""

    __tablename__ = "routing_decisions"
    __table_args__ = (Index("ix_routing_decisions_task", "task", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    task: Mapped[str] = mapped_column(String(200))
    baseline_model: Mapped[str] = mapped_column(String(200))
    chosen_model: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(Text)
    grader_ids: Mapped[list[Any]] = mapped_column()
    parameters: Mapped[dict[str, Any]] = mapped_column()
    evidence: Mapped[dict[str, Any]] = mapped_column()
    llm_connect_version: Mapped[str] = mapped_column(String(50), default=__version__)


#: The ``quality_summary`` view (portable SQL, identical on SQLite and PostgreSQL).
QUALITY_SUMMARY_VIEW_SQL = """\
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


#: Recomputes ``grade_stats`` from ``grades`` (portable SQL; run after deleting its rows).
GRADE_STATS_REBUILD_SQL = """\
INSERT INTO grade_stats (task, baseline_model, grader_id, candidate_model, n, sum_quality,
    sum_quality_sq, baseline_cost_sum, baseline_cost_n, candidate_cost_sum, candidate_cost_n,
    baseline_latency_sum, baseline_latency_n, candidate_latency_sum, candidate_latency_n,
    first_at, last_at, asks_llm)
SELECT task, baseline_model, grader_id, candidate_model, COUNT(*), SUM(quality_score),
    SUM(quality_score * quality_score), COALESCE(SUM(baseline_cost_usd), 0.0), COUNT(baseline_cost_usd),
    COALESCE(SUM(candidate_cost_usd), 0.0), COUNT(candidate_cost_usd),
    COALESCE(SUM(baseline_latency_ms), 0.0), COUNT(baseline_latency_ms),
    COALESCE(SUM(candidate_latency_ms), 0.0), COUNT(candidate_latency_ms),
    MIN(created_at), MAX(created_at), MAX(CASE WHEN asks_llm THEN 1 ELSE 0 END) > 0
FROM grades
GROUP BY task, baseline_model, grader_id, candidate_model"""


#: The case a grade belongs to, as an SQL expression over ``grades`` (see :class:`CaseStats`).
CASE_KEY_SQL = "CASE WHEN case_id IS NOT NULL THEN 'id:' || case_id ELSE 'sha256:' || prompt_sha256 END"

#: Recomputes ``case_stats`` from ``grades`` (portable SQL; run after deleting its rows).
CASE_STATS_REBUILD_SQL = f"""\
INSERT INTO case_stats (task, baseline_model, grader_id, candidate_model, case_key, n, sum_quality,
    delta_n, delta_sum, first_id)
SELECT task, baseline_model, grader_id, candidate_model, {CASE_KEY_SQL}, COUNT(*), SUM(quality_score),
    COUNT(score_delta), COALESCE(SUM(score_delta), 0.0), MIN(id)
FROM grades
GROUP BY task, baseline_model, grader_id, candidate_model, {CASE_KEY_SQL}"""


SNAPSHOT_KEY = ("task", "baseline_model", "grader_id", "candidate_model", "settings")
"""An evidence snapshot's key columns (one row per task, baseline, grader, candidate and settings)."""
SNAPSHOT_VALUES = ("version_n", "version_sum", "version_sum_sq", "evidence", "updated_at")
"""The columns an evidence snapshot's upsert overwrites."""
