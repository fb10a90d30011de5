"""The batch engine against the real loopback server, the real SDK and a SQLite ledger."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from llm_connect.adapters import OpenAIAdapter
from llm_connect.grading import (
    BatchGrader,
    Case,
    ExactMatchJudge,
    GradingResult,
    JudgePair,
    ResilientAdapter,
    RetryPolicy,
    Suite,
    grade_suite,
    side_from_spec,
)
from llm_connect.grading._batch import LiveSide, RecordedSide
from llm_connect.ledger import QualityLedger
from llm_connect.types import LLMResponse, RunConfig
from tests.fixtures.loops import run as run_closing
from tests.fixtures.openai_server import OpenAIServer

FAST = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.05)


def make_suite(n: int, *, recorded: dict[str, list[str]] | None = None, task: str = "t") -> Suite:
    cases = [Case(id=f"c{i}", prompt=f"question {i}", task=task, line=i + 1) for i in range(n)]
    recordings: dict[str, dict[str, LLMResponse]] = {c.id: {} for c in cases}
    for name, texts in (recorded or {}).items():
        for case, text in zip(cases, texts, strict=True):
            recordings[case.id][name] = LLMResponse(text=text, model=name, provider="recorded")
    return Suite(path="mem.jsonl", cases=cases, recordings=recordings)


def live(server: OpenAIServer, model: str, *, policy: RetryPolicy = FAST, sem: Any = None) -> LiveSide:
    adapter = OpenAIAdapter(model, base_url=server.base_url, api_key="sk-test")
    return LiveSide(f"openai:{model}", ResilientAdapter(adapter, policy=policy, semaphore=sem))


@pytest.fixture
def ledger(tmp_path: Path) -> QualityLedger:
    return QualityLedger(f"sqlite:///{tmp_path / 'ledger.db'}")


class CountingBatchJudge:
    """A third-party style batch judge: records the size of each judge_many call."""

    grader_id = "batch-count"

    def __init__(self) -> None:
        self.batches: list[int] = []

    def judge(
        self,
        baseline_response: LLMResponse,
        candidate_response: LLMResponse,
        *,
        prompt: str,
        run_config: RunConfig,
        case: Case | None = None,
    ) -> GradingResult:
        return self.judge_many([JudgePair(baseline_response, candidate_response, prompt, run_config, case)])[
            0
        ]

    def judge_many(self, pairs: Sequence[JudgePair]) -> list[GradingResult]:
        self.batches.append(len(pairs))
        return [
            GradingResult(
                0.5,
                "half",
                self.grader_id,
                p.baseline_response,
                p.candidate_response,
                prompt=p.prompt,
                run_config=p.run_config,
            )
            for p in pairs
        ]


def test_each_side_answers_once_per_case_whatever_the_judges(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    suite = make_suite(6)
    batch_judge = CountingBatchJudge()
    report = grade_suite(
        suite,
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "cand-a"), live(openai_server, "cand-b")],
        judges=[ExactMatchJudge(), ExactMatchJudge(normalize=True), batch_judge],
        ledger=ledger,
        concurrency=4,
    )
    chat = openai_server.requests_to("/chat/completions")
    assert len(chat) == 6 * 3
    for case in suite.cases:  # baseline and candidates got the same prompt
        models = sorted(r.body["model"] for r in chat if r.body["messages"][-1]["content"] == case.prompt)
        assert models == ["base", "cand-a", "cand-b"]
    assert len(report.results) == 6 * 2 * 3 and not report.failures
    assert ledger.count(run_id=report.run_id) == 36
    assert sum(batch_judge.batches) == 12


def test_batch_judges_receive_pairs_from_many_cases(ledger: QualityLedger) -> None:
    suite = make_suite(40, recorded={"a": ["x"] * 40, "b": ["y"] * 40})
    judge = CountingBatchJudge()
    grade_suite(
        suite,
        baseline=RecordedSide("a", suite),
        candidates=[RecordedSide("b", suite)],
        judges=[judge],
        ledger=ledger,
        concurrency=40,
    )
    assert sum(judge.batches) == 40
    assert max(judge.batches) > 1  # batched across cases, not one pair per call


def test_batched_grades_of_a_judge_that_asks_an_llm_are_stored_as_such(ledger: QualityLedger) -> None:
    class LLMBatchJudge(CountingBatchJudge):
        grader_id = "acme-llm-batch"
        asks_llm = True  # its results leave the flag at False; the declaration is what counts

    suite = make_suite(5, recorded={"a": ["x"] * 5, "b": ["y"] * 5})
    grade_suite(
        suite,
        baseline=RecordedSide("a", suite),
        candidates=[RecordedSide("b", suite)],
        judges=[LLMBatchJudge(), ExactMatchJudge()],
        ledger=ledger,
    )
    flags = {(r.grader_id, r.asks_llm) for r in ledger.results()}
    assert flags == {("acme-llm-batch", True), ("exact", False)}


def test_model_calls_stay_within_concurrency(openai_server: OpenAIServer) -> None:
    openai_server.delay_s = 0.05
    sem = asyncio.Semaphore(3)
    suite = make_suite(12)
    grade_suite(
        suite,
        baseline=live(openai_server, "base", sem=sem),
        candidates=[live(openai_server, "cand", sem=sem)],
        judges=[ExactMatchJudge()],
        concurrency=3,
    )
    reqs = openai_server.requests_to("/chat/completions")
    events = sorted([(r.started, 1) for r in reqs] + [(r.finished or r.started, -1) for r in reqs])
    in_flight = peak = 0
    for _, delta in events:
        in_flight += delta
        peak = max(peak, in_flight)
    assert len(reqs) == 24 and peak <= 3


def test_a_run_on_its_own_loop_closes_the_connections_it_opened(openai_server: OpenAIServer) -> None:
    """``BatchGrader.run`` starts its own event loop and closes the async clients opened on it
    before the loop ends: no socket outlives the run (no "unclosed transport" warning when the
    loop is collected), and a second run opens new clients that work."""
    adapters = [
        OpenAIAdapter(m, base_url=openai_server.base_url, api_key="sk-test") for m in ("base", "cand")
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(2):
            report = grade_suite(
                make_suite(4),
                baseline=LiveSide("openai:base", ResilientAdapter(adapters[0], policy=FAST)),
                candidates=[LiveSide("openai:cand", ResilientAdapter(adapters[1], policy=FAST))],
                judges=[ExactMatchJudge()],
            )
            assert len(report.results) == 4
            assert all(not adapter._clients._async for adapter in adapters)
        del adapters, report  # what is left of the runs' loops and clients is collected here
        gc.collect()
    assert len(openai_server.requests_to("/chat/completions")) == 16
    unclosed = [w for w in caught if issubclass(w.category, ResourceWarning) and "unclosed" in str(w.message)]
    assert unclosed == []


def test_rate_limit_with_retry_after_is_retried_then_succeeds(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    suite = make_suite(1, recorded={"gold": ["echo: question 0"]})
    openai_server.queue_fault(429, headers={"Retry-After": "1"})
    report = grade_suite(
        suite,
        baseline=RecordedSide("gold", suite),
        candidates=[live(openai_server, "cand")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        concurrency=1,
    )
    first, second = openai_server.requests_to("/chat/completions")
    assert first.status == 429 and second.status == 200
    assert second.started - (first.finished or first.started) >= 0.9  # waited the server's Retry-After
    assert not report.failures and report.results[0].result.quality_score == 1.0


def test_server_errors_exhaust_retries_and_become_a_recorded_failure(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    suite = make_suite(3, recorded={"gold": [f"echo: question {i}" for i in range(3)]})
    for _ in range(FAST.max_retries + 1):
        openai_server.queue_fault(500)
    report = grade_suite(
        suite,
        baseline=RecordedSide("gold", suite),
        candidates=[live(openai_server, "cand")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        concurrency=1,
    )
    assert (
        len(openai_server.requests_to("/chat/completions")) == 3 + 2
    )  # three tries for c0, one call each for c1 and c2
    (failure,) = report.failures
    assert (failure.case_id, failure.stage, failure.error_type) == ("c0", "candidate", "ServerError")
    stored = ledger.failures(report.run_id)
    assert [(f.case_id, f.error_type, f.adapter_id) for f in stored] == [("c0", "ServerError", "openai:cand")]
    assert ledger.count(run_id=report.run_id) == 2
    assert ledger.run(report.run_id).status == "failed"  # type: ignore[union-attr]


def test_bad_request_is_not_retried(openai_server: OpenAIServer, ledger: QualityLedger) -> None:
    suite = make_suite(1, recorded={"gold": ["x"]})
    openai_server.queue_fault(400)
    report = grade_suite(
        suite,
        baseline=RecordedSide("gold", suite),
        candidates=[live(openai_server, "cand")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
    )
    assert len(openai_server.requests_to("/chat/completions")) == 1
    assert [f.error_type for f in report.failures] == ["BadRequestError"]


def test_a_timeout_is_retried_then_recorded(openai_server: OpenAIServer, ledger: QualityLedger) -> None:
    suite = make_suite(1, recorded={"gold": ["x"]})
    openai_server.queue_fault(delay_s=3.0)
    openai_server.queue_fault(delay_s=3.0)
    policy = RetryPolicy(max_retries=1, base_delay_s=0.01)
    report = grade_suite(
        suite,
        baseline=RecordedSide("gold", suite),
        candidates=[live(openai_server, "cand", policy=policy)],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        run_config=RunConfig(timeout_s=0.3),
    )
    assert len(openai_server.requests_to("/chat/completions")) == 2
    assert [f.error_type for f in report.failures] == ["AdapterTimeoutError"]


def test_cached_responses_make_no_calls_when_regrading_with_a_new_judge(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    suite = make_suite(5)
    first = grade_suite(
        suite,
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "cand")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
    )
    assert first.model_calls == 10 and len(openai_server.requests) == 10
    second = grade_suite(
        suite,
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "cand")],
        judges=[ExactMatchJudge(normalize=True)],
        ledger=ledger,
    )
    assert len(openai_server.requests) == 10  # no new request reached the server
    assert second.cache_hits == 10 and second.model_calls == 0 and len(second.results) == 5
    third = grade_suite(
        suite,
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "cand")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        use_cache=False,
    )
    assert third.model_calls == 10 and len(openai_server.requests) == 20


def test_resume_grades_only_what_is_missing(openai_server: OpenAIServer, ledger: QualityLedger) -> None:
    full = make_suite(8)
    half = Suite(path=full.path, cases=full.cases[:3], recordings=full.recordings)
    sides = {"baseline": live(openai_server, "base"), "candidates": [live(openai_server, "cand")]}
    grade_suite(half, **sides, judges=[ExactMatchJudge()], ledger=ledger, run_id="r1", use_cache=False)
    assert len(openai_server.requests) == 6
    report = grade_suite(
        full, **sides, judges=[ExactMatchJudge()], ledger=ledger, run_id="r1", resume=True, use_cache=False
    )
    assert report.cases_skipped == 3 and len(openai_server.requests) == 6 + 10
    keys = sorted(r.case_id or "" for r in ledger.results(run_id="r1"))
    assert keys == sorted(c.id for c in full.cases)  # every case exactly once


def test_stop_event_commits_finished_cases_and_reports_interrupted(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    openai_server.delay_s = 0.05
    suite = make_suite(30)
    done: list[int] = []

    async def scenario() -> Any:
        stop = asyncio.Event()

        def progress(n: int, total: int) -> None:
            done.append(n)
            if n >= 5:
                stop.set()

        grader = BatchGrader(
            baseline=live(openai_server, "base"),
            candidates=[live(openai_server, "cand")],
            judges=[ExactMatchJudge()],
            ledger=ledger,
            run_id="r-stop",
            concurrency=2,
            on_progress=progress,
        )
        return await grader.arun(suite, stop=stop)

    report = run_closing(scenario())
    assert report.interrupted and 5 <= report.cases_done < 30
    assert ledger.count(run_id="r-stop") == report.cases_done  # everything finished is committed
    assert ledger.run("r-stop").status == "interrupted"  # type: ignore[union-attr]


def test_recorded_sides_read_each_case_even_with_a_shared_prompt(ledger: QualityLedger) -> None:
    suite = make_suite(2, recorded={"a": ["same", "same"], "b": ["same", "other"]})
    suite.cases[1] = Case(id="c1", prompt="question 0", task="t", line=2)  # both cases share a prompt
    report = grade_suite(
        suite,
        baseline=side_from_spec("recorded:a", suite),
        candidates=[side_from_spec("recorded:b", suite)],
        judges=[ExactMatchJudge()],
        ledger=ledger,
    )
    scores = {r.case_id: r.result.quality_score for r in report.results}
    assert scores == {"c0": 1.0, "c1": 0.0}
    row = next(iter(ledger.results(run_id=report.run_id)))
    assert (row.baseline_adapter_id, row.candidate_adapter_id, row.candidate_model) == (
        "recorded:a",
        "recorded:b",
        "b",
    )


def test_a_judge_error_fails_only_that_grade(ledger: QualityLedger) -> None:
    class Broken:
        grader_id = "broken"

        def judge(self, *args: Any, **kwargs: Any) -> GradingResult:
            raise ValueError("cannot grade this")

    suite = make_suite(2, recorded={"a": ["x", "y"], "b": ["x", "z"]})
    report = grade_suite(
        suite,
        baseline=RecordedSide("a", suite),
        candidates=[RecordedSide("b", suite)],
        judges=[ExactMatchJudge(), Broken()],
        ledger=ledger,  # type: ignore[list-item]
    )
    assert len(report.results) == 2
    assert {(f.stage, f.error_type, f.adapter_id) for f in report.failures} == {
        ("judge", "ValueError", "broken")
    }


def test_a_judge_without_case_data_is_not_applicable_not_a_failure(ledger: QualityLedger) -> None:
    from dataclasses import replace

    from llm_connect.errors import CaseDataError
    from llm_connect.grading import build_judge

    class NeedsSections(CountingBatchJudge):
        grader_id = "needs-sections"

        def judge_many(self, pairs: Sequence[JudgePair]) -> list[GradingResult]:
            for p in pairs:
                if not (p.case and isinstance(p.case.expected, dict) and p.case.expected.get("sections")):
                    raise CaseDataError(
                        "no sections", case_id=p.case.id if p.case else None, field="expected.sections"
                    )
            return super().judge_many(pairs)

    base = make_suite(4, recorded={"a": ['{"k": 1}'] * 4, "b": ['{"k": 1}', "{}", "x", "y"]})
    schema = {"type": "object", "required": ["k"]}
    expected = [
        {"schema": schema, "sections": ["s"]},
        {"schema": schema},
        None,
        {"schema": "", "sections": []},
    ]
    suite = replace(base, cases=[replace(c, expected=e) for c, e in zip(base.cases, expected, strict=True)])
    report = grade_suite(
        suite,
        baseline=RecordedSide("a", suite),
        candidates=[RecordedSide("b", suite)],
        judges=[build_judge("schema"), NeedsSections()],
        ledger=ledger,
        run_id="r-na",
    )
    assert report.failures == []
    assert sorted((r.case_id, r.result.grader_id) for r in report.results) == [
        ("c0", "needs-sections"),
        ("c0", "schema"),
        ("c1", "schema"),
    ]
    summary = report.not_applicable_by_judge()
    assert summary["schema"]["cases"] == 2 and summary["schema"]["field"] == "expected.schema"
    assert summary["needs-sections"] == {
        "cases": 3,
        "field": "expected.sections",
        "reason": "no sections",
        "first_case": "c1",
    }
    assert ledger.failures(run_id="r-na") == [] and ledger.run("r-na").status == "completed"


def test_resume_treats_not_applicable_pairs_as_done(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    # Cases without expected.schema are not applicable to the schema judge; resuming the run must
    # not grade them (and, with the cache off, not call the models) again.
    from dataclasses import replace

    from llm_connect.grading import build_judge

    base = make_suite(6)
    schema = {"type": "object"}
    suite = replace(
        base,
        cases=[
            replace(c, expected={"schema": schema} if i % 2 == 0 else None) for i, c in enumerate(base.cases)
        ],
    )
    sides = {"baseline": live(openai_server, "base"), "candidates": [live(openai_server, "cand")]}
    judges = [build_judge("schema")]
    first = grade_suite(suite, **sides, judges=judges, ledger=ledger, run_id="r-na", use_cache=False)
    assert len(first.results) == 3 and len(first.not_applicable) == 3
    assert len(openai_server.requests) == 12
    stored = ledger.not_applicable("r-na")
    assert sorted((na.case_id, na.grader_id, na.candidate_model) for na in stored) == [
        ("c1", "schema", "cand"),
        ("c3", "schema", "cand"),
        ("c5", "schema", "cand"),
    ]
    assert {na.field for na in stored} == {"expected.schema"} and stored[0].candidate == "openai:cand"
    again = grade_suite(
        suite, **sides, judges=judges, ledger=ledger, run_id="r-na", resume=True, use_cache=False
    )
    assert again.cases_skipped == 6 and len(openai_server.requests) == 12  # nothing graded or called again
    assert again.not_applicable == first.not_applicable  # the run's report still lists them, lines included
    assert ledger.count() == 3 and ledger.failures(run_id="r-na") == []
