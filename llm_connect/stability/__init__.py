"""Stability: does a model answer the same request the same way every time?

:func:`analyze` (and :func:`aanalyze`) sends one request N times, concurrently,
and scores the answers as Ruvrics does: semantic consistency (40%), tool
consistency (25%), structural consistency (20%) and length consistency (15%);
SAFE at 0.90 and above, RISKY from 0.70, DO_NOT_SHIP below. The report names the
instability fingerprints with concrete recommendations, counts risky claims per
run, gives the exact-agreement rates of raw texts and parsed answers, and keeps
every run's response. Every weight and threshold is a field of
:class:`StabilityConfig`.

Example::

    from llm_connect.adapters import OpenAIAdapter
    from llm_connect.stability import analyze, load_query
    from llm_connect.types import RunConfig

    report = analyze(OpenAIAdapter("gpt-4o-mini"), load_query("query.json", tools_path="tools.json"),
                     runs=20, run_config=RunConfig(temperature=0.0))
    print(report.verdict, report.score, report.fingerprint_names)

Importing this package loads neither ``openai`` nor ``torch``.
"""

from __future__ import annotations

from llm_connect.stability._analyze import (
    DEFAULT_CONCURRENCY,
    DEFAULT_RUNS,
    MAX_RUNS,
    MIN_RUNS,
    ProgressCallback,
    ResponseCache,
    aanalyze,
    analyze,
    as_conversation,
)
from llm_connect.stability._claims import CLAIM_CATEGORIES, claim_counts
from llm_connect.stability._config import METRICS, StabilityConfig, Variance, Verdict
from llm_connect.stability._fingerprint import FINGERPRINTS
from llm_connect.stability._input import StabilityQuery, load_query, load_tools, query_from_dict
from llm_connect.stability._metrics import STRUCTURES, detect_structure, normalized_answer, tool_signature
from llm_connect.stability._report import (
    REPORT_VERSION,
    AgreementRates,
    ClaimSummary,
    ClaimVariance,
    Fingerprint,
    MetricResult,
    Recommendation,
    RunRecord,
    Severity,
    StabilityReport,
)
from llm_connect.stability._store import StabilityStore, record_report

__all__ = [
    "CLAIM_CATEGORIES",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_RUNS",
    "FINGERPRINTS",
    "MAX_RUNS",
    "METRICS",
    "MIN_RUNS",
    "REPORT_VERSION",
    "STRUCTURES",
    "AgreementRates",
    "ClaimSummary",
    "ClaimVariance",
    "Fingerprint",
    "MetricResult",
    "ProgressCallback",
    "Recommendation",
    "ResponseCache",
    "RunRecord",
    "Severity",
    "StabilityConfig",
    "StabilityQuery",
    "StabilityReport",
    "StabilityStore",
    "Variance",
    "Verdict",
    "aanalyze",
    "analyze",
    "as_conversation",
    "claim_counts",
    "detect_structure",
    "load_query",
    "load_tools",
    "normalized_answer",
    "query_from_dict",
    "record_report",
    "tool_signature",
]
