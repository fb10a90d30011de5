"""Tables that coordinate a shared (fleet) run on PostgreSQL (revision ``0007_fleet``).

* ``run_suites``: the suite a shared run grades (its digest and size), one row per run.
* ``run_cases``: the run's cases in suite order, each ``pending``, ``claimed`` by a
  worker under a lease, ``done`` or ``failed``; workers claim them with
  ``SELECT ... FOR UPDATE SKIP LOCKED`` (:class:`~llm_connect.ledger._fleet.FleetMixin`).
* ``fleet_workers``: every worker process of a run, its heartbeat and counts.
* ``rate_buckets``: token buckets shared by every process (``--rpm``/``--tpm`` for the fleet).

The tables exist on SQLite too (one schema for both backends), but only
PostgreSQL uses them: shared runs need row locks and many writers.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from llm_connect.ledger._models import Base
from llm_connect.types import utcnow

__all__ = ["FleetWorker", "RateBucket", "RunCase", "RunSuite"]


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
