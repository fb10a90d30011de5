"""Which graded cases go to people (revisions ``0010_label_sampling``, ``0011_label_sampling_design``).

* ``label_sampling``: one row per (task, candidate model, grader id, case id), written once
  when the sampler decides the case (:class:`~llm_connect.ledger._sampling.SamplingStore`):
  the inclusion probability fixed before any label of the case existed, whether the case was
  chosen, and how (strategy, rate, floor, seed, arrival position); ``ix_label_sampling_design``
  covers the read of routing on what people would say (``_design.py``).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, CheckConstraint, Float, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from llm_connect.ledger._models import Base
from llm_connect.types import utcnow

__all__ = ["SAMPLING_STRATEGIES", "LabelSamplingRecord"]

SAMPLING_STRATEGIES = ("uniform", "active", "imported")
"""How a case's inclusion probability was set: ``uniform`` (``rate`` each), ``active`` (higher
where the judge is unsure, never below ``floor``), ``imported`` (a file the user drew at random
at ``rate``: ``labels import --sampled-uniformly``)."""


class LabelSamplingRecord(Base):
    """The sampler's decision about one graded case (see ``docs/ledger.md``)."""

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
    rate: Mapped[float] = mapped_column(Float)
    floor: Mapped[float] = mapped_column(Float)
    """The least inclusion probability the sampler could have given (the bound's range uses it)."""
    seed: Mapped[int | None] = mapped_column(BigInteger)
    """The seed of the draw (``None`` for a file drawn by the user)."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
