"""The QualityLedger: every grade in SQL (SQLite by default, PostgreSQL for fleets).

One engine (``_engine.py``; migrations in ``_migrate.py``) and a store per concern
over it, each owning its tables: grades and their running totals (``_grades.py``),
runs, failures, skips and the response cache (``_runs.py``), calibrations
(``_calibrations.py``), routing decisions (``_decisions.py``), conversations and
stability analyses (``_chat.py``), the embedding cache (``_embeddings.py``), shared-run
coordination (``_fleet.py``), human labels (:class:`LabelStore`) and label sampling
(:class:`SamplingStore`). :class:`QualityLedger` is the public entry: it delegates
each method to the store that owns the tables and composes the writes that span
stores in one transaction. The schema is managed by Alembic: :func:`upgrade`,
:func:`current_revision`, :func:`head_revision`. ``docs/ledger.md`` documents every
table and says which module writes and reads it.
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
