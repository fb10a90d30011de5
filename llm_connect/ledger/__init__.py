"""The QualityLedger: every grade in SQL (SQLite by default, PostgreSQL for fleets).

Each name loads its module on first use: a command that reads the grades does not import the
label sampling's numerics or Alembic (``_migrate`` imports it only to migrate).
:func:`resolve_url` says which ledger a URL (or none) names, :func:`display_url` shows it with any
password masked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_connect.ledger._anchors import AnchorCase, AnchorExistsError, AnchorRow, AnchorStore, CheckRow
    from llm_connect.ledger._design import DesignMark, DesignReader, DesignRows, join_rows
    from llm_connect.ledger._engine import DEFAULT_URL, ENV_VAR, display_url, patiently, resolve_url
    from llm_connect.ledger._fleet import FleetStatus, FleetWorkerRow
    from llm_connect.ledger._journal import Journal, JournalEntry, JournalError
    from llm_connect.ledger._labels import LabelCounts, LabelStore, LabelWrite
    from llm_connect.ledger._migrate import current_revision, head_revision, upgrade
    from llm_connect.ledger._patience import when_writable
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
    from llm_connect.ledger._slices import CaseAttributes, SliceStore
    from llm_connect.ledger._store import QualityLedger
    from llm_connect.ledger._watch import WatchStore

__all__ = [
    "DEFAULT_URL",
    "ENV_VAR",
    "AnchorCase",
    "AnchorExistsError",
    "AnchorRow",
    "AnchorStore",
    "CalibrationRow",
    "CaseAttributes",
    "CaseSeries",
    "CheckRow",
    "DesignMark",
    "DesignReader",
    "DesignRows",
    "FailureRow",
    "FleetStatus",
    "FleetWorkerRow",
    "GradeRow",
    "GradeTotals",
    "GradedCase",
    "Journal",
    "JournalEntry",
    "JournalError",
    "LabelCounts",
    "LabelStore",
    "LabelWrite",
    "QualityLedger",
    "RecordItem",
    "RunRow",
    "SampledCase",
    "SamplingStore",
    "SliceStore",
    "StabilityResponseRow",
    "StabilityRow",
    "SummaryRow",
    "WatchStore",
    "current_revision",
    "display_url",
    "head_revision",
    "join_rows",
    "patiently",
    "resolve_url",
    "upgrade",
    "when_writable",
]

_LAZY = {
    **dict.fromkeys(
        ("AnchorCase", "AnchorExistsError", "AnchorRow", "AnchorStore", "CheckRow"),
        "llm_connect.ledger._anchors",
    ),
    **dict.fromkeys(("DesignMark", "DesignReader", "DesignRows", "join_rows"), "llm_connect.ledger._design"),
    **dict.fromkeys(
        ("DEFAULT_URL", "ENV_VAR", "display_url", "patiently", "resolve_url"), "llm_connect.ledger._engine"
    ),
    **dict.fromkeys(("FleetStatus", "FleetWorkerRow"), "llm_connect.ledger._fleet"),
    **dict.fromkeys(("Journal", "JournalEntry", "JournalError"), "llm_connect.ledger._journal"),
    "when_writable": "llm_connect.ledger._patience",
    **dict.fromkeys(("LabelCounts", "LabelStore", "LabelWrite"), "llm_connect.ledger._labels"),
    **dict.fromkeys(("current_revision", "head_revision", "upgrade"), "llm_connect.ledger._migrate"),
    **dict.fromkeys(
        (
            "CalibrationRow",
            "CaseSeries",
            "FailureRow",
            "GradeRow",
            "GradeTotals",
            "RecordItem",
            "RunRow",
            "StabilityResponseRow",
            "StabilityRow",
            "SummaryRow",
        ),
        "llm_connect.ledger._rows",
    ),
    **dict.fromkeys(("GradedCase", "SampledCase", "SamplingStore"), "llm_connect.ledger._sampling"),
    **dict.fromkeys(("CaseAttributes", "SliceStore"), "llm_connect.ledger._slices"),
    "QualityLedger": "llm_connect.ledger._store",
    **dict.fromkeys(("WatchStore",), "llm_connect.ledger._watch"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
