"""Stopping early: ``BatchGrader(shuffle_seed=..., settled=..., check_every=...)``.

Live sides talk to the loopback OpenAI server (its recorded requests prove which
model calls were made); the ledger is SQLite. ``settled`` callables here read the
ledger, as a real one does, so they also show that each check runs after the commit
of every case finished before it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import Any

import pytest

from llm_connect.adapters import OpenAIAdapter
from llm_connect.errors import ConfigurationError
from llm_connect.grading import BatchGrader, Case, ExactMatchJudge, GradingResult, RetryPolicy, Suite
from llm_connect.grading._batch import LiveSide, RecordedSide
from llm_connect.ledger import QualityLedger
from llm_connect.types import LLMResponse, RunConfig
from tests.fixtures.loops import run as run_closing
from tests.fixtures.openai_server import OpenAIServer, default_reply

FAST = RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.05)


def make_suite(n: int, *, tasks: tuple[str, ...] = ("t",), recorded: tuple[str, ...] = ()) -> Suite:
    cases = [
        Case(id=f"c{i}", prompt=f"question {i}", task=tasks[i % len(tasks)], line=i + 1) for i in range(n)
    ]
    recordings = {
        c.id: {name: LLMResponse(text=f"{name} {c.id}", model=name, provider="recorded") for name in recorded}
        for c in cases
    }
    return Suite(path="mem.jsonl", cases=cases, recordings=recordings)


def live(server: OpenAIServer, model: str) -> LiveSide:
    return LiveSide(f"openai:{model}", OpenAIAdapter(model, base_url=server.base_url, api_key="sk-test"))


def calls(server: OpenAIServer) -> Counter[str]:
    """Chat requests the server received, per requested model."""
    return Counter(r.body["model"] for r in server.requests_to("/chat/completions"))


def prompts_of(server: OpenAIServer, model: str) -> list[str]:
    return [
        r.body["messages"][-1]["content"]
        for r in server.requests_to("/chat/completions")
        if r.body["model"] == model
    ]


def committed_cases(ledger: QualityLedger, run_id: str) -> int:
    return len({r.case_id for r in ledger.results(run_id=run_id)})


class SettleAfter:
    """A ``settled`` check: once ``after`` cases of the run are committed, ``pairs`` are settled.

    ``seen`` holds the committed case count each call found.
    """

    def __init__(self, ledger: QualityLedger, run_id: str, after: int, pairs: set[tuple[str, str]]) -> None:
        self.ledger, self.run_id, self.after, self.pairs = ledger, run_id, after, pairs
        self.seen: list[int] = []

    def __call__(self) -> set[tuple[str, str]]:
        n = committed_cases(self.ledger, self.run_id)
        self.seen.append(n)
        return set(self.pairs) if n >= self.after else set()


class OrderJudge(ExactMatchJudge):
    """An exact-match judge that records the order in which cases are judged."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[str] = []

    def judge(
        self,
        baseline_response: LLMResponse,
        candidate_response: LLMResponse,
        *,
        prompt: str,
        run_config: RunConfig,
        case: Case | None = None,
    ) -> GradingResult:
        assert case is not None
        self.order.append(case.id)
        return super().judge(
            baseline_response, candidate_response, prompt=prompt, run_config=run_config, case=case
        )


@pytest.fixture
def ledger(sqlite_url: str) -> QualityLedger:
    return QualityLedger(sqlite_url)


# -- the seeded order ------------------------------------------------------------------------


def test_seeded_order_is_deterministic_and_not_the_file_order() -> None:
    suite = make_suite(30, recorded=("a", "b"))

    def order(seed: int | None) -> list[str]:
        judge = OrderJudge()
        BatchGrader(
            baseline=RecordedSide("a", suite),
            candidates=[RecordedSide("b", suite)],
            judges=[judge],
            concurrency=1,
            shuffle_seed=seed,
        ).run(suite)
        return judge.order

    file_order = [c.id for c in suite.cases]
    shuffled = list(suite.cases)
    random.Random(7).shuffle(shuffled)
    assert order(7) == order(7) == [c.id for c in shuffled]
    assert order(7) != file_order and sorted(order(7)) == sorted(file_order)
    assert order(8) != order(7)
    assert order(None) == file_order  # the default keeps the file order


