"""Instability fingerprints (root causes) and their recommendations.

The seven fingerprints of the Ruvrics seed, each raised by one rule over the
metrics' variance classes (all thresholds live in
:class:`~llm_connect.stability.StabilityConfig`):

=============================  ========  ====================================================
fingerprint                    severity  raised when
=============================  ========  ====================================================
NONDETERMINISTIC_TOOL_ROUTING  HIGH      tool variance HIGH and some runs call tools, some not
TOOL_CONFUSION                 HIGH      tool variance HIGH and the runs that call tools call
                                         different tools or arguments
UNCONSTRAINED_ASSERTIONS       CRITICAL  claim variance HIGH (claims in 20-80% of runs)
UNDERSPECIFIED_PROMPT          MEDIUM    semantic variance HIGH, structural LOW, no tool
                                         fingerprint (tool changes explain meaning changes)
FORMAT_INCONSISTENCY           MEDIUM    structural variance HIGH
VERBOSITY_DRIFT                LOW       length variance HIGH, no tool or format fingerprint
                                         (those change the length by themselves)
GENERAL_INSTABILITY            HIGH      semantic HIGH and structural not LOW (no tool
                                         fingerprint), or the verdict is not SAFE and no
                                         other fingerprint explains it
=============================  ========  ====================================================

Fingerprints are listed most serious first (CRITICAL, HIGH, MEDIUM, LOW; ties in
the table's order), each with concrete recommendations.
"""

from __future__ import annotations

from llm_connect.stability._config import Verdict
from llm_connect.stability._report import ClaimSummary, Fingerprint, MetricResult, Recommendation, Severity

__all__ = ["FINGERPRINTS", "identify_fingerprints", "recommendations_for"]

FINGERPRINTS: tuple[str, ...] = (
    "NONDETERMINISTIC_TOOL_ROUTING",
    "TOOL_CONFUSION",
    "UNCONSTRAINED_ASSERTIONS",
    "UNDERSPECIFIED_PROMPT",
    "FORMAT_INCONSISTENCY",
    "VERBOSITY_DRIFT",
    "GENERAL_INSTABILITY",
)
"""Every fingerprint name, in rule order."""

_DESCRIPTIONS = {
    "NONDETERMINISTIC_TOOL_ROUTING": "The model inconsistently decides whether to call a tool.",
    "TOOL_CONFUSION": "The model calls different tools, or the same tools with different arguments.",
    "UNCONSTRAINED_ASSERTIONS": "The model makes risky claims in some runs and not in others.",
    "UNDERSPECIFIED_PROMPT": "The format is stable but the meaning varies: the prompt leaves too much open.",
    "FORMAT_INCONSISTENCY": "The output format (JSON, Markdown, code, list, prose) is not reliably enforced.",
    "VERBOSITY_DRIFT": "Response length varies significantly while the rest is stable.",
    "GENERAL_INSTABILITY": "Several sources of variation at once; no single cause dominates.",
}

_SEVERITY_ORDER = {"CRITICAL": 0, "HIGH": 1, "MEDIUM": 2, "LOW": 3}

_R = Recommendation
_RECOMMENDATIONS: dict[str, tuple[Recommendation, ...]] = {
    "NONDETERMINISTIC_TOOL_ROUTING": (
        _R(
            "Make the tool call mandatory",
            "config",
            "Send tool_choice 'required' (or name the function) for requests that must use the tool, "
            "so the model no longer decides whether to call it.",
            '{"tool_choice": {"type": "function", "function": {"name": "{tool}"}}}',
        ),
        _R(
            "Route in code, not in the model",
            "code",
            "Decide with a rule or a classifier whether the request needs {tool}, call it yourself and give "
            "the model the result to phrase the answer.",
            "if needs_lookup(query):\n    result = {tool}(**extract_args(query))",
        ),
        _R(
            "State when to use the tool",
            "prompt",
            "Add an explicit rule to the system prompt naming the requests that always go through {tool}.",
            '"For any question about X, ALWAYS call {tool}. Never answer it from memory."',
        ),
    ),
    "TOOL_CONFUSION": (
        _R(
            "Disambiguate the tool descriptions",
            "prompt",
            "Rewrite each tool's description to say exactly when to use it and when not, and describe every "
            "argument with its format and default.",
            '"search_orders: look up an order by its id. Use ONLY when the user gives an order id."',
        ),
        _R(
            "Offer fewer tools per request",
            "code",
            "Filter the tool list by the request's intent before calling the model, so it chooses between "
            "fewer, clearly different functions.",
        ),
        _R(
            "Pin argument values",
            "code",
            "Normalise arguments (defaults, case, units) before executing a call, and validate them against "
            "the tool's JSON schema with strict mode on.",
        ),
    ),
    "UNCONSTRAINED_ASSERTIONS": (
        _R(
            "Forbid guarantees and absolute promises",
            "prompt",
            "Tell the model never to guarantee outcomes and to use qualified language instead.",
            "\"Never promise or guarantee results. Say 'usually', 'typically' or 'may' instead.\"",
        ),
        _R(
            "Forbid unverifiable authority and specifics",
            "prompt",
            "Tell the model not to claim endorsements, access to systems or research it does not have, and "
            "not to state figures or dates that are not in the provided context.",
            '"Only state numbers, dates and sources that appear in the context. '
            "Otherwise say you don't know.\"",
        ),
        _R(
            "Check answers for risky claims",
            "code",
            "Scan responses for guarantee and authority phrases before they reach a user, and regenerate or "
            "escalate when one is found.",
        ),
    ),
    "UNDERSPECIFIED_PROMPT": (
        _R(
            "Add three to five example answers",
            "prompt",
            "Show worked examples of correct answers so the model converges on one interpretation.",
            "Q: <example question>\nA: <the answer you want>",
        ),
        _R(
            "Give the answer a template",
            "prompt",
            "Spell out the structure and content every answer must have (what to state first, what to "
            "include, what to leave out).",
            '"Answer in this order: 1. the direct answer, 2. one reason, 3. the next step."',
        ),
        _R(
            "Lower the temperature",
            "config",
            "Run at temperature 0 (and a fixed seed where the provider supports one).",
        ),
    ),
    "FORMAT_INCONSISTENCY": (
        _R(
            "Enforce the format with structured output",
            "config",
            "Request response_format json_schema (strict) or json_object when the answer must be JSON.",
            '{"response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": true, '
            '"schema": {...}}}}',
        ),
        _R(
            "Show the exact format",
            "prompt",
            "Put one complete example of the expected output in the system prompt and say not to deviate "
            "from it (no prose around JSON, no Markdown unless asked).",
        ),
        _R(
            "Validate and retry",
            "code",
            "Parse every answer; when it is not in the expected format, retry once with the parse error in "
            "the conversation.",
        ),
    ),
    "VERBOSITY_DRIFT": (
        _R(
            "State a length limit",
            "prompt",
            "Give an explicit bound on the answer's length.",
            '"Answer in at most three sentences (under 80 words)."',
        ),
        _R(
            "Cap the tokens",
            "config",
            "Set max_tokens to a little above the length you want, so long answers cannot run on.",
        ),
    ),
    "GENERAL_INSTABILITY": (
        _R(
            "Constrain the prompt",
            "prompt",
            "Add examples, an answer template and explicit negative instructions; then re-run the analysis "
            "to see which metric still varies.",
        ),
        _R(
            "Lower the temperature",
            "config",
            "Run at temperature 0 (and a fixed seed where the provider supports one).",
        ),
    ),
}


