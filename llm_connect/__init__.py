"""llm-connect: is the cheaper or newer candidate model as good as the baseline?

Grade a candidate against a baseline on your prompts (:class:`PairedGrader`),
keep every grade in SQL (:class:`~llm_connect.ledger.QualityLedger`), and
route on the evidence (:class:`~llm_connect.routing.Router`).

``import llm_connect`` is cheap: it never imports torch, sentence-transformers
or openai.
"""

from __future__ import annotations

from llm_connect._version import __version__
from llm_connect.errors import LLMConnectError
from llm_connect.grading import (
    ExactMatchJudge,
    GradingResult,
    Judge,
    PairedGrader,
)
from llm_connect.types import BudgetTracker, LLMResponse, RunConfig, ToolCall, Usage

__all__ = [
    "BudgetTracker",
    "ExactMatchJudge",
    "GradingResult",
    "Judge",
    "LLMConnectError",
    "LLMResponse",
    "PairedGrader",
    "RunConfig",
    "ToolCall",
    "Usage",
    "__version__",
]
