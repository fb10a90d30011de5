"""The QualityLedger: every grade in SQL (SQLite by default, PostgreSQL for fleets).

:class:`QualityLedger` stores validated grades with their full context,
answers filtered queries (:meth:`~QualityLedger.results`), aggregates them
with confidence intervals (:meth:`~QualityLedger.summary`), and keeps the
response cache, runs, failures, judge calibrations and routing decisions.
Human labels live in a store of their own over the same engine
(:class:`LabelStore`; :meth:`QualityLedger.record_labels` and
:meth:`QualityLedger.labels` delegate to it).
The schema is managed by Alembic: :func:`upgrade`, :func:`current_revision`,
:func:`head_revision`. ``docs/ledger.md`` documents every table.
"""

from __future__ import annotations

from llm_connect.ledger import (
    _models_chat,  # noqa: F401 - registers its tables with Base.metadata
    _models_embeddings,  # noqa: F401 - registers its tables with Base.metadata
    _models_fleet,  # noqa: F401 - registers its tables with Base.metadata
    _models_labels,  # noqa: F401 - registers its tables with Base.metadata
    _models_sampling,  # noqa: F401 - registers its tables with Base.metadata
)
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
from llm_connect.ledger._sampling import GradedCase, SampledCase, SamplingDesign, SamplingStore
from llm_connect.ledger._store import QualityLedger

__all__ = [
    "DEFAULT_URL",
    "ENV_VAR",
    "CalibrationRow",
    "CaseSeries",
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
    "SamplingDesign",
    "SamplingStore",
    "StabilityResponseRow",
    "StabilityRow",
    "SummaryRow",
    "current_revision",
    "head_revision",
    "upgrade",
]
