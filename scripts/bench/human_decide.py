"""Benchmark: ``Router.decide(target="human")`` with 100,000 graded cases and 2,000 labels per candidate.

The ledger: task ``qa``, one baseline, ``--candidates`` candidates, one judge; ``--cases`` graded
cases per candidate (``record_batch``), every case decided by the label sampler at rate 0.02
(``choose_for_labels``: about 2,000 chosen per candidate) and every chosen case labelled.
Timed in one process, alternating, ``--rounds`` times each:

* **judge**: ``Router.decide(..., target="judge")``, a new Router each time (the case rows read
  and the bounds computed, or the evidence stored by an earlier decision reused);
* **human first-ever**: ``target="human"`` with a new Router and no stored state (before issue
  33, which retired the stored state, the rows ``human-design:*`` of ``evidence_snapshots`` are
  deleted first): the sampled cases joined to their grades, the labels read, the
  prediction-powered bound computed;
* **human new Router**: ``target="human"`` with another new Router after that decision, nothing
  new (before issue 33: the stored arrays and running sums restored; since: a full read);
* **human warm**: the same Router again, nothing changed (the checks, the evidence reused);
* **new Router after a batch**: ``--loop`` times, ``--batch`` new cases graded, decided by the
  sampler and the chosen labelled, then a decision from a new Router (a new process): the stored
  state restored, the new rows read and the bound continued over them;
* **loop**: the routing loop, one Router kept: ``--loop`` batches likewise, then one timed
  decision per target (``judge`` with a Router of its own kept likewise);
* **the normal flow from nothing** (``--flow`` rounds, each on tasks of its own, ``--cases`` graded
  with no sampler run yet): the sampler (``choose_for_labels``, which stores the group's state), a
  **first decision after the sampler** (a new Router, a new process: no label yet), the chosen
  cases' labels written to a JSON Lines file and **imported** (``import_labels``, which brings the
  stored state up to date), and the **first decision after the import** (a new Router); and the
  same with the labels written by ``record_labels`` instead of the import (which leaves the stored
  state as the sampler left it: the decision continues the running sums over every case).

Prints medians and the ratio human / judge.

    python scripts/bench/human_decide.py [--cases 100000] [--candidates 1] [--rounds 7] [--loop 20]
        [--batch 50] [--flow 3] [--url URL]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import inspect, text

from llm_connect.grading import GradingResult
from llm_connect.labels import HumanLabel, choose_for_labels, import_labels, write_labels
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.routing import Router
from llm_connect.types import LLMResponse, RunConfig

GRADER = "pairwise:openai:judge:pairwise-v1"


def grade(ledger: QualityLedger, cases: range, model: str, task: str = "qa") -> None:
    """Grade ``cases`` of ``model`` on ``task`` (``record_batch``, 5,000 a batch)."""
    config = RunConfig(temperature=0.0, max_tokens=64)
    base = LLMResponse(text="b", model="big", provider="openai", latency_ms=1.0, cost_usd=0.01)
    cand = LLMResponse(text="c", model=model, provider="openai", latency_ms=1.0, cost_usd=0.001)
    items = [
        RecordItem(
            GradingResult(
                quality_score=(0.0, 0.5, 1.0, 1.0)[i % 4],
                notes="",
                grader_id=GRADER,
                baseline_response=base,
                candidate_response=cand,
                prompt=f"question {i}",
                run_config=config,
            ),
            task,
            "r1" if task == "qa" else task,  # a grade's key has no task: a run per task
            f"case-{i:06d}",
        )
        for i in cases
    ]
    for start in range(0, len(items), 5000):
        ledger.record_batch(items[start : start + 5000])


PREFS = ("candidate", "tie", "baseline")


def grade_and_label(ledger: QualityLedger, cases: range, model: str) -> int:
    """Grade ``cases`` of ``model``, let the sampler decide them (rate 0.02), label the chosen."""
    grade(ledger, cases, model)
    queue = choose_for_labels(
        ledger, task="qa", candidate=model, grader_id=GRADER, rate=0.02, seed=cases.start
    )
    if queue:
        ledger.record_labels(
            [HumanLabel("qa", c, model, "ana", preference=PREFS[k % 3]) for k, c in enumerate(queue)]
        )
    return len(queue)


def fill(ledger: QualityLedger, cases: int, candidates: list[str]) -> None:
    for model in candidates:
        print(f"{model}: {cases} cases graded, {grade_and_label(ledger, range(cases), model)} labelled")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--candidates", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--loop", type=int, default=20, help="batches of the routing loop")
    parser.add_argument("--batch", type=int, default=50, help="new cases per batch")
    parser.add_argument("--flow", type=int, default=3, help="rounds of the normal flow from nothing")
    parser.add_argument("--only-flow", action="store_true", help="time the normal flow only")
    parser.add_argument("--url", default=None, help="a ledger URL (default: a fresh SQLite file)")
    args = parser.parse_args()
    url = args.url or f"sqlite:///{tempfile.mkdtemp()}/human.db"
    candidates = [f"small-{k}" for k in range(args.candidates)]
    with QualityLedger(url) as ledger:
        if args.only_flow:
            kw_flow: dict[str, Any] = {"baseline": "big", "candidates": candidates[:1], "grader_id": GRADER}
            flow(ledger, args, {**kw_flow, "min_quality": 0.6}, candidates[0])
            return
        t = time.perf_counter()
        fill(ledger, args.cases, candidates)
        print(f"filled in {time.perf_counter() - t:.1f} s")
        if ledger.engine.dialect.name == "postgresql":
            # Statistics, as autovacuum would gather them (a server without it plans the join of
            # 100,000 sampled cases to their grades as a nested loop over every pair).
            with ledger.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("ANALYZE label_sampling")
                conn.exec_driver_sql("ANALYZE case_stats")
                conn.exec_driver_sql("ANALYZE human_labels")
        kw: dict[str, Any] = {
            "baseline": "big",
            "candidates": candidates,
            "grader_id": GRADER,
            "min_quality": 0.6,
        }
        names = ("judge", "human first-ever", "human new Router", "human warm")
        times: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[float]] = {name: [] for name in names}

        def timed(name: str, router: Router, target: str) -> Any:
            """One decision, its wall-clock and CPU time (the CPU time is what a shared machine's
            other jobs do not add to)."""
            t, c = time.perf_counter(), time.process_time()
            decision = router.decide("qa", target=target, **kw)
            times[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
            return decision

        stored_state = "evidence_snapshots" in inspect(ledger.engine).get_table_names()
        last = None
        for _ in range(args.rounds):
            timed("judge", Router(ledger), "judge")
            if stored_state:  # before issue 33: the stored state deleted, for a first-ever read
                with ledger.engine.begin() as conn:
                    conn.execute(text("DELETE FROM evidence_snapshots WHERE settings LIKE 'human-design:%'"))
            first = timed("human first-ever", Router(ledger), "human")
            router = Router(ledger)
            last = timed("human new Router", router, "human")
            assert last.candidates == first.candidates
            timed("human warm", router, "human")
        judge = statistics.median(times["judge"])
        for name, values in times.items():
            med = statistics.median(values)
            print(
                f"{name:26s} median {med * 1000:7.2f} ms  (min {min(values) * 1000:.2f}, CPU median "
                f"{statistics.median(cpu[name]) * 1000:.2f})  x{med / judge:.2f} judge"
            )
        assert last is not None
        print(last.candidates[0].graders[0].why)
        # A new Router (a new process) after each batch: the stored state continued.
        n = args.cases
        name = "new Router after a batch"
        times[name], cpu[name] = [], []
        for _ in range(args.loop):
            for model in candidates:
                grade_and_label(ledger, range(n, n + args.batch), model)
            n += args.batch
            timed(name, Router(ledger), "human")
        fresh = times[name]
        med = statistics.median(fresh)
        print(
            f"{name:26s} median {med * 1000:7.2f} ms  (min {min(fresh) * 1000:.2f}, "
            f"max {max(fresh) * 1000:.2f}, CPU median {statistics.median(cpu[name]) * 1000:.2f})  "
            f"x{med / judge:.2f} judge"
        )
        # The routing loop: one Router per target kept, a batch of new cases and labels before each.
        kept = {"judge": Router(ledger), "human": Router(ledger)}
        for target, router in kept.items():
            router.decide("qa", target=target, **kw)
        loop: dict[str, list[float]] = {"judge": [], "human": []}
        for _ in range(args.loop):
            for model in candidates:
                grade_and_label(ledger, range(n, n + args.batch), model)
            n += args.batch
            for target, router in kept.items():
                t = time.perf_counter()
                last = router.decide("qa", target=target, **kw)
                loop[target].append(time.perf_counter() - t)
        judge_loop = statistics.median(loop["judge"])
        for target, values in loop.items():
            med = statistics.median(values)
            print(
                f"loop {target:6s} median {med * 1000:7.2f} ms  (min {min(values) * 1000:.2f}, max "
                f"{max(values) * 1000:.2f})  x{med / judge:.2f} judge (new Router)  "
                f"x{med / judge_loop:.2f} judge (loop)"
            )
        print(last.candidates[0].graders[0].why)
        if args.flow:
            flow(ledger, args, kw, candidates[0])


def flow(ledger: QualityLedger, args: argparse.Namespace, kw: dict[str, Any], model: str) -> None:
    """The normal flow from nothing, ``--flow`` rounds: grade, the sampler, a first decision, the
    labels imported (or recorded), a first decision after them; each step of a round on tasks
    of its own, with a new Router (a new process) for each decision."""
    names = (
        "sampler (choose_for_labels)",
        "first decision after the sampler",
        "import of the labels",
        "first decision after the import",
        "first decision after record_labels",
    )
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    folder = Path(tempfile.mkdtemp())
    why = ""
    for r in range(args.flow):
        for how in ("import", "record"):
            task = f"flow-{r}-{how}"
            grade(ledger, range(args.cases), model, task)
            t, c = time.perf_counter(), time.process_time()
            queue = choose_for_labels(ledger, task=task, candidate=model, grader_id=GRADER, rate=0.02, seed=r)
            if how == "import":
                times[names[0]].append(time.perf_counter() - t)
                cpu[names[0]].append(time.process_time() - c)
            t, c = time.perf_counter(), time.process_time()
            Router(ledger).decide(task, target="human", **kw)
            if how == "import":
                times[names[1]].append(time.perf_counter() - t)
                cpu[names[1]].append(time.process_time() - c)
            labels = [
                HumanLabel(task, case, model, "ana", preference=PREFS[k % 3]) for k, case in enumerate(queue)
            ]
            t, c = time.perf_counter(), time.process_time()
            if how == "import":
                path = folder / f"{task}.jsonl"
                with path.open("w", encoding="utf-8") as out:
                    write_labels(labels, out)
                import_labels(ledger, path)
                step = names[2]
            else:
                ledger.record_labels(labels)
                step = ""
            if step:
                times[step].append(time.perf_counter() - t)
                cpu[step].append(time.process_time() - c)
            step = names[3] if how == "import" else names[4]
            t, c = time.perf_counter(), time.process_time()
            decision = Router(ledger).decide(task, target="human", **kw)
            times[step].append(time.perf_counter() - t)
            cpu[step].append(time.process_time() - c)
            why = decision.candidates[0].graders[0].why
    for name in names:
        values = times[name]
        print(
            f"{name:36s} median {statistics.median(values) * 1000:8.2f} ms  (min {min(values) * 1000:.2f}, "
            f"max {max(values) * 1000:.2f}, CPU median {statistics.median(cpu[name]) * 1000:.2f})"
        )
    print(why)


if __name__ == "__main__":
    main()
