"""The ``safety`` judge: pattern-based safety (optionally bounded by an LLM safety judge),
candidate relative to baseline."""

from __future__ import annotations

from typing import Any

from llm_connect._structured import check_format_option
from llm_connect.errors import ConfigurationError
from llm_connect.grading.judges._options import check_no_unknown
from llm_connect.grading.judges._registry import JudgeContext
from llm_connect.grading.judges._relative import RelativeJudge
from llm_connect.scoring.safety import DEFAULT_PATTERNS_PATH, SafetyScorer, load_patterns

__all__ = ["make_safety_judge"]


def make_safety_judge(
    context: JudgeContext,
    patterns: str | None = None,
    *,
    judge_model: str | None = None,
    response_format: str | None = None,
    **unknown: Any,
) -> RelativeJudge:
    """Registry factory for ``safety`` (``safety``, ``safety:rules.yaml``,
    ``safety:judge_model=openai:gpt-4o-mini``,
    ``safety:judge_model=openai:gemma,response_format=json_object``).

    The pattern file is validated here; a judge model is turned into an
    adapter through ``context.llm_adapter`` (no call is made until scoring).
    ``response_format`` (with ``judge_model`` only) pins the safety judge's
    structured-output mode: ``auto`` (the ladder, default), ``json_schema``,
    ``json_object_schema``, ``json_object`` or ``text``; a pinned mode is stored
    in the judge's spec.
    """
    check_no_unknown("safety", unknown, ["judge_model", "patterns", "response_format"])
    pinned = check_format_option(response_format, what="judge 'safety'")
    if pinned is not None and judge_model is None:
        raise ConfigurationError(
            "judge 'safety': option 'response_format' applies to the LLM safety judge; give judge_model too"
        )
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
    if pinned is not None:
        args["response_format"] = pinned
    return RelativeJudge(SafetyScorer(loaded, llm=llm, spec_args=args, response_format=pinned))
