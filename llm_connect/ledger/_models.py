"""The ledger's tables as SQLAlchemy models; the Alembic migrations under ``migrations/`` create
exactly these (``alembic check`` is tested on both backends). ``docs/ledger.md`` describes each."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
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

GROUP_KEY = ("task", "baseline_model", "grader_id", "candidate_model")  # what routing reads grades by
_LATENCY = ("candidate_latency_ms", "baseline_latency_ms")
NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        value = self.process_result_value(value, dialect)  # aware, in UTC
        return value.replace(tzinfo=None) if value is not None and dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base of the ledger's tables, with a constraint naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {  # noqa: RUF012 - SQLAlchemy reads this class attribute
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[Any]: JSON(),
    }


class _GroupKey:
    """The key of a group of grades routing reads together (:data:`GROUP_KEY`), as the first
    columns of the tables that keep something per group (first also in their primary key)."""

    task: Mapped[str] = mapped_column(String(200), primary_key=True, sort_order=-1)
    baseline_model: Mapped[str] = mapped_column(String(200), primary_key=True, sort_order=-1)
    grader_id: Mapped[str] = mapped_column(String(300), primary_key=True, sort_order=-1)
    candidate_model: Mapped[str] = mapped_column(String(200), primary_key=True, sort_order=-1)


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
            *GROUP_KEY,
            "quality_score",
            "candidate_cost_usd",
            "baseline_cost_usd",
            *_LATENCY,
        ),
        # A judge's grades of a task, newest or oldest first (revision 0014): the decision reads a
        # judge's newest grade to flag a changed identity, which PostgreSQL can only do from the
        # index when it carries the id (SQLite's indexes carry the row id anyway).
        Index("ix_grades_grader_task_id", "grader_id", "task", "id"),
        Index("ix_grades_created_at", "created_at"),
        # A case's grades by (task, case id), for the labels' existence check (revision 0009): two
        # columns only, as each grade written pays for the index (about 10 us on SQLite; a covering
        # index with the candidate columns cost twice that).
        Index("ix_grades_task_case", "task", "case_id"),
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


class GradeStats(_GroupKey, Base):
    """Running totals of ``grades`` per (task, baseline model, grader id, candidate model)."""

    __tablename__ = "grade_stats"
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


class CaseStats(_GroupKey, Base):
    """Running totals per *case* of (task, baseline model, grader id, candidate model)."""

    __tablename__ = "case_stats"
    __table_args__ = (
        # Routing reads a group's cases in arrival order: this index holds every column it reads,
        # in that order, so the read is one range scan with no sort and no table lookups.
        Index("ix_case_stats_arrival", *GROUP_KEY, "first_id", "n", "sum_quality", "delta_n", "delta_sum"),
    )
    case_key: Mapped[str] = mapped_column(String(300), primary_key=True)
    n: Mapped[int] = mapped_column(Integer)
    sum_quality: Mapped[float] = mapped_column(Float)
    delta_n: Mapped[int] = mapped_column(Integer)
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
    """A (case, judge, candidate) of a run the judge had no case data for: not a grade, not a failure."""

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


class ConversationRecord(Base):
    """A conversation some grade answered, stored once (``sha256`` = ``Conversation.digest``)."""

    __tablename__ = "conversations"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    messages: Mapped[list[Any]] = mapped_column(JSON)
    tools: Mapped[list[Any] | None] = mapped_column(JSON)
    tool_choice: Mapped[Any | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class StabilityRunRecord(Base):
    """One stored stability analysis of a model on one request (and task)."""

    __tablename__ = "stability_runs"
    __table_args__ = (Index("ix_stability_runs_task_model", "task", "model", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    task: Mapped[str] = mapped_column(String(200))
    model: Mapped[str] = mapped_column(String(200))
    adapter_id: Mapped[str] = mapped_column(String(300))
    endpoint: Mapped[str | None] = mapped_column(String(500))
    prompt_sha256: Mapped[str] = mapped_column(String(64))
    runs: Mapped[int] = mapped_column(Integer)
    successful_runs: Mapped[int] = mapped_column(Integer)
    overall_score: Mapped[float] = mapped_column(Float)
    verdict: Mapped[str] = mapped_column(String(20))
    report: Mapped[dict[str, Any]] = mapped_column(JSON)
    llm_connect_version: Mapped[str] = mapped_column(String(50), default=__version__)


class StabilityResponseRecord(Base):
    """One answer (or failure) of a stability analysis's runs."""

    __tablename__ = "stability_responses"
    __table_args__ = (Index("ix_stability_responses_run", "stability_run_id", "run_index"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    stability_run_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("stability_runs.id", ondelete="CASCADE")
    )
    run_index: Mapped[int] = mapped_column(Integer)
    text: Mapped[str | None] = mapped_column(Text)
    tool_calls: Mapped[list[Any] | None] = mapped_column(JSON)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    served_model: Mapped[str | None] = mapped_column(String(200))
    error: Mapped[str | None] = mapped_column(Text)


class EmbeddingCacheRecord(Base):
    """A text's vector under one embedding model (the text itself is not stored)."""

    __tablename__ = "embedding_cache"
    model_id: Mapped[str] = mapped_column(String(300), primary_key=True)
    text_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    dim: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class RunSuite(Base):
    """The suite of a shared run: every process registering the run must give the same digest."""

    __tablename__ = "run_suites"
    run_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    suite_digest: Mapped[str] = mapped_column(String(128))
    n_cases: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class RunCase(Base):
    """One case of a shared run and who holds it."""

    __tablename__ = "run_cases"
    __table_args__ = (
        # The claim query: the run's pending (or claimed, for expired leases) cases in suite order.
        Index("ix_run_cases_claim", "run_id", "status", "position"),
    )
    run_id: Mapped[str] = mapped_column(
        String(200), ForeignKey("run_suites.run_id", ondelete="CASCADE"), primary_key=True
    )
    case_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    task: Mapped[str] = mapped_column(String(200))
    case_digest: Mapped[str] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(20), default="pending")
    worker_id: Mapped[str | None] = mapped_column(String(200))
    lease_until: Mapped[datetime | None] = mapped_column()
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class FleetWorker(Base):
    """A worker process of a shared run: where it runs, its last heartbeat and its counts."""

    __tablename__ = "fleet_workers"
    __table_args__ = (Index("ix_fleet_workers_run_id", "run_id"),)
    worker_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(200))
    host: Mapped[str] = mapped_column(String(300))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(default=utcnow)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    cases_done: Mapped[int] = mapped_column(Integer, default=0)
    stopped_at: Mapped[datetime | None] = mapped_column()


