"""Benchmark: rule-based, persona and safety judges, each against a baseline measured in the same run.

1. Rule judges: p50/p99 time of one ``judge()`` call (both responses scored,
   GradingResult built) for each judge spec, next to the exact-match judge on
   the same pairs (the cheapest judge there is). Timed in CPU time of the
   running thread, interleaved call by call, gc off.
2. Persona: ``PersonaScorer.score_pair`` (both responses embedded in one call)
   against two ``score`` calls (two embedding calls) on the packaged
   all-MiniLM-L6-v2 (CPU), timed in CPU time of the whole process (torch runs
   its own threads; on a busy machine wall time mostly measures other
   processes). The ratio is separate / paired.

Run with the dev virtualenv::

    python scripts/bench/scorers.py                 # 1,000 rule calls per judge, 200 persona pairs
    python scripts/bench/scorers.py --calls 200 --pairs 50
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from llm_connect.grading import Case, build_judge
from llm_connect.types import LLMResponse, RunConfig

_WORD_TEXT = (
    "the baseline analysis shows a clear signal in revenue data variance remains within range we recommend "
    "extending the test by two weeks customers reported faster exports after the release please contact "
    "support if the issue persists thanks for your patience"
)
WORDS = _WORD_TEXT.split(" ")
SCHEMA = {
    "type": "object",
    "required": ["name", "items"],
    "properties": {"name": {"type": "string"}, "items": {"type": "array", "items": {"type": "integer"}}},
}
PERSONA = """\
name: bench
examples:
  - "Our baseline analysis shows a clear signal in the quarterly revenue data."
  - "Thanks for reaching out! Happy to help you reset your password."
  - "The regression indicates a significant effect; we recommend extending the test."
traits: {formality: business_casual, tone: friendly, verbosity: concise}
lexicon: {preferred: [baseline, signal], avoided: [lol]}
"""


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _time(fn: Callable[[], object]) -> float:
    start = time.thread_time()
    fn()
    return time.thread_time() - start


def bench_rules(calls: int, seed: int) -> None:
    rng = random.Random(seed)
    run_config = RunConfig()
    case = Case(
        id="b",
        prompt="p",
        expected={
            "keywords": ["baseline", "signal", "support"],
            "sections": ["analysis", "support"],
            "schema": SCHEMA,
        },
    )
    pairs = []
    for i in range(calls):
        prompt = _text(rng, 25)
        body = json.dumps({"name": f"n{i}", "items": list(range(i % 20)), "note": _text(rng, 80)})
        prose = _text(rng, 150)
        pairs.append((prompt, body, prose))
    specs = [
        "format:json",
        "format:markdown",
        "schema",
        "correctness",
        "length:min_words=5,max_words=400",
        "relevance",
        "completeness",
        "safety",
    ]
    exact = build_judge("exact")
    print(f"rule judges: {calls} judge() calls each, CPU time of this thread, baseline = exact judge")
    print(f"{'judge':<34} {'p50 us':>9} {'p99 us':>9} {'exact p50':>10} {'x exact (p50)':>14}")
    gc.disable()
    try:
        for spec in specs:
            judge = build_judge(spec)
            ours, base = [], []
            for prompt, body, prose in pairs:
                json_first = spec.startswith(("format:json", "schema"))
                text_a, text_b = (body, prose) if json_first else (prose, body)
                a = LLMResponse(text=text_a, model="a", provider="bench")
                b = LLMResponse(text=text_b, model="b", provider="bench")
                ours.append(_time(lambda: judge.judge(a, b, prompt=prompt, run_config=run_config, case=case)))  # noqa: B023
                base.append(_time(lambda: exact.judge(a, b, prompt=prompt, run_config=run_config)))  # noqa: B023
            p50, p99, b50 = _pct(ours, 0.5), _pct(ours, 0.99), _pct(base, 0.5)
            print(f"{spec:<34} {p50 * 1e6:>9.1f} {p99 * 1e6:>9.1f} {b50 * 1e6:>10.1f} {p50 / b50:>13.1f}x")
    finally:
        gc.enable()


def bench_persona(pairs: int, seed: int) -> None:
    from llm_connect.adapters import SentenceTransformerEmbeddingAdapter
    from llm_connect.scoring.persona import PersonaScorer, load_persona

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(PERSONA)
        scorer = PersonaScorer(load_persona(path), embedder=SentenceTransformerEmbeddingAdapter())
        scorer.score("warm up the model and the example embeddings", prompt="")
        texts = [(_text(rng, 60), _text(rng, 60)) for _ in range(pairs)]
        paired, separate = [], []
        for a, b in texts:
            start = time.process_time()
            scorer.score_pair(a, b, prompt="")
            paired.append(time.process_time() - start)
            start = time.process_time()
            scorer.score(a, prompt="")
            scorer.score(b, prompt="")
            separate.append(time.process_time() - start)
    p50p, p50s = statistics.median(paired), statistics.median(separate)
    print(f"\npersona: {pairs} pairs of 60-word responses, process CPU time, all-MiniLM-L6-v2 on CPU")
    print(f"score_pair (1 embed call) p50 {p50p * 1e3:.2f} ms  p99 {_pct(paired, 0.99) * 1e3:.2f} ms")
    print(f"2 x score  (2 embed calls) p50 {p50s * 1e3:.2f} ms  p99 {_pct(separate, 0.99) * 1e3:.2f} ms")
    print(f"speed-up of score_pair (p50): {p50s / p50p:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    if args.calls:
        bench_rules(args.calls, args.seed)
    if args.pairs:
        bench_persona(args.pairs, args.seed)


if __name__ == "__main__":
    main()
