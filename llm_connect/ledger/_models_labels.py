"""Human labels (revision ``0009_human_labels``).

* ``human_labels``: one row per (task, case id, candidate model, annotator): a person's
  preference between the candidate's and the baseline's answers, or a 0..1 score, with an
  optional note and run id (:class:`~llm_connect.ledger._labels.LabelStore`).
* ``ix_grades_task_case`` on ``grades``: finds a case's grades by (task, case id), which a
  label's existence check reads (two columns only: each grade written pays for the index,
  about 10 us on SQLite; a covering index with the candidate columns cost twice that).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, Float, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from llm_connect.ledger._models import Base, Grade
from llm_connect.types import utcnow

__all__ = ["GRADES_TASK_CASE_INDEX", "HumanLabelRecord"]

#: Serves the labels' existence check (and readers joining labels to grades): a case's grades
#: by (task, case id).
GRADES_TASK_CASE_INDEX = Index("ix_grades_task_case", Grade.task, Grade.case_id)


class HumanLabelRecord(Base):
    """A person's label of one candidate answer against the baseline's (see ``docs/ledger.md``)."""

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
