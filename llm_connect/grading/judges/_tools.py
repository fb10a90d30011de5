"""ToolCallJudge: the candidate's tool calls against the baseline's (``--judge tools``).

Arguments are compared as parsed JSON: key order and whitespace never matter,
numbers compare by value (``1 == 1.0``; ``true`` is not ``1``), strings compare
exactly (case and whitespace inside a string count). Arguments that are not
valid JSON are compared as their raw text, so they equal only the identical
invalid text. :func:`tool_calls_match` (used by ``exact`` too) and
:func:`match_tool_calls` read calls this way.

Partial credit, per baseline call paired with a candidate call of the same
function (calls are matched as a multiset, order ignored)::

    same function, equal arguments       1.0
    same function, different arguments   argument_credit (0.5 by default)
    missing, extra or wrong function     0.0

    score = sum of the pairs' credits / max(baseline calls, candidate calls)

so an extra call lowers the score as a missing one does. Neither side calling a
tool is agreement (1.0); one side calling tools while the other only answers in
text is 0.0. The pairing maximises the total credit: within each function, as
many calls as possible are paired with a call whose arguments are equal (for
equal-or-not credit this counting is an optimal assignment), and the remaining
calls of that function are paired in the order they were made.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from llm_connect.errors import CaseDataError, ConfigurationError
from llm_connect.grading._protocols import JudgePair, judge_spec
from llm_connect.grading.judges._base import BaseJudge, Scored
from llm_connect.grading.judges._registry import JudgeContext
from llm_connect.types import ToolCall

__all__ = [
    "DEFAULT_ARGUMENT_CREDIT",
    "CallMatch",
    "ToolCallJudge",
    "call_key",
    "make_tools_judge",
    "match_tool_calls",
    "tool_calls_match",
]

DEFAULT_ARGUMENT_CREDIT = 0.5
"""Credit for a call of the right function with different arguments."""

_NOTE_VALUE_CHARS = 40


def _canonical(value: Any) -> Hashable:
    """A hashable form of parsed JSON in which equal values are equal.

    Objects ignore key order; numbers compare by value (``1`` and ``1.0`` are
    one key, ``True`` is not ``1``); NaN equals NaN; strings compare exactly.
    """
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return ("nan",)
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if value is None:
        return ("null",)
    if isinstance(value, list):
        return ("array", tuple(_canonical(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _canonical(v)) for k, v in value.items()))
    raise TypeError(f"not a JSON value: {type(value).__name__}")  # pragma: no cover - json.loads only


def _parse(call: ToolCall) -> tuple[bool, Any]:
    """``(True, parsed arguments)``, or ``(False, raw text)`` when they are not valid JSON."""
    try:
        return True, call.parsed_arguments()
    except ValueError:
        return False, call.arguments


def call_key(call: ToolCall) -> Hashable:
    """What identifies a call for comparison: its name and its arguments as parsed JSON.

    Arguments that are not valid JSON are keyed by their raw text (they equal
    only the identical text, never a valid argument object).
    """
    valid, arguments = _parse(call)
    return (call.name, _canonical(arguments) if valid else ("invalid-json", arguments))


def tool_calls_match(baseline: Sequence[ToolCall], candidate: Sequence[ToolCall]) -> bool:
    """Whether both sides made the same calls: the same multiset of (name, parsed arguments)."""
    return Counter(map(call_key, baseline)) == Counter(map(call_key, candidate))


@dataclass(frozen=True)
class CallMatch:
    """One line of the comparison: a pair of calls of one function, or an unpaired call."""

    function: str
    """The function's name."""
    status: str
    """``match`` (equal arguments), ``arguments_differ``, ``missing`` (the candidate made
    no such call) or ``extra`` (the baseline made no such call)."""
    credit: float
    """What this line adds to the score's numerator."""
    baseline: ToolCall | None
    """The baseline's call (``None`` for an extra call)."""
    candidate: ToolCall | None
    """The candidate's call (``None`` for a missing call)."""

    def candidate_arguments_invalid(self) -> bool:
        """Whether the candidate's arguments are not valid JSON."""
        return self.candidate is not None and not _parse(self.candidate)[0]

    def differences(self) -> list[str]:
        """How the arguments differ, for the notes (empty unless ``arguments_differ``)."""
        if self.status != "arguments_differ" or self.baseline is None or self.candidate is None:
            return []
        b_valid, b_args = _parse(self.baseline)
        c_valid, c_args = _parse(self.candidate)
        if not c_valid:
            return ["candidate arguments are not valid JSON"]
        if not b_valid:
            return ["baseline arguments are not valid JSON (compared as text)"]
        if not (isinstance(b_args, dict) and isinstance(c_args, dict)):
            return [f"{_short(b_args)} vs {_short(c_args)}"]
        found: list[str] = []
        for key in b_args:
            if key not in c_args:
                found.append(f"{key} missing")
            elif _canonical(b_args[key]) != _canonical(c_args[key]):
                found.append(f"{key} {_short(b_args[key])} vs {_short(c_args[key])}")
        found.extend(f"{key} not in the baseline" for key in c_args if key not in b_args)
        return found

    def note(self) -> str:
        """One clause of the notes, e.g. ``refund: arguments differ (order_id 42 vs 43)``."""
        if self.status == "match":
            return f"{self.function}: same arguments"
        if self.status == "missing":
            return f"{self.function}: not called by the candidate"
        if self.status == "extra":
            return f"{self.function}: not called by the baseline"
        return f"{self.function}: arguments differ ({', '.join(self.differences())})"

    def to_dict(self) -> dict[str, Any]:
        """The machine-readable form stored in ``details["calls"]``."""
        return {
            "function": self.function,
            "status": self.status,
            "credit": self.credit,
            "baseline_arguments": None if self.baseline is None else self.baseline.arguments,
            "candidate_arguments": None if self.candidate is None else self.candidate.arguments,
            "candidate_arguments_invalid": self.candidate_arguments_invalid(),
            "differences": self.differences(),
        }


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _NOTE_VALUE_CHARS else text[: _NOTE_VALUE_CHARS - 1] + "…"


