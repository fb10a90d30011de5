"""``grade --until-decided``: a seeded order, and no more calls for a candidate once it is settled."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from tests.cli._util import invoke, live_suite
from tests.fixtures.openai_server import OpenAIServer, default_reply

KEY = "sk-test-until-decided-0000000000"


def _script(server: OpenAIServer) -> None:
    # "good" answers word for word like the baseline; "bad" never does.
    def respond(body: dict[str, Any]) -> str:
        reply = default_reply(body)
        return "something else entirely" if body["model"] == "bad" else reply

    server.responder = respond


def _grade(server: OpenAIServer, suite: Path, db: str, *extra: str) -> Any:
    result = invoke(
        "grade", str(suite), "--db", db, "-b", "openai:base", "-c", "openai:good", "-c", "openai:bad",
        "--base-url", server.base_url, "--api-key", KEY, "--no-cache", "--json", *extra,
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _calls(server: OpenAIServer) -> Counter[str]:
    return Counter(r.body["model"] for r in server.requests_to("/chat/completions"))


def test_until_decided_stops_calling_settled_candidates(tmp_path: Path, openai_server: OpenAIServer) -> None:
    _script(openai_server)
    suite = live_suite(tmp_path / "s.jsonl", 200)
    full = _grade(openai_server, suite, f"sqlite:///{tmp_path / 'full.db'}")
    everything = _calls(openai_server)
    assert everything == {"base": 200, "good": 200, "bad": 200}
    assert full["calls_saved"] == 0 and full["stopped"] == {}

    openai_server.reset()
    _script(openai_server)
    early = _grade(openai_server, suite, f"sqlite:///{tmp_path / 'early.db'}", "--until-decided")
    calls = _calls(openai_server)
    # bad is ruled out within a few dozen cases, good proven well before 200; then nothing is called.
    assert calls["bad"] < 60 and calls["good"] < 150 and calls["base"] == calls["good"]
    assert sum(calls.values()) < sum(everything.values()) / 2
    assert early["calls_saved"] == sum(everything.values()) - sum(calls.values())
    assert early["stopped"]["openai:bad"]["qa"] == 200 - calls["bad"]
    verdicts = {s["candidate_model"]: s["verdict"] for s in early["stats"]}
    assert verdicts == {"good": "proven", "bad": "ruled out"}
    (decision,) = early["routing"]
    assert decision["model"] == "good"  # the same decision the full run reaches
    assert full["routing"][0]["model"] == "good"


def test_the_order_is_seeded_and_not_the_file_order(tmp_path: Path, openai_server: OpenAIServer) -> None:
    suite = live_suite(tmp_path / "s.jsonl", 40)

    def order(seed: str, db: str) -> list[str]:
        openai_server.reset()
        invoke(
            "grade", str(suite), "--db", f"sqlite:///{tmp_path / db}", "-b", "openai:base", "-c", "openai:good",
            "--base-url", openai_server.base_url, "--api-key", KEY, "--no-cache", "--concurrency", "1",
            "--until-decided", "--order-seed", seed,
        )  # fmt: skip
        return [
            r.body["messages"][-1]["content"]
            for r in openai_server.requests_to("/chat/completions")
            if r.body["model"] == "base"
        ]

    first, again, other = order("7", "a.db"), order("7", "b.db"), order("8", "c.db")
    assert first == again and first != other
    assert first != [f"question {i}" for i in range(40)]
