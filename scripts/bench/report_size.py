"""Benchmark: size and generation time of a static report of 10,000 grades.

A fresh SQLite ledger gets 2 tasks x 2 candidates x 2 judges x 1,250 cases =
10,000 grades through ``QualityLedger.record_batch`` (answers of ~80-120 words,
a few words changed between baseline and candidate, notes, metadata, a tool
call on every tenth case). Then ``write_report`` writes the file twice: with the
default ``max_cases`` (5,000 embedded, worst and best per candidate x judge) and
with every grade embedded (``--max-cases 10000``). Prints size, time and what
was embedded; the target is under 10 MB.

    python scripts/bench/report_size.py [--grades 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.report import write_report
from llm_connect.types import LLMResponse, RunConfig, ToolCall, Usage

WORDS = [
    "the",
    "account",
    "billing",
    "refund",
    "policy",
    "customer",
    "order",
    "shipping",
    "delivery",
    "invoice",
    "payment",
    "card",
    "support",
    "ticket",
    "agent",
    "reply",
    "within",
    "days",
    "business",
    "please",
    "contact",
    "update",
    "address",
    "password",
    "reset",
    "email",
    "confirm",
    "subscription",
    "plan",
    "upgrade",
    "downgrade",
    "cancel",
    "charge",
    "receipt",
    "warranty",
    "return",
    "label",
]


def _answer(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _mutate(rng: random.Random, text: str, changes: int) -> str:
    words = text.split()
    for _ in range(changes):
        words[rng.randrange(len(words))] = rng.choice(WORDS)
    return " ".join(words)


def build(url: str, grades: int) -> int:
    rng = random.Random(13)
    tasks, cands, judges = (
        ("support", "billing"),
        (("mini", 0.95, 0.0006), ("small", 0.8, 0.0002)),
        ("embedding", "vrty"),
    )
    cases = max(1, grades // (len(tasks) * len(cands) * len(judges)))
    items = []
    for task in tasks:
        for i in range(cases):
            prompt = f"[{task} #{i}] " + _answer(rng, 25) + "?"
            base = _answer(rng, rng.randint(80, 120))
            for cand, quality, cost in cands:
                text = _mutate(rng, base, 3 if quality > 0.9 else 15)
                tools = (ToolCall("lookup_order", f'{{"id": {i}}}'),) if i % 10 == 0 else ()
                for judge in judges:
                    score = min(1.0, max(0.0, rng.gauss(quality, 0.06)))
                    result = GradingResult(
                        quality_score=score,
                        notes=f"{judge}: similarity {score:.3f}",
                        grader_id=judge,
                        baseline_response=LLMResponse(
                            base, "gpt-4o-2024-08-06", "openai", 900.0, Usage(60, 140), 0.01,
                            requested_model="gpt-4o",
                        ),
                        candidate_response=LLMResponse(
                            text, f"{cand}-2025", "openai", 300.0, Usage(60, 140), cost,
                            tool_calls=tools, requested_model=cand,
                        ),
                        details={"judge_spec": {"name": judge, "args": {}}},
                        prompt=prompt,
                        run_config=RunConfig(temperature=0.0),
                    )  # fmt: skip
                    items.append(
                        RecordItem(
                            result, task=task, run_id="bench", case_id=f"{task}-{i}", metadata={"i": i}
                        )
                    )
    with QualityLedger(url) as ledger:
        for start in range(0, len(items), 2000):
            ledger.record_batch(items[start : start + 2000])
    return len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grades", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="write the reports into this directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{Path(tmp) / 'ledger.db'}"
        t0 = time.perf_counter()
        n = build(url, args.grades)
        print(f"ledger: {n} grades in {time.perf_counter() - t0:.1f} s")
        with QualityLedger(url, auto_migrate=False) as ledger:
            for label, max_cases in (("default max_cases", None), ("every grade embedded", n)):
                t0 = time.perf_counter()
                info = write_report(
                    ledger, out / f"report-{max_cases or 'default'}.html", max_cases=max_cases
                )
                took = time.perf_counter() - t0
                print(
                    f"{label}: {info.bytes / 1e6:.2f} MB, {took:.2f} s, "
                    f"{info.cases_embedded} of {info.grades} grades embedded, "
                    f"truncated={info.truncated} -> {info.path.name}"
                )


if __name__ == "__main__":
    main()