def match_tool_calls(
    baseline: Sequence[ToolCall],
    candidate: Sequence[ToolCall],
    *,
    argument_credit: float = DEFAULT_ARGUMENT_CREDIT,
) -> list[CallMatch]:
    """Pair the candidate's calls with the baseline's so the total credit is largest.

    Returns one :class:`CallMatch` per pair and per unpaired call: pairs in the
    order of the baseline's calls, then the candidate's extra calls in their order.
    """
    by_name_b: dict[str, list[int]] = defaultdict(list)
    by_name_c: dict[str, list[int]] = defaultdict(list)
    for i, call in enumerate(baseline):
        by_name_b[call.name].append(i)
    for j, call in enumerate(candidate):
        by_name_c[call.name].append(j)
    keys_b = [call_key(c) for c in baseline]
    keys_c = [call_key(c) for c in candidate]

    partner: dict[int, int] = {}  # baseline index -> candidate index
    for name, b_indices in by_name_b.items():
        free_c = list(by_name_c.get(name, ()))
        # Equal arguments first: equality is an equivalence, so pairing greedily
        # within each equal-key class pairs as many equal calls as possible.
        unpaired_b: list[int] = []
        for i in b_indices:
            equal = next((j for j in free_c if keys_c[j] == keys_b[i]), None)
            if equal is None:
                unpaired_b.append(i)
            else:
                partner[i] = equal
                free_c.remove(equal)
        for i, j in zip(unpaired_b, free_c, strict=False):
            partner[i] = j

    lines: list[CallMatch] = []
    for i, call in enumerate(baseline):
        found = partner.get(i)
        if found is None:
            lines.append(CallMatch(call.name, "missing", 0.0, call, None))
        elif keys_b[i] == keys_c[found]:
            lines.append(CallMatch(call.name, "match", 1.0, call, candidate[found]))
        else:
            lines.append(CallMatch(call.name, "arguments_differ", argument_credit, call, candidate[found]))
    paired = set(partner.values())
    lines.extend(
        CallMatch(call.name, "extra", 0.0, None, call) for j, call in enumerate(candidate) if j not in paired
    )
    return lines


