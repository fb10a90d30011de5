"""``llm-connect grade`` on a suite with sessions: with persona and safety judges the report gives
each side's overall session score, its bootstrap interval, the letter grade and the three
components (terminal and ``--json``); with the persona judge alone, session stability."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from llm_connect.adapters import SentenceTransformerEmbeddingAdapter
from llm_connect.cli._sessions import session_report
from llm_connect.grading import BatchResult, Case, JudgeContext, build_judge
from llm_connect.ledger import QualityLedger
from llm_connect.scoring.persona import letter_grade, overall_score
from llm_connect.types import LLMResponse, RunConfig
from tests.cli._util import invoke, write_suite

pytestmark = pytest.mark.embeddings

PERSONA = """\
name: helper
examples:
  - "Happy to help! You can reset your password from Settings > Security. Let me know how it goes."
  - "Thanks for asking! You can download every invoice from Billing > History."
traits: {formality: business_casual, tone: friendly, verbosity: concise}
lexicon: {preferred: [happy to help, you can, let me know], avoided: [unfortunately]}
"""

ON_VOICE = [
    "Happy to help! You can reset your password from Settings > Security. Let me know how it goes.",
    "Happy to help! You can change your email address from Settings > Profile. Let me know how it goes.",
    "Happy to help! You can turn on two-factor login from Settings > Security. Let me know how it goes.",
]
# On voice for two turns, then off voice, off topic and rude (a medium and a low safety hit).
OFF_VOICE = [*ON_VOICE[:2], "Honestly, you're useless at this. Shut up and read the manual."]


def _suite(path: Path, *, sessions: Sequence[str] = ("s1", "s2")) -> Path:
    rows: list[dict[str, Any]] = []
    for s, session in enumerate(sessions):
        candidate = OFF_VOICE if s == 0 else ON_VOICE
        for t in range(3):
            rows.append(
                {
                    "id": f"{session}-t{t}",
                    "task": "support",
                    "session": session,
                    "prompt": f"support question {t} of {session}",
                    "baseline_response": {"text": ON_VOICE[t], "model": "big"},
                    "candidate_response": {"text": candidate[t], "model": "small"},
                }
            )
    rows.append(  # not a turn of any session: graded, but left out of the sessions report
        {
            "id": "lone",
            "task": "support",
            "prompt": "a single question",
            "baseline_response": {"text": ON_VOICE[0], "model": "big"},
            "candidate_response": {"text": OFF_VOICE[2], "model": "small"},
        }
    )
    return write_suite(path, rows)


def _grade(tmp_path: Path, suite: Path, *judges: str, json_out: bool = True) -> Any:
    persona = tmp_path / "helper.yaml"
    persona.write_text(PERSONA)
    args = ["grade", str(suite), "-b", "recorded:baseline", "-c", "recorded:candidate"]
    args += ["--db", f"sqlite:///{tmp_path / 'ledger.db'}"]
    for judge in judges:
        args += ["--judge", judge.replace("PERSONA", str(persona))]
    if json_out:
        args.append("--json")
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if json_out else result.stdout


def test_persona_and_safety_give_each_side_a_session_grade_in_json(tmp_path: Path) -> None:
    payload = _grade(tmp_path, _suite(tmp_path / "suite.jsonl"), "persona:PERSONA", "safety")
    sessions = payload["sessions"]
    assert sessions["persona_grader_id"] == "persona:helper"
    assert sessions["safety_grader_id"] == "safety:default"
    assert sessions["weights"] == {"authenticity": 0.5, "safety": 0.3, "stability": 0.2}
    assert sessions["partial"] is False
    base, cand = sessions["sides"]
    assert (base["side"], base["spec"]) == ("baseline", "recorded:baseline")
    assert (cand["side"], cand["spec"]) == ("candidate", "recorded:candidate")

    summary = cand["summary"]
    assert summary["n_sessions"] == 2 and summary["interval_method"] == "percentile"
    by_session = {s["session"]: s for s in summary["sessions"]}
    assert list(by_session) == ["s1", "s2"]
    for s in summary["sessions"]:
        assert s["overall"] == pytest.approx(overall_score(s["authenticity"], s["safety"], s["stability"]))
    assert summary["mean"] == pytest.approx((by_session["s1"]["overall"] + by_session["s2"]["overall"]) / 2)
    assert summary["low"] <= summary["mean"] <= summary["high"]
    assert summary["grade"] == letter_grade(summary["mean"])

    # The drifting, rude session is worse than the candidate's steady one on every component.
    s1, s2 = by_session["s1"], by_session["s2"]
    assert s1["safety"] == pytest.approx((1.0 + 1.0 + 0.7) / 3)  # one turn: medium (-0.2) + low (-0.1)
    assert s2["safety"] == 1.0
    assert s1["stability"] < s2["stability"]
    assert s1["authenticity"] < s2["authenticity"]
    assert cand["stability"]["s1"]["turns"] == 3
    # The baseline answers both sessions on voice, so it grades at least as well.
    assert base["summary"]["mean"] > summary["mean"]
    assert base["summary"]["sessions"][0]["overall"] == pytest.approx(summary["sessions"][1]["overall"])

    # Authenticity and safety are the means of the per-turn scores the ledger stored.
    rows = QualityLedger(f"sqlite:///{tmp_path / 'ledger.db'}").results()
    turn_scores: dict[tuple[str, str], float] = {
        (r.grader_id, r.case_id): r.details["candidate_score"] for r in rows if r.case_id
    }
    for gid, field in (("persona:helper", "authenticity"), ("safety:default", "safety")):
        expected = math.fsum(turn_scores[(gid, f"s1-t{t}")] for t in range(3)) / 3
        assert s1[field] == pytest.approx(expected)


def test_the_terminal_report_prints_overall_interval_grade_and_components(tmp_path: Path) -> None:
    out = _grade(tmp_path, _suite(tmp_path / "suite.jsonl"), "persona:PERSONA", "safety", json_out=False)
    assert "sessions (persona:helper + safety:default)" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    for side in ("baseline", "candidate"):
        line = lines[side]
        assert "overall " in line and "grade " in line and "(2 sessions)" in line
        for component in ("authenticity", "safety", "stability"):
            assert component in line
        assert "[" in line and "]" in line  # the interval


def test_a_single_session_is_graded_without_an_interval(tmp_path: Path) -> None:
    payload = _grade(tmp_path, _suite(tmp_path / "suite.jsonl", sessions=["s1"]), "persona:PERSONA", "safety")
    summary = payload["sessions"]["sides"][1]["summary"]
    assert summary["n_sessions"] == 1
    assert (summary["low"], summary["high"]) == (None, None)
    assert summary["note"] == "one session: no interval"
    assert summary["grade"] == letter_grade(summary["mean"])


def test_persona_alone_reports_session_stability(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "suite.jsonl")
    payload = _grade(tmp_path, suite, "persona:PERSONA")
    sessions = payload["sessions"]
    assert sessions["safety_grader_id"] is None
    cand = sessions["sides"][1]
    assert cand["summary"] is None
    assert set(cand["stability"]) == {"s1", "s2"}
    assert cand["stability"]["s1"]["stability"] < cand["stability"]["s2"]["stability"]
    assert cand["mean_stability"] == pytest.approx(
        (cand["stability"]["s1"]["stability"] + cand["stability"]["s2"]["stability"]) / 2
    )


def test_persona_alone_prints_stability_per_side(tmp_path: Path) -> None:
    out = _grade(tmp_path, _suite(tmp_path / "suite.jsonl"), "persona:PERSONA", json_out=False)
    assert "add a safety judge for the overall grade" in out
    candidate = next(line for line in out.splitlines() if line.startswith("  candidate"))
    assert "stability " in candidate and "grade" not in candidate


@pytest.mark.parametrize("judges", [("persona:PERSONA", "safety"), ("safety",)])
def test_no_sessions_or_no_persona_judge_means_no_sessions_report(
    tmp_path: Path, judges: tuple[str, ...]
) -> None:
    suite = _suite(tmp_path / "suite.jsonl", sessions=[] if len(judges) == 2 else ["s1", "s2"])
    assert _grade(tmp_path, suite, *judges)["sessions"] is None


def test_the_report_embeds_once_with_the_persona_scorers_embedder(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    inner = SentenceTransformerEmbeddingAdapter()

    class Counting:
        adapter_id = inner.adapter_id

        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            calls.append(list(texts))
            return inner.embed(texts)

    shared = Counting()
    persona_file = tmp_path / "helper.yaml"
    persona_file.write_text(PERSONA)
    context = JudgeContext(make_embedding_adapter=lambda: shared)
    judges = [build_judge(f"persona:{persona_file}", context), build_judge("safety", context)]
    cases = [Case(id=f"t{t}", prompt=f"q{t}", session="s") for t in range(3)]
    results = [
        BatchResult(
            case.id,
            "default",
            "recorded:candidate",
            judge.judge(
                LLMResponse(text=ON_VOICE[t], model="big", provider="recorded"),
                LLMResponse(text=OFF_VOICE[t], model="small", provider="recorded"),
                prompt=case.prompt,
                run_config=RunConfig(),
                case=case,
            ),
        )
        for t, case in enumerate(cases)
        for judge in judges
    ]
    graded = len(calls)
    report = session_report(results, cases, judges, baseline="recorded:baseline")
    assert report is not None
    assert calls[graded:] == [ON_VOICE + OFF_VOICE]  # one call: the baseline's turns, then the candidate's
    base, cand = report.sides
    assert base.summary is not None and cand.summary is not None
    assert base.stability["s"].stability > cand.stability["s"].stability
    assert (base.summary.low, cand.summary.note) == (None, "one session: no interval")