class RateBucket(Base):
    """A token bucket shared by every process (refilled lazily from ``updated_at``)."""

    __tablename__ = "rate_buckets"
    key: Mapped[str] = mapped_column(String(300), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    rate_per_s: Mapped[float] = mapped_column(Float)
    burst: Mapped[float] = mapped_column(Float)


PREFERENCE_CODE = (
    "CASE preference WHEN 'candidate' THEN 1 WHEN 'tie' THEN 2 WHEN 'baseline' THEN 3 ELSE 4 END"
)
"""SQL: a label's preference as a number (a score-only label: 4), for the labels' versions."""


class HumanLabelRecord(Base):
    """A person's label of one candidate answer against the baseline's (revision 0009;
    ``docs/ledger.md``)."""

    __tablename__ = "human_labels"
    __table_args__ = (
        UniqueConstraint("task", "case_id", "candidate", "annotator"),
        CheckConstraint(
            "(preference IS NULL AND score IS NOT NULL) OR (preference IS NOT NULL AND score IS NULL)",
            name="preference_or_score",
        ),
        CheckConstraint("preference IN ('candidate', 'baseline', 'tie')", name="preference_value"),
        CheckConstraint("score >= 0.0 AND score <= 1.0", name="score_range"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task: Mapped[str] = mapped_column(String(200))
    case_id: Mapped[str] = mapped_column(String(200))
    candidate: Mapped[str] = mapped_column(String(200))
    """The candidate model as graded (``grades.candidate_model``)."""
    annotator: Mapped[str] = mapped_column(String(200))
    preference: Mapped[str | None] = mapped_column(String(20))
    score: Mapped[float | None] = mapped_column(Float)
    note: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LabelSamplingRecord(Base):
    """The sampler's decision about one graded case (revisions 0010, 0011; ``docs/ledger.md``):
    written once, when the sampler first sees the case; ``ix_label_sampling_design`` covers
    routing's read of the design (``_design.py``)."""

    __tablename__ = "label_sampling"
    __table_args__ = (
        UniqueConstraint("task", "candidate", "grader_id", "case_id"),
        UniqueConstraint("task", "candidate", "grader_id", "position"),
        CheckConstraint("inclusion > 0.0 AND inclusion <= 1.0", name="inclusion_range"),
        CheckConstraint("rate > 0.0 AND rate <= 1.0", name="rate_range"),
        CheckConstraint("floor > 0.0 AND floor <= inclusion AND floor <= rate", name="floor_range"),
        CheckConstraint("strategy IN ('uniform', 'active', 'imported')", name="strategy_value"),
        Index(
            "ix_label_sampling_design",
            *("task", "candidate", "grader_id", "position", "case_id", "chosen", "inclusion", "floor"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task: Mapped[str] = mapped_column(String(200))
    candidate: Mapped[str] = mapped_column(String(200))
    """The candidate model as graded (``grades.candidate_model``)."""
    grader_id: Mapped[str] = mapped_column(String(300))
    case_id: Mapped[str] = mapped_column(String(200))
    position: Mapped[int] = mapped_column(Integer)
    """The case's place in the order the sampler decided cases (its grades' arrival order), from 0."""
    inclusion: Mapped[float] = mapped_column(Float)
    """The probability the case had of going to people, fixed before any label of it existed."""
    chosen: Mapped[bool] = mapped_column(Boolean)
    strategy: Mapped[str] = mapped_column(String(20))
    """How the inclusion probability was set: ``uniform`` (``rate`` each), ``active`` (higher where
    the judge is unsure, never below ``floor``), ``imported`` (a file the user drew at random at
    ``rate``: ``labels import --sampled-uniformly``)."""
    rate: Mapped[float] = mapped_column(Float)
    floor: Mapped[float] = mapped_column(Float)
    """The least inclusion probability the sampler could have given (the bound's range uses it)."""
    seed: Mapped[int | None] = mapped_column(BigInteger)
    """The seed of the draw (``None`` for a file drawn by the user)."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class JudgeAnchor(Base):
    """A judge's frozen anchor set on one task (revision 0013, issue 37; ``docs/ledger.md``): the
    judge's grades of chosen cases and what the judge said it was when they were frozen. One
    active set per judge and task; a replaced one stays, inactive, with its checks."""

    __tablename__ = "judge_anchors"
    __table_args__ = (Index("ix_judge_anchors_judge", "grader_id", "task", "active"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    grader_id: Mapped[str] = mapped_column(String(300))
    task: Mapped[str] = mapped_column(String(200))
    seed: Mapped[int] = mapped_column(BigInteger)
    tolerance: Mapped[float] = mapped_column(Float)
    identity: Mapped[dict[str, Any]] = mapped_column()
    active: Mapped[bool] = mapped_column(Boolean)
    note: Mapped[str] = mapped_column(Text)


class JudgeAnchorCase(Base):
    """One case of an anchor set: the grade frozen (its row and score), in the order checks ask."""

    __tablename__ = "judge_anchor_cases"

    anchor_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("judge_anchors.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    grade_id: Mapped[int] = mapped_column(BigInteger)
    case_id: Mapped[str | None] = mapped_column(String(200))
    frozen_score: Mapped[float] = mapped_column(Float)
    labelled: Mapped[bool] = mapped_column(Boolean)


class JudgeCheck(Base):
    """One check of an anchor set: the judge asked again on every case (revision 0013)."""

    __tablename__ = "judge_checks"
    __table_args__ = (
        Index("ix_judge_checks_anchor", "anchor_id", "id"),
        CheckConstraint("status IN ('stable', 'drifted', 'not settled', 'incomplete')", name="status_value"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    anchor_id: Mapped[int] = mapped_column(Integer, ForeignKey("judge_anchors.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    status: Mapped[str] = mapped_column(String(20))
    scores: Mapped[list[Any]] = mapped_column()
    """The judge's new grade per anchor position (null where the call failed)."""
    figures: Mapped[dict[str, Any]] = mapped_column()
    state: Mapped[dict[str, Any]] = mapped_column()
    """The drift test after this check (``calibration._drift.DriftState``; unchanged if incomplete)."""
    identity: Mapped[dict[str, Any]] = mapped_column()
    calls: Mapped[int] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)


class WatchOffset(Base):
    """How far a watch (``llm-connect watch``) has settled a file it follows (revision 0015): every
    call before ``byte_offset`` (after ``line`` lines) is graded, failed or skipped. ``file_id``
    (device and inode) and ``fingerprint`` (BLAKE2b of its first ``fingerprint_bytes`` bytes) tell
    the same file from one that replaced it (rotation) or was truncated."""

    __tablename__ = "watch_offsets"

    watch: Mapped[str] = mapped_column(String(200), primary_key=True)
    path: Mapped[str] = mapped_column(String(1000), primary_key=True)
    file_id: Mapped[str] = mapped_column(String(64))
    fingerprint: Mapped[str] = mapped_column(String(64))
    fingerprint_bytes: Mapped[int] = mapped_column(Integer)
    byte_offset: Mapped[int] = mapped_column(BigInteger)
    line: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