def _validate_credit(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ConfigurationError(f"tools: argument_credit must be a number in 0..1, not {value!r}")
    return float(value)


class ToolCallJudge(BaseJudge):
    """Grades the candidate's tool calls against the baseline's (the response text is ignored).

    Calls are matched as a multiset by function name; arguments are compared as
    parsed JSON (see the module docstring for the rules). Per paired call: 1.0
    for equal arguments, ``argument_credit`` (default 0.5) for different ones
    (candidate arguments that are not valid JSON count as different), 0.0 for a
    missing, extra or wrong-function call; the score is the sum over
    ``max(len(baseline calls), len(candidate calls))``. Neither side calling a
    tool scores 1.0 (note "neither side called a tool") when the case offers
    tools (both rightly declined); for a suite case that offers none it raises
    :class:`~llm_connect.errors.CaseDataError` on field ``tools``, which the batch
    engine records as not applicable (a text-only suite never looks perfect on
    ``tools``). Tool calls on one side only score 0.0.

    ``details`` holds ``calls`` (one entry per pair or unpaired call: function,
    status, credit, both raw argument texts, ``candidate_arguments_invalid``,
    ``differences``), ``baseline_calls`` and ``candidate_calls`` (counts),
    ``argument_credit`` and ``judge_spec``.
    """

    asks_llm = False
    """Comparing parsed JSON gives the grade; no LLM is asked."""

    def __init__(self, *, argument_credit: float = DEFAULT_ARGUMENT_CREDIT) -> None:
        self.argument_credit = _validate_credit(argument_credit)
        self.grader_id = (
            "tools"
            if self.argument_credit == DEFAULT_ARGUMENT_CREDIT
            else f"tools:argument_credit={self.argument_credit:g}"
        )

    def __repr__(self) -> str:
        return f"ToolCallJudge(argument_credit={self.argument_credit})"

    def score(self, pair: JudgePair) -> Scored:
        """Score the candidate's tool calls against the baseline's."""
        baseline, candidate = pair.baseline_response.tool_calls, pair.candidate_response.tool_calls
        lines = match_tool_calls(baseline, candidate, argument_credit=self.argument_credit)
        case = pair.case
        if not baseline and not candidate:
            if case is not None and (case.conversation is None or not case.conversation.tools):
                raise CaseDataError(
                    f"case {case.id!r} offers no tools and neither side called one: "
                    "the tools judge does not apply",
                    case_id=case.id,
                    field="tools",
                )
            score, notes = 1.0, "neither side called a tool"
        else:
            score = sum(line.credit for line in lines) / max(len(baseline), len(candidate))
            notes = "; ".join(line.note() for line in lines)
            if not baseline:
                notes = f"the baseline called no tool; {notes}"
            elif not candidate:
                notes = f"the candidate called no tool; {notes}"
        details: dict[str, Any] = {
            "calls": [line.to_dict() for line in lines],
            "baseline_calls": len(baseline),
            "candidate_calls": len(candidate),
            "argument_credit": self.argument_credit,
            "judge_spec": judge_spec("tools", asks_llm=self.asks_llm, argument_credit=self.argument_credit),
        }
        return Scored(min(1.0, score), notes, details)


def make_tools_judge(
    context: JudgeContext, *, argument_credit: float = DEFAULT_ARGUMENT_CREDIT
) -> ToolCallJudge:
    """Registry factory for ``tools`` (``tools:argument_credit=0.25`` changes the partial credit)."""
    return ToolCallJudge(argument_credit=argument_credit)
