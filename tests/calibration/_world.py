"""A small, fully known world for calibration tests.

Every case has a baseline and a candidate response whose true quality is in
:data:`QUALITY` (text -> quality). The reference judge ``oracle`` is a real
:class:`~llm_connect.grading.judges.RelativeJudge` over a scorer that reads that
table; the judge under test is the real :class:`~llm_connect.grading.LLMJudge`
talking to the loopback OpenAI-compatible server, whose responder plays a
judge model that is fair, or biased on purpose (by length, by position, for
its own family).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llm_connect.grading import GradingResult, JudgeContext, register_judge
from llm_connect.grading._protocols import Case
from llm_connect.grading.judges import RelativeJudge
from llm_connect.ledger import QualityLedger
from llm_connect.scoring import Score, relative_quality
from llm_connect.types import LLMResponse, RunConfig, Usage

TASK = "support"
BASELINE_MODEL = "gpt-4o"
JUDGE_MODEL = "gpt-4.1"  # family "gpt", like half the candidates
QUALITY: dict[str, float] = {}
"""True quality of every response text in the world."""


@dataclass
class OracleScorer:
    """Scores a text by its known true quality (the reference judge's scorer)."""

    name: str = "oracle:v1"
    spec: Mapping[str, Any] = field(default_factory=lambda: {"name": "oracle", "args": {}})

    def score(self, text: str, *, prompt: str, case: Case | None = None) -> Score:
        return Score(QUALITY[text])


@register_judge("oracle", summary="test reference: the known true quality of each text")
def make_oracle_judge(context: JudgeContext) -> RelativeJudge:
    return RelativeJudge(OracleScorer())


@dataclass(frozen=True)
class Pair:
    index: int
    prompt: str
    baseline: str
    candidate: str
    candidate_model: str


def make_pairs(n: int = 60, *, seed: int = 0, low: float = 0.2, start: int = 0) -> list[Pair]:
    """``n`` pairs; candidate quality (``low``..1) and length vary independently; even cases are gpt."""
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(start, start + n):
        qb = 0.9
        qc = float(np.round(rng.uniform(low, 1.0), 2))
        base = f"Baseline answer {i}: " + "detail " * int(rng.integers(5, 40))
        cand = f"Candidate answer {i}: " + "point " * int(rng.integers(2, 80))
        QUALITY[base], QUALITY[cand] = qb, qc
        model = "gpt-4o-mini" if i % 2 == 0 else "claude-3-haiku"
        pairs.append(Pair(i, f"Question {i}: how do I reset my password?", base, cand, model))
    return pairs


def response(text: str, model: str) -> LLMResponse:
    return LLMResponse(
        text=text,
        model=model,
        provider="openai",
        usage=Usage(20, len(text.split())),
        cost_usd=0.01 if model == BASELINE_MODEL else 0.001,
        latency_ms=100.0,
    )


def record_oracle(
    ledger: QualityLedger, pairs: list[Pair], *, run_id: str = "run-1", task: str = TASK
) -> None:
    """Record the reference grades (the pairs' first grades, as `llm-connect grade` would)."""
    judge = make_oracle_judge(JudgeContext())
    for p in pairs:
        result = judge.judge(
            response(p.baseline, BASELINE_MODEL),
            response(p.candidate, p.candidate_model),
            prompt=p.prompt,
            run_config=RunConfig(temperature=0.0),
        )
        ledger.record(result, task=task, run_id=run_id, case_id=f"c{p.index}")


_FENCE = re.compile(r"<<<BEGIN (BASELINE|CANDIDATE) (\w+)>>>\n(.*?)\n<<<END \1 \2>>>", re.DOTALL)


def slots(body: Mapping[str, Any]) -> tuple[str, str]:
    """(text in the BASELINE slot, text in the CANDIDATE slot) of a judge request."""
    user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
    found = {name: text for name, _, text in _FENCE.findall(user)}
    return found["BASELINE"], found["CANDIDATE"]


def _fair(base: str, cand: str) -> float:
    return relative_quality(QUALITY[base], QUALITY[cand])


def _family_of(text: str) -> bool:
    """Whether a candidate text came from a gpt model (even case numbers)."""
    match = re.match(r"(?:Baseline|Candidate) answer (\d+):", text)
    return bool(match) and text.startswith("Candidate") and int(match.group(1)) % 2 == 0  # type: ignore[union-attr]


SCORERS: dict[str, Callable[[str, str], float]] = {
    # grades exactly as the reference does
    "fair": _fair,
    # the longer response wins: candidate/baseline length, capped at 1
    "length": lambda b, c: min(1.0, len(c) / len(b)),
    # whatever sits in the candidate slot is marked down by 0.6
    "first": lambda b, c: max(0.0, _fair(b, c) - 0.6),
    # fair, plus 0.3 for candidates of its own (gpt) family
    "self": lambda b, c: min(1.0, _fair(b, c) + (0.3 if _family_of(c) else 0.0)),
}


def judge_responder(mode: str) -> Callable[[dict[str, Any]], str]:
    """A loopback responder playing a judge model of the given ``mode``."""
    scorer = SCORERS[mode]

    def respond(body: dict[str, Any]) -> str:
        base, cand = slots(body)
        return json.dumps({"quality_score": round(scorer(base, cand), 4), "notes": f"{mode} judge"})

    return respond


def llm_judge(base_url: str) -> Any:
    """The real LLMJudge on the loopback server (grader id ``llm:openai:gpt-4.1:rubric-v1``)."""
    from llm_connect.adapters import OpenAIAdapter
    from llm_connect.grading import LLMJudge

    return LLMJudge(OpenAIAdapter(JUDGE_MODEL, base_url=base_url, api_key="sk-test-not-a-secret"))


def as_result(judge: Any, p: Pair) -> GradingResult:
    result: GradingResult = judge.judge(
        response(p.baseline, BASELINE_MODEL),
        response(p.candidate, p.candidate_model),
        prompt=p.prompt,
        run_config=RunConfig(temperature=0.0),
    )
    return result
