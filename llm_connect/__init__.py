"""llm-connect: is the cheaper or newer candidate model as good as the baseline?

Grade a candidate against a baseline on your prompts (:class:`PairedGrader`),
keep every grade in SQL (:class:`QualityLedger`, from ``llm_connect.ledger``), and
route on the evidence (:class:`Router`, from ``llm_connect.routing``).

``import llm_connect`` is cheap: it never imports torch, sentence-transformers
or openai, and the names below load on first use (so ``llm_connect.cli`` or
``llm_connect.ledger`` imported alone loads no grading code).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_connect._version import __version__

if TYPE_CHECKING:
    from llm_connect.errors import LLMConnectError
    from llm_connect.grading import ExactMatchJudge, GradingResult, Judge, PairedGrader
    from llm_connect.ledger import QualityLedger
    from llm_connect.routing import Router
    from llm_connect.types import BudgetTracker, LLMResponse, RunConfig, ToolCall, Usage

__all__ = [
    "BudgetTracker",
    "ExactMatchJudge",
    "GradingResult",
    "Judge",
    "LLMConnectError",
    "LLMResponse",
    "PairedGrader",
    "QualityLedger",
    "Router",
    "RunConfig",
    "ToolCall",
    "Usage",
    "__version__",
]

_LAZY = {
    "LLMConnectError": "llm_connect.errors",
    "QualityLedger": "llm_connect.ledger",
    "Router": "llm_connect.routing",
    **dict.fromkeys(("ExactMatchJudge", "GradingResult", "Judge", "PairedGrader"), "llm_connect.grading"),
    **dict.fromkeys(("BudgetTracker", "LLMResponse", "RunConfig", "ToolCall", "Usage"), "llm_connect.types"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