def recommendations_for(name: str, *, tool: str | None = None) -> tuple[Recommendation, ...]:
    """The recommendations of fingerprint ``name``; ``{tool}`` becomes the tool's name."""
    tool_name = tool or "the tool"
    return tuple(
        Recommendation(
            r.title,
            r.category,
            r.action.replace("{tool}", tool_name),
            r.example.replace("{tool}", tool or "my_tool"),
        )
        for r in _RECOMMENDATIONS[name]
    )


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def identify_fingerprints(
    *,
    semantic: MetricResult,
    tool: MetricResult,
    structural: MetricResult,
    length: MetricResult,
    claims: ClaimSummary,
    verdict: Verdict,
    tool_sets_among_callers: int,
) -> tuple[Fingerprint, ...]:
    """The fingerprints the metrics show, most serious first (empty when nothing varies).

    ``tool_sets_among_callers`` is the number of distinct tool-call multisets among the
    runs that called at least one tool.
    """
    found: list[tuple[str, Severity, str]] = []
    usage = float(tool.details.get("tool_usage_rate", 0.0))
    per_tool = tool.details.get("runs_per_tool") or {}
    tool_name = next(iter(per_tool), None)  # the tool most runs call

    if tool.variance == "HIGH" and 0.0 < usage < 1.0:
        found.append(
            (
                "NONDETERMINISTIC_TOOL_ROUTING",
                "HIGH",
                f"tools called in {_pct(usage)} of runs; tool consistency {_pct(tool.score)}",
            )
        )
    if tool.variance == "HIGH" and tool_sets_among_callers > 1:
        found.append(
            (
                "TOOL_CONFUSION",
                "HIGH",
                f"{tool_sets_among_callers} different sets of tool calls among the runs that call tools",
            )
        )
    tool_found = bool(found)
    if claims.variance == "HIGH":
        found.append(
            (
                "UNCONSTRAINED_ASSERTIONS",
                "CRITICAL",
                f"risky claims in {_pct(claims.share)} of runs ({claims.runs_with_claims} runs)",
            )
        )
    if semantic.variance == "HIGH" and not tool_found:
        if structural.variance == "LOW":
            found.append(
                (
                    "UNDERSPECIFIED_PROMPT",
                    "MEDIUM",
                    f"semantic consistency {_pct(semantic.score)} with a stable format",
                )
            )
        else:
            found.append(
                (
                    "GENERAL_INSTABILITY",
                    "HIGH",
                    f"semantic consistency {_pct(semantic.score)} and structural "
                    f"consistency {_pct(structural.score)}",
                )
            )
    format_found = structural.variance == "HIGH"
    if format_found:
        counts = structural.details.get("counts", {})
        mix = ", ".join(f"{k} {v}" for k, v in counts.items())
        found.append(
            (
                "FORMAT_INCONSISTENCY",
                "MEDIUM",
                f"structural consistency {_pct(structural.score)} ({mix})",
            )
        )
    if length.variance == "HIGH" and not tool_found and not format_found:
        d = length.details
        found.append(
            (
                "VERBOSITY_DRIFT",
                "LOW",
                f"length CV {d.get('cv', 0.0):.2f} ({d.get('min_words')}-{d.get('max_words')} words)",
            )
        )
    if not found and verdict != "SAFE":
        weakest = min((semantic, tool, structural, length), key=lambda m: m.score)
        found.append(
            (
                "GENERAL_INSTABILITY",
                "HIGH",
                f"verdict {verdict} with no single dominant cause; weakest metric {weakest.name} "
                f"({_pct(weakest.score)})",
            )
        )
    order = {name: i for i, name in enumerate(FINGERPRINTS)}
    found.sort(key=lambda f: (_SEVERITY_ORDER[f[1]], order[f[0]]))
    return tuple(
        Fingerprint(
            name,
            severity,
            _DESCRIPTIONS[name],
            evidence,
            recommendations_for(name, tool=tool_name),
        )
        for name, severity, evidence in found
    )