def test_a_bad_shuffle_seed_or_check_every_is_refused(ledger: QualityLedger) -> None:
    suite = make_suite(2, recorded=("a", "b"))
    sides: dict[str, Any] = {
        "baseline": RecordedSide("a", suite),
        "candidates": [RecordedSide("b", suite)],
        "judges": [ExactMatchJudge()],
    }
    with pytest.raises(ConfigurationError, match="shuffle_seed"):
        BatchGrader(**sides, shuffle_seed="7")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="check_every"):
        BatchGrader(**sides, ledger=ledger, settled=set, check_every=0)
    with pytest.raises(ConfigurationError, match="needs a ledger"):
        BatchGrader(**sides, settled=set)


# -- stopping a settled candidate ------------------------------------------------------------


def test_a_settled_candidate_is_no_longer_called_and_the_report_says_so_exactly(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    suite = make_suite(40)
    check = SettleAfter(ledger, "r-settle", 10, {("t", "openai:bad")})
    report = BatchGrader(
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "good"), live(openai_server, "bad")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        run_id="r-settle",
        concurrency=1,
        settled=check,
    ).run(suite)
    # Asked before the first case, then after every 10 committed cases; not after the last one.
    assert check.seen == [0, 10, 20, 30]
    assert calls(openai_server) == {"base": 40, "good": 40, "bad": 10}
    assert report.stopped == {"openai:bad": {"t": 30}}
    assert report.calls_saved == 30
    assert report.model_calls == 90 and report.cases_settled_skipped == 0
    assert report.cases_done == report.cases_total == 40 and not report.failures
    assert ledger.count(run_id="r-settle", candidate_model="good") == 40  # the other one goes on
    assert ledger.count(run_id="r-settle", candidate_model="bad") == 10
    assert {r.candidate for r in report.results} == {"openai:good", "openai:bad"}
    assert ledger.run("r-settle").status == "completed"  # type: ignore[union-attr]


def test_cases_in_flight_when_a_candidate_settles_finish_and_are_recorded(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    slow = {"question 10", "question 11", "question 12"}

    def respond(body: dict[str, Any]) -> str:
        if body["messages"][-1]["content"] in slow:
            time.sleep(0.5)  # still in flight when the 10th case is committed and checked
        return default_reply(body)

    openai_server.responder = respond
    suite = make_suite(40)
    check = SettleAfter(ledger, "r-flight", 10, {("t", "openai:bad")})
    report = BatchGrader(
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "good"), live(openai_server, "bad")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        run_id="r-flight",
        concurrency=4,
        settled=check,
    ).run(suite)
    assert check.seen[:2] == [0, 10]  # bad settled on the ten fast cases
    # c10-c12 had started (and called bad) before the check answered: they finish and are
    # recorded; no case started after it calls bad.
    assert sorted(prompts_of(openai_server, "bad")) == sorted(f"question {i}" for i in range(13))
    assert ledger.count(run_id="r-flight", candidate_model="bad") == 13
    assert {r.case_id for r in ledger.results(run_id="r-flight", candidate_model="bad")} == {
        f"c{i}" for i in range(13)
    }
    assert report.stopped == {"openai:bad": {"t": 27}} and report.calls_saved == 27
    assert calls(openai_server) == {"base": 40, "good": 40, "bad": 13}
    assert report.cases_done == 40 and not report.failures


def test_concurrent_runs_count_every_case_exactly_once(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    openai_server.delay_s = 0.01
    suite = make_suite(60)
    check = SettleAfter(ledger, "r-conc", 10, {("t", "openai:bad")})
    report = BatchGrader(
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "good"), live(openai_server, "bad")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        run_id="r-conc",
        concurrency=8,
        shuffle_seed=3,
        settled=check,
    ).run(suite)
    bad = calls(openai_server)["bad"]
    assert 10 <= bad < 60 and calls(openai_server)["good"] == 60
    assert ledger.count(run_id="r-conc", candidate_model="bad") == bad  # every call recorded
    assert report.stopped == {"openai:bad": {"t": 60 - bad}} and report.calls_saved == 60 - bad
    # Each look follows the commit of every case handed to the writer before it.
    assert check.seen[0] == 0 and all(n >= 10 * i for i, n in enumerate(check.seen))


