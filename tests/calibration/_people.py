"""A small world for calibrating judges against people (issue 22, item 3).

Every case has a baseline and a candidate answer with a known true quality
(:data:`TRUTH`) and a *kind* that says how the scripted judge model behind the
loopback server answers it: ``first`` (always "A": the answer shown first wins),
``second`` (always "B"), ``tie``, ``quality`` (the truly better answer, wherever it
is shown) or ``longer`` (the longer answer, wherever it is shown). The judge is
the real :class:`~llm_connect.grading.PairwiseJudge` talking HTTP to that server;
people's labels are made here and stored with ``QualityLedger.record_labels``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_connect.adapters import OpenAIAdapter
from llm_connect.grading import PairwiseJudge
from llm_connect.labels import HumanLabel
from llm_connect.ledger import QualityLedger
from llm_connect.types import LLMResponse, RunConfig
from llm_connect.values import GradingResult

TASK = "qa"
BASELINE = "gpt-4o"
CANDIDATE = "okapi-small"
JUDGE_MODEL = "judge-model"
TRUTH_ID = "truth:v1"
"""A non-LLM reference that grades by the known truth: 1.0 candidate better, 0.0 baseline, 0.5 tie."""

TRUTH: dict[str, float] = {}
KIND: dict[str, str] = {}
"""Prompt -> how the scripted judge answers that case."""


@dataclass(frozen=True)
class PeopleCase:
    index: int
    kind: str
    prompt: str
    baseline: str
    candidate: str

    @property
    def case_id(self) -> str:
        return f"q{self.index:03d}"

    @property
    def better(self) -> str:
        qb, qc = TRUTH[self.baseline], TRUTH[self.candidate]
        return "candidate" if qc > qb else "baseline" if qb > qc else "tie"


def make_cases(kinds: Sequence[str], better: Sequence[str], *, long_candidate: Sequence[bool] | None = None,
               start: int = 0) -> list[PeopleCase]:  # fmt: skip
    """One case per kind; ``better[i]`` says which answer is truly better; the candidate's answer
    is the longer one where ``long_candidate[i]`` (default: every other case)."""
    cases = []
    for i, (kind, best) in enumerate(zip(kinds, better, strict=True)):
        n = start + i
        longer = (n % 2 == 0) if long_candidate is None else long_candidate[i]
        base = f"Baseline answer {n}: " + "detail " * (4 if longer else 12)
        cand = f"Candidate answer {n}: " + "point " * (12 if longer else 4)
        TRUTH[base] = 0.5
        TRUTH[cand] = {"candidate": 0.9, "baseline": 0.1, "tie": 0.5}[best]
        prompt = f"Question {n}: what should I do?"
        KIND[prompt] = kind
        cases.append(PeopleCase(n, kind, prompt, base, cand))
    return cases


_FENCE = re.compile(r"<<<BEGIN (\w+) (\w+)>>>\n(.*?)\n<<<END \1 \2>>>", re.DOTALL)


def shown(body: Mapping[str, Any]) -> dict[str, str]:
    """``{PROMPT, ANSWER_A, ANSWER_B: text}`` of a pairwise judge request."""
    return {m.group(1): m.group(3) for m in _FENCE.finditer(body["messages"][-1]["content"])}


def responder(body: Mapping[str, Any]) -> dict[str, str]:
    """The scripted judge model: its verdict as the case's kind says."""
    f = shown(body)
    a, b = f["ANSWER_A"], f["ANSWER_B"]
    kind = KIND[f["PROMPT"]]
    if kind in ("first", "second", "tie"):
        verdict = {"first": "A", "second": "B", "tie": "tie"}[kind]
    elif kind == "quality":
        verdict = "A" if TRUTH[a] > TRUTH[b] else "B" if TRUTH[b] > TRUTH[a] else "tie"
    elif kind == "longer":
        verdict = "A" if len(a) > len(b) else "B" if len(b) > len(a) else "tie"
    else:
        raise AssertionError(kind)
    return {"notes": f"{kind} judge", "verdict": verdict}


def pairwise_judge(base_url: str, **options: Any) -> PairwiseJudge:
    return PairwiseJudge(OpenAIAdapter(JUDGE_MODEL, base_url=base_url, api_key="sk-test-people"), **options)


def _response(text: str, model: str) -> LLMResponse:
    return LLMResponse(
        text=text, model=model, provider="openai", cost_usd=0.01 if model == BASELINE else 0.001
    )


def grade(
    ledger: QualityLedger, judge: PairwiseJudge, cases: Iterable[PeopleCase], *, run_id: str = "r1"
) -> None:
    """Grade every case with the pairwise judge and record the grades."""
    for c in cases:
        result = judge.judge(
            _response(c.baseline, BASELINE),
            _response(c.candidate, CANDIDATE),
            prompt=c.prompt,
            run_config=RunConfig(temperature=0.0),
        )
        ledger.record(result, task=TASK, run_id=run_id, case_id=c.case_id)


def grade_truth(ledger: QualityLedger, cases: Iterable[PeopleCase], *, run_id: str = "r1") -> None:
    """Record the non-LLM reference's grades (:data:`TRUTH_ID`) of the same pairs."""
    for c in cases:
        score = {"candidate": 1.0, "baseline": 0.0, "tie": 0.5}[c.better]
        result = GradingResult(
            quality_score=score,
            notes="truth",
            grader_id=TRUTH_ID,
            baseline_response=_response(c.baseline, BASELINE),
            candidate_response=_response(c.candidate, CANDIDATE),
            details={},
            prompt=c.prompt,
            run_config=RunConfig(temperature=0.0),
        )
        ledger.record(result, task=TASK, run_id=run_id, case_id=c.case_id)


def label(
    ledger: QualityLedger,
    verdicts: Mapping[str, str],
    *,
    annotators: Sequence[str] = ("ana", "bo"),
    replace: bool = False,
) -> None:
    """Every annotator labels each case (case id -> preference) the same way."""
    ledger.record_labels(
        [
            HumanLabel(TASK, case_id, CANDIDATE, who, preference=pref)
            for case_id, pref in verdicts.items()
            for who in annotators
        ],
        replace=replace,
    )
