"""PairedGrader (contract: baseline-grading invariant 4 and the one-call-per-side rule)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from llm_connect import BudgetTracker, ExactMatchJudge, LLMResponse, PairedGrader, RunConfig
from llm_connect.adapters import LLMAdapter, RecordedAdapter
from llm_connect.errors import BudgetExceededError, RecordingNotFoundError
from llm_connect.grading import BaselineGrader, Judge


class SpyAdapter:
    """Answers with a fixed text and remembers every (prompt, run_config) it got."""

    def __init__(self, name: str, text: str, delay: float = 0.0) -> None:
        self.adapter_id = f"spy:{name}"
        self.name = name
        self.text = text
        self.delay = delay
        self.calls: list[tuple[str, RunConfig]] = []
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()

    def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        self.calls.append((prompt, run_config))
        return LLMResponse(text=self.text, model=self.name, provider="spy")

    async def acomplete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        self.calls.append((prompt, run_config))
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        await asyncio.sleep(self.delay)
        with self._lock:
            self.active -= 1
        return LLMResponse(text=self.text, model=self.name, provider="spy")


class SpyJudge(ExactMatchJudge):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[LLMResponse, LLMResponse, str, RunConfig]] = []

    def judge(self, baseline_response, candidate_response, *, prompt, run_config, case=None):  # type: ignore[no-untyped-def,override]
        self.seen.append((baseline_response, candidate_response, prompt, run_config))
        return super().judge(
            baseline_response, candidate_response, prompt=prompt, run_config=run_config, case=case
        )


def test_protocols_are_satisfied() -> None:
    assert isinstance(SpyAdapter("b", "x"), LLMAdapter)
    assert isinstance(RecordedAdapter({}), LLMAdapter)
    assert isinstance(ExactMatchJudge(), Judge)
    assert isinstance(PairedGrader(ExactMatchJudge()), BaselineGrader)


def test_both_adapters_get_the_same_prompt_and_run_config_and_judge_gets_both() -> None:
    base, cand = SpyAdapter("gpt-4o", "4"), SpyAdapter("gpt-4o-mini", "four")
    rc = RunConfig(temperature=0.3, max_tokens=20, system_prompt="Be brief.", model_params={"seed": 1})
    judge = SpyJudge()
    result = PairedGrader(judge).grade(base, cand, "What is 2+2?", rc)
    assert base.calls == [("What is 2+2?", rc)]
    assert cand.calls == [("What is 2+2?", rc)]
    assert base.calls[0][1] is cand.calls[0][1]
    ((b, c, prompt, seen_rc),) = judge.seen
    assert (b.text, c.text, prompt, seen_rc) == ("4", "four", "What is 2+2?", rc)
    assert result.baseline_response.model == "gpt-4o"
    assert result.candidate_response.model == "gpt-4o-mini"
    assert result.quality_score == 0.0


def test_grade_with_several_judges_calls_each_adapter_once() -> None:
    base, cand = SpyAdapter("b", "Same"), SpyAdapter("c", "same")
    judges = [ExactMatchJudge(), ExactMatchJudge(normalize=True)]
    results = PairedGrader(judges[0]).grade_with(judges, base, cand, "p", RunConfig())
    assert [r.grader_id for r in results] == ["exact", "exact:normalized"]
    assert [r.quality_score for r in results] == [0.0, 1.0]
    assert len(base.calls) == len(cand.calls) == 1


def test_agrade_runs_the_two_calls_concurrently() -> None:
    shared = SpyAdapter("both", "x", delay=0.05)
    result = asyncio.run(PairedGrader(ExactMatchJudge()).agrade(shared, shared, "p", RunConfig()))
    assert shared.max_active == 2
    assert result.quality_score == 1.0


def test_agrade_with_calls_each_adapter_once() -> None:
    base, cand = SpyAdapter("b", "x"), SpyAdapter("c", "x")
    judges = [ExactMatchJudge(), ExactMatchJudge(normalize=True), SpyJudge()]
    results = asyncio.run(PairedGrader(judges[0]).agrade_with(judges, base, cand, "p", RunConfig()))
    assert len(results) == 3
    assert len(base.calls) == len(cand.calls) == 1


def test_recorded_adapter_replays_and_names_a_missing_prompt() -> None:
    base = RecordedAdapter({"Q": "A"}, model="gpt-4o")
    cand = RecordedAdapter({"Q": "A"}, model="gpt-4o-mini")
    result = PairedGrader(ExactMatchJudge()).grade(base, cand, "Q", RunConfig())
    assert result.quality_score == 1.0
    assert result.candidate_response.model == "gpt-4o-mini"
    with pytest.raises(RecordingNotFoundError, match="no recorded response for prompt 'other'"):
        base.complete("other", RunConfig())


def test_recorded_adapter_from_jsonl(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "rec.jsonl"
    path.write_text(
        '{"prompt": "Q", "text": "A", "latency_ms": 5.0, "cost_usd": 0.001}\n\n'
        '{"prompt": "R", "text": "B", "usage": {"prompt_tokens": 3, "completion_tokens": 1}}\n'
    )
    adapter = RecordedAdapter.from_jsonl(path, model="m")
    assert adapter.complete("Q", RunConfig()).cost_usd == 0.001
    assert adapter.complete("R", RunConfig()).usage.total_tokens == 4  # type: ignore[union-attr]
    path.write_text('{"prompt": "Q", "text": "A"}\n{"prompt": 3}\n')
    with pytest.raises(ValueError, match=r"rec.jsonl:2: field 'prompt'"):
        RecordedAdapter.from_jsonl(path)


def test_budget_tracker_stops_calls_once_spent() -> None:
    tracker = BudgetTracker(max_usd=0.002)
    priced = LLMResponse(text="A", model="m", provider="recorded", cost_usd=0.001)
    adapter = RecordedAdapter({"Q": priced})
    rc = RunConfig(budget_tracker=tracker)
    adapter.complete("Q", rc)
    adapter.complete("Q", rc)
    assert tracker.spent_usd == pytest.approx(0.002)
    with pytest.raises(BudgetExceededError, match="budget exhausted"):
        adapter.complete("Q", rc)
    assert tracker.calls == 2
