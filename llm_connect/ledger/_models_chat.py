"""Tables for conversations and stability analyses (revision ``0006_conversations_stability``).

* ``conversations``: each distinct conversation graded (messages, tools, tool
  choice), once, keyed by its digest; a grade of a conversation case has that
  digest as its ``prompt_sha256``, so ``JOIN conversations c ON
  c.sha256 = grades.prompt_sha256`` gives SQL users the whole request.
* ``stability_runs``: one stored stability analysis (a model asked the same
  request N times): the verdict, the overall score and the full report.
* ``stability_responses``: each run's answer (or error) of an analysis.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from llm_connect._version import __version__
from llm_connect.ledger._models import Base
from llm_connect.types import utcnow

__all__ = ["ConversationRecord", "StabilityResponseRecord", "StabilityRunRecord"]


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