def test_a_case_whose_every_candidate_is_settled_is_not_started(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    suite = make_suite(40, tasks=("a", "b"))  # c0, c2... task a; c1, c3... task b
    check = SettleAfter(ledger, "r-whole", 10, {("a", "openai:cand")})
    progress: list[tuple[int, int]] = []
    report = BatchGrader(
        baseline=live(openai_server, "base"),
        candidates=[live(openai_server, "cand")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        run_id="r-whole",
        concurrency=1,
        settled=check,
        on_progress=lambda done, total: progress.append((done, total)),
    ).run(suite)
    # The first 10 cases (5 of each task) are graded; then task a's 15 others are not started.
    skipped = {f"question {i}" for i in range(10, 40, 2)}
    assert not skipped & set(prompts_of(openai_server, "base"))  # no baseline call either
    assert calls(openai_server) == {"base": 25, "cand": 25}
    assert report.cases_settled_skipped == 15 and report.cases_done == 25 and report.cases_total == 40
    assert report.stopped == {"openai:cand": {"a": 15}}
    assert report.calls_saved == 30  # the candidate's and the baseline's call of each skipped case
    assert progress[-1] == (25, 25)  # the total shrinks by the skipped cases: a bar ends full
    assert committed_cases(ledger, "r-whole") == 25 and not ledger.failures("r-whole")
    assert ledger.run("r-whole").status == "completed"  # type: ignore[union-attr]


def test_settled_responses_in_the_cache_are_not_counted_as_saved_calls(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    suite = make_suite(20)

    def grade(run_id: str, **kw: Any) -> Any:
        return BatchGrader(
            baseline=live(openai_server, "base"),
            candidates=[live(openai_server, "cand")],
            judges=[ExactMatchJudge()],
            ledger=ledger,
            run_id=run_id,
            **kw,
        ).run(suite)

    first = grade("r-fill")  # fills the response cache
    assert len(openai_server.requests) == 40 and first.calls_saved == 0
    always = SettleAfter(ledger, "r-cached", 0, {("t", "openai:cand")})
    cached = grade("r-cached", settled=always)
    assert always.seen == [0]  # settled before the first case: nothing committed, nothing to re-check
    assert cached.cases_settled_skipped == 20 and cached.stopped == {"openai:cand": {"t": 20}}
    assert cached.calls_saved == 0  # every skipped response was cached: no call was spared
    uncached = grade(
        "r-uncached", settled=SettleAfter(ledger, "r-uncached", 0, {("t", "openai:cand")}), use_cache=False
    )
    assert uncached.calls_saved == 40 and uncached.cases_settled_skipped == 20
    assert len(openai_server.requests) == 40  # neither run called the server


# -- failures, resume, stop ------------------------------------------------------------------


def test_an_error_in_the_check_stops_the_run_after_committing_and_resume_continues_in_order(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    suite = make_suite(30)
    looks: list[int] = []

    def broken() -> set[tuple[str, str]]:
        looks.append(committed_cases(ledger, "r-err"))
        if len(looks) == 2:
            raise RuntimeError("evidence store unreachable")
        return set()

    grader: dict[str, Any] = {
        "baseline": live(openai_server, "base"),
        "candidates": [live(openai_server, "cand")],
        "judges": [ExactMatchJudge()],
        "ledger": ledger,
        "run_id": "r-err",
        "concurrency": 1,
        "shuffle_seed": 11,
        "use_cache": False,
    }
    with pytest.raises(RuntimeError, match="unreachable") as info:
        BatchGrader(**grader, settled=broken).run(suite)
    assert looks == [0, 10]
    assert any("r-err" in note for note in getattr(info.value, "__notes__", []))
    assert committed_cases(ledger, "r-err") == 10  # no case started after the error; none lost
    assert len(openai_server.requests) == 20
    assert ledger.run("r-err").status == "failed"  # type: ignore[union-attr]

    shuffled = list(suite.cases)
    random.Random(11).shuffle(shuffled)
    first = prompts_of(openai_server, "base")
    assert first == [c.prompt for c in shuffled[:10]]
    openai_server.reset()
    report = BatchGrader(**grader, resume=True, settled=set).run(suite)
    assert report.cases_skipped == 10 and report.cases_done == 30
    assert prompts_of(openai_server, "base") == [c.prompt for c in shuffled[10:]]  # the same order, resumed
    assert committed_cases(ledger, "r-err") == 30


def test_a_candidate_named_by_its_model_is_refused(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    suite = make_suite(5)
    with pytest.raises(ConfigurationError, match="'openai:cand'"):
        BatchGrader(
            baseline=live(openai_server, "base"),
            candidates=[live(openai_server, "cand")],
            judges=[ExactMatchJudge()],
            ledger=ledger,
            settled=lambda: {("t", "cand")},
        ).run(suite)
    assert not openai_server.requests


def test_resume_skips_a_settled_candidate_still_missing_grades(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    suite = make_suite(10)
    sides: dict[str, Any] = {
        "baseline": live(openai_server, "base"),
        "judges": [ExactMatchJudge()],
        "ledger": ledger,
        "run_id": "r-res",
        "use_cache": False,
    }
    BatchGrader(**sides, candidates=[live(openai_server, "good")]).run(suite)
    openai_server.reset()
    # Resuming with a second candidate that is settled from the start: nothing left to grade.
    report = BatchGrader(
        **sides,
        candidates=[live(openai_server, "good"), live(openai_server, "new")],
        resume=True,
        settled=lambda: {("t", "openai:new")},
    ).run(suite)
    assert not openai_server.requests
    assert report.cases_settled_skipped == 10 and report.cases_skipped == 0
    assert report.stopped == {"openai:new": {"t": 10}}
    assert report.calls_saved == 30  # base, good and new on each case: none was asked


def test_stop_still_interrupts_a_run_that_stops_early(
    openai_server: OpenAIServer, ledger: QualityLedger
) -> None:
    openai_server.delay_s = 0.02
    suite = make_suite(40)

    async def scenario() -> Any:
        stop = asyncio.Event()

        def progress(done: int, total: int) -> None:
            if done >= 15:
                stop.set()

        return await BatchGrader(
            baseline=live(openai_server, "base"),
            candidates=[live(openai_server, "good"), live(openai_server, "bad")],
            judges=[ExactMatchJudge()],
            ledger=ledger,
            run_id="r-stop",
            concurrency=2,
            settled=SettleAfter(ledger, "r-stop", 10, {("t", "openai:bad")}),
            on_progress=progress,
        ).arun(suite, stop=stop)

    report = run_closing(scenario())
    assert report.interrupted and 15 <= report.cases_done < 40
    assert committed_cases(ledger, "r-stop") == report.cases_done
    assert (
        ledger.count(run_id="r-stop", candidate_model="bad")
        <= calls(openai_server)["bad"]
        < report.cases_done
    )
    assert ledger.run("r-stop").status == "interrupted"  # type: ignore[union-attr]


# -- the default -----------------------------------------------------------------------------


def _default_run(server: OpenAIServer, ledger: QualityLedger, run_id: str, **kw: Any) -> Any:
    progress: list[tuple[int, int]] = []
    report = BatchGrader(
        baseline=live(server, "base"),
        candidates=[live(server, "good"), live(server, "bad")],
        judges=[ExactMatchJudge()],
        ledger=ledger,
        run_id=run_id,
        concurrency=1,
        use_cache=False,
        on_progress=lambda d, t: progress.append((d, t)),
        **kw,
    ).run(make_suite(25))
    return report, progress


def test_without_settled_nothing_changes(openai_server: OpenAIServer, ledger: QualityLedger) -> None:
    report, progress = _default_run(openai_server, ledger, "r-default")
    assert calls(openai_server) == {"base": 25, "good": 25, "bad": 25}
    assert prompts_of(openai_server, "base") == [f"question {i}" for i in range(25)]  # file order
    assert report.stopped == {} and report.calls_saved == 0 and report.cases_settled_skipped == 0
    assert report.cases_done == 25 and progress[0] == (0, 25) and progress[-1] == (25, 25)
    assert ledger.count(run_id="r-default") == 50

    # A check that never settles anything changes nothing either (and is asked 3 times).
    openai_server.reset()
    looks: list[int] = []

    def never() -> set[tuple[str, str]]:
        looks.append(0)
        return set()

    again, progress2 = _default_run(openai_server, ledger, "r-never", settled=never)
    assert calls(openai_server) == {"base": 25, "good": 25, "bad": 25}
    assert len(looks) == 3 and progress2 == progress
    assert [(r.case_id, r.candidate, r.result.quality_score) for r in again.results] == [
        (r.case_id, r.candidate, r.result.quality_score) for r in report.results
    ]
