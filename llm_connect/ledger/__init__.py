"""The QualityLedger: every grade in SQL (SQLite by default, PostgreSQL for fleets)."""

from __future__ import annotations

from llm_connect.ledger._design import DesignMark, DesignReader, DesignRows, join_rows
from llm_connect.ledger._engine import DEFAULT_URL, ENV_VAR
from llm_connect.ledger._fleet import FleetStatus, FleetWorkerRow
from llm_connect.ledger._labels import LabelCounts, LabelStore, LabelWrite
from llm_connect.ledger._migrate import current_revision, head_revision, upgrade
from llm_connect.ledger._rows import (
    CalibrationRow,
    CaseSeries,
    FailureRow,
    GradeRow,
    GradeTotals,
    RecordItem,
    RunRow,
    StabilityResponseRow,
    StabilityRow,
    SummaryRow,
)
from llm_connect.ledger._sampling import GradedCase, SampledCase, SamplingStore
from llm_connect.ledger._store import QualityLedger

__all__ = [
    "DEFAULT_URL",
    "ENV_VAR",
    "CalibrationRow",
    "CaseSeries",
    "DesignMark",
    "DesignReader",
    "DesignRows",
    "FailureRow",
    "FleetStatus",
    "FleetWorkerRow",
    "GradeRow",
    "GradeTotals",
    "GradedCase",
    "LabelCounts",
    "LabelStore",
    "LabelWrite",
    "QualityLedger",
    "RecordItem",
    "RunRow",
    "SampledCase",
    "SamplingStore",
    "StabilityResponseRow",
    "StabilityRow",
    "SummaryRow",
    "current_revision",
    "head_revision",
    "join_rows",
    "upgrade",
]
