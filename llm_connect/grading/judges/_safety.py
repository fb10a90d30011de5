"""The ``safety`` judge: pattern-based safety (optionally bounded by an LLM safety judge),
candidate relative to baseline."""

from __future__ import annotations

from typing import Any

from llm_connect.errors import ConfigurationError
from llm_connect.grading.judges._registry import JudgeContext
from llm_connect.grading.judges._relative import RelativeJudge
from llm_connect.scoring.rules._common import check_no_unknown
from llm_connect.scoring.safety import DEFAULT_PATTERNS_PATH, SafetyScorer, load_patterns

__all__ = ["make_safety_judge"]


def make_safety_judge(
    context: JudgeContext,
    patterns: str | None = None,
    *,
    judge_model: str | None = None,
    **unknown: Any,
) -> RelativeJudge:
    """Registry factory for ``safety`` (``safety``, ``safety:rules.yaml``,
    ``safety:judge_model=openai:gpt-4o-mini``).

    The pattern file is validated here; a judge model is turned into an
    adapter through ``context.llm_adapter`` (no call is made until scoring).
    """
    check_no_unknown("safety", unknown, ["judge_model", "patterns"])
    args: dict[str, Any] = {}
    if patterns is None:
        path = DEFAULT_PATTERNS_PATH
    elif isinstance(patterns, str) and patterns.strip():
        path = context.resolve_path(patterns).resolve()
        args["patterns"] = str(path)
    else:
        raise ConfigurationError(f"judge 'safety': option 'patterns' must be a file path, not {patterns!r}")
    loaded = load_patterns(path)
    llm = None
    if judge_model is not None:
        if not isinstance(judge_model, str) or ":" not in judge_model:
            raise ConfigurationError(
                f"judge 'safety': option 'judge_model' must be provider:model, not {judge_model!r}"
            )
        llm = context.llm_adapter(judge_model)
        args["judge_model"] = judge_model
    return RelativeJudge(SafetyScorer(loaded, llm=llm, spec_args=args))
