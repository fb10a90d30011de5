"""``grade SUITE --target human --label-rate R`` end to end through the real CLI (issue 23).

Grade a suite of recorded answers with a deterministic judge, let the sampler choose about
``R`` of the cases, import people's labels of the queued cases, then ``route --target human``
and ``grade --resume``: what a user relies on at each step, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from llm_connect.ledger import QualityLedger, SamplingStore
from tests.cli._util import invoke, pair_suite

N, SAME, RATE = 400, 340, 0.2
"""400 cases, the candidate's answer equals the baseline's on the first 340 (``exact``: 1, else 0)."""
HUMAN_SAME = 0.8
"""People score a matching answer 0.8 and a different one 0: the human mean is 0.68, the judge's 0.85."""


def _grade(suite: Path | None, db: str, *extra: str) -> tuple[int, str]:
    result = invoke(
        "grade", *([str(suite)] if suite is not None else []), "--judge", "exact", "--db", db, "--target", "human",
        "--label-rate", str(RATE), "--seed", "7", "--min-quality", "0.5", *extra,
    )  # fmt: skip
    return result.exit_code, result.stdout


def test_grade_queue_label_and_route_on_what_people_would_say(tmp_path: Path, ledger_url: str) -> None:
    suite = pair_suite(tmp_path / "suite.jsonl", N, same=SAME)
    code, out = _grade(suite, ledger_url, "--run-id", "r1")
    # Before any label: a clear verdict, the judge's estimate, no routing on people, and the
    # gate judges what people would say (not the judge's proven 0.85): not settled, exit 5.
    assert code == 5, out
    assert "small on exact: judge alone 0.850 | no human labels yet" in out
    assert "keep baseline big" in out
    assert "quality gate NOT SETTLED (min 0.5)" in out and "more labels would settle it" in out
    assert "recorded:candidate on exact in qa, by what people would say: no human labels yet" in out
    assert "label the queued cases" in out

    # The sampler decided every graded case once and chose about RATE of them.
    with QualityLedger(ledger_url) as ledger:
        decided = SamplingStore(ledger.engine).decided("qa", "small", "exact")
        decision = ledger.decisions("qa")[-1]
    assert len(decided) == N
    assert {p for p, _, _ in decided.values()} == set(range(N))
    assert all(inclusion == RATE for _, inclusion, _ in decided.values())
    chosen = sorted((p, case) for (_, _, case), (p, _, ch) in decided.items() if ch)
    assert 0.5 * RATE * N <= len(chosen) <= 1.5 * RATE * N
    assert decision.model == "big" and decision.candidates[0].graders[0].target == "human"
    assert f"{len(chosen)} pending" in out
    # grade says how many chosen cases await a label, and the command that lists them.
    assert (
        f"labels: {len(chosen)} chosen case(s) of small on qa (judge exact) await a label; list them: "
        f"llm-connect labels queue -t qa -c small -j exact --rate {RATE:g} --db "
    ) in out

    # The queue lists exactly the chosen cases, in the sampler's order.
    queued = invoke(
        "labels", "queue", "--task", "qa", "--candidate", "small", "--judge", "exact",
        "--rate", str(RATE), "--db", ledger_url, "--json",
    )  # fmt: skip
    assert queued.exit_code == 0, queued.output
    cases = json.loads(queued.stdout)["cases"]
    assert cases == [case for _, case in chosen]

    # People label the queued cases.
    lines = ["task,case_id,candidate,preference,score,annotator,note\n"]
    lines += [f"qa,{c},small,,{HUMAN_SAME if int(c[1:]) < SAME else 0.0},ana,\n" for c in cases]
    (tmp_path / "labels.csv").write_text("".join(lines), encoding="utf-8")
    imported = invoke("labels", "import", str(tmp_path / "labels.csv"), "--db", ledger_url)
    assert imported.exit_code == 0, imported.output
    assert f"{len(cases)} written" in imported.stdout

    # route --target human: the people's estimate next to the judge's, corrected for its bias.
    routed = invoke(
        "route", "--task", "qa", "-b", "big", "-c", "small", "--judge", "exact", "--target", "human",
        "--min-quality", "0.5", "--db", ledger_url,
    )  # fmt: skip
    assert routed.exit_code == 0, routed.output
    shown = re.search(
        r"small  exact: judge alone 0\.850 \| people (0\.\d{3}) \[(0\.\d{3}), (0\.\d{3})\]", routed.stdout
    )
    assert shown is not None, routed.stdout
    people, lower, upper = (float(x) for x in shown.groups())
    truth = HUMAN_SAME * SAME / N
    assert abs(people - truth) < 0.05 and lower <= people <= upper
    assert f"{len(cases)} labels used" in routed.stdout
    assert "no human labels yet" not in routed.stdout
    as_json = invoke(
        "route", "--task", "qa", "-b", "big", "-c", "small", "--judge", "exact", "--target", "human",
        "--min-quality", "0.5", "--db", ledger_url, "--json",
    )  # fmt: skip
    evidence = json.loads(as_json.stdout)["candidates"][0]["graders"][0]
    assert evidence["target"] == "human" and evidence["judge_mean"] == 0.85
    assert evidence["labels_used"] == len(cases) and evidence["labels_pending"] == 0
    assert evidence["judge_bias"] > 0.1 and abs(evidence["human_estimate"] - people) < 1e-3
    assert evidence["status"] == "proven"  # the lower bound clears 0.5

    # grade --resume: nothing new to grade or sample, the decision on people's labels, and the
    # report it writes decides the same way (on the judge alone it would keep the baseline).
    code, out = _grade(None, ledger_url, "--resume", "r1", "--report", str(tmp_path / "r.html"))
    assert code == 0, out
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'route to <strong class="model">small</strong> instead of big' in html
    assert "<em>by what people would say</em>" in html
    # At 0.75 the judge (0.85) proves the candidate, people (0.68) do not.
    at = ["report", "--db", ledger_url, "--min-quality", "0.75", "-o"]
    on_judge = invoke(*at, str(tmp_path / "j.html"))
    assert on_judge.exit_code == 0 and "qa: route to small" in on_judge.stderr
    on_people = invoke(*at, str(tmp_path / "p.html"), "--target", "human")
    assert on_people.exit_code == 0 and "qa: keep the baseline big" in on_people.stderr
    assert invoke("report", "--db", ledger_url, "--target", "people").exit_code == 2
    assert "labels: no chosen case of small on qa (judge exact) awaits a label" in out
    resumed = invoke("grade", "--resume", "r1", "--db", ledger_url, "--json")
    assert json.loads(resumed.stdout)["label_queue"] == [
        {
            "task": "qa",
            "candidate": "small",
            "judge": "exact",
            "rate": RATE,
            "strategy": "uniform",
            "cases": [],
        }
    ]
    assert "quality gate passed (min 0.5)" in out
    assert "route to small" in out
    assert re.search(r"small on exact: judge alone 0\.850 \| people 0\.\d{3} \[", out), out
    assert "no human labels yet" not in out
    with QualityLedger(ledger_url) as ledger:
        assert len(SamplingStore(ledger.engine).decided("qa", "small", "exact")) == N
    requeued = invoke(
        "labels",
        "queue",
        "--task",
        "qa",
        "--candidate",
        "small",
        "--judge",
        "exact",
        "--db",
        ledger_url,
        "--json",
    )
    assert json.loads(requeued.stdout)["cases"] == []


def test_an_uncalibrated_pairwise_llm_judge_routes_on_peoples_labels(
    tmp_path: Path, ledger_url: str, openai_server: Any
) -> None:
    """Issue 23's scenario with an LLM judge over the loopback server: grade with the pairwise
    judge (both orders), label the queue, decide on what people would say. No calibration is
    needed for that (people's labels correct the judge's bias); routing on the judge is refused."""
    import hashlib

    from llm_connect.grading.judges._llm import forget_response_formats

    forget_response_formats()
    n, grader = 160, "pairwise:openai:house-judge:pairwise-v1"

    def people_prefer_candidate(i: int) -> bool:  # 80% of cases
        return int(hashlib.sha256(f"p{i}".encode()).hexdigest(), 16) % 10 < 8

    def judge(body: dict[str, Any]) -> dict[str, str]:  # wrong on every 10th case
        text = body["messages"][-1]["content"]
        first = re.search(r"<<<BEGIN ANSWER_A (\w+)>>>\n(.*?)\n<<<END ANSWER_A \1>>>", text, re.S)
        i = int(re.search(r"question (\d+)", text).group(1))  # type: ignore[union-attr]
        better = people_prefer_candidate(i) != (i % 10 == 0)
        return {"notes": "n", "verdict": "A" if ("small" in first.group(2)) == better else "B"}  # type: ignore[union-attr]

    openai_server.responder = lambda body: (
        judge(body) if body["model"] == "house-judge" else f"answer from {body['model']}"
    )
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps({"id": f"c{i}", "prompt": f"question {i}", "task": "qa"}) + "\n"
                             for i in range(n)), encoding="utf-8")  # fmt: skip
    common = ["--db", ledger_url, "--min-quality", "0.5"]
    graded = invoke(
        "grade", str(suite), "-b", "openai:big", "-c", "openai:small", "--judge", "pairwise:openai:house-judge",
        "--base-url", openai_server.base_url, "--api-key", "sk-test-0123456789abcdef", "--label-rate", "0.5",
        "--seed", "3", "--target", "human", *common,
    )  # fmt: skip
    assert graded.exit_code == 5, graded.output  # no labels yet: not settled
    assert "no human labels yet" in graded.stdout and "needs a passing calibration" not in graded.stdout
    # Routing on the judge's own grades: an uncalibrated LLM judge decides nothing.
    on_judge = json.loads(invoke("route", "-t", "qa", "-b", "big", "-c", "small", "-j", grader, *common,
                                 "--json").stdout)  # fmt: skip
    assert on_judge["model"] == "big" and "no stored calibration" in on_judge["ignored_graders"][0]["why"]
    # grade on the judge: the gate reads the decision, which ignores the uncalibrated LLM judge, so
    # nothing is proven: not settled, and the gate says why (before issue 33 it passed on grades
    # routing ignored).
    regraded = invoke(
        "grade", str(suite), "-b", "openai:big", "-c", "openai:small", "--judge", "pairwise:openai:house-judge",
        "--base-url", openai_server.base_url, "--api-key", "sk-test-0123456789abcdef", "--run-id", "again",
        *common,
    )  # fmt: skip
    assert regraded.exit_code == 5 and "quality gate NOT SETTLED" in regraded.stdout, regraded.output
    assert f"no routing judge is usable: {grader} is an LLM judge with no stored calibration" in (
        regraded.stdout
    ), regraded.output
    # --json and JUnit say the same: the judge the decision ignored does not route.
    xml = tmp_path / "r.xml"
    as_json = invoke(
        "grade", str(suite), "-b", "openai:big", "-c", "openai:small", "--judge", "pairwise:openai:house-judge",
        "--base-url", openai_server.base_url, "--api-key", "sk-test-0123456789abcdef", "--run-id", "again",
        "--resume", "again", "--json", "--junit", str(xml), *common,
    )  # fmt: skip
    data = json.loads(as_json.stdout)
    assert [s["routes"] for s in data["stats"]] == [False] and data["gate"] == "not settled"
    assert data["routing"][0]["used_grader_ids"] == [] and 'tests="0"' in xml.read_text(encoding="utf-8")
    queued = invoke("labels", "queue", "-t", "qa", "-c", "small", "-j", grader, "--rate", "0.5",
                    "--db", ledger_url, "--json")  # fmt: skip
    cases = json.loads(queued.stdout)["cases"]
    assert 0.3 * n <= len(cases) <= 0.7 * n
    lines = [
        json.dumps({"task": "qa", "case_id": c, "candidate": "small", "annotator": "ana",
                    "preference": "candidate" if people_prefer_candidate(int(c[1:])) else "baseline"})
        for c in cases
    ]  # fmt: skip
    (tmp_path / "labels.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert invoke("labels", "import", str(tmp_path / "labels.jsonl"), "--db", ledger_url).exit_code == 0
    routed = invoke("route", "-t", "qa", "-b", "big", "-c", "small", "-j", grader, "--target", "human",
                    *common, "--json")  # fmt: skip
    decision = json.loads(routed.stdout)
    evidence = decision["candidates"][0]["graders"][0]
    assert decision["ignored_graders"] == [] and decision["model"] == "small", routed.stdout
    assert evidence["status"] == "proven" and evidence["labels_used"] == len(cases)
    assert abs(evidence["human_estimate"] - 0.8) < 0.1
    forget_response_formats()


def test_two_judges_of_a_candidate_choose_the_same_cases_and_share_one_line(
    tmp_path: Path, ledger_url: str
) -> None:
    """``grade --label-rate`` without ``--seed``: both routing judges of the candidate draw with
    one seed, so they choose the same cases (one label serves both) and grade prints one line."""
    suite = pair_suite(tmp_path / "suite.jsonl", 200, same=150)
    result = invoke(
        "grade", str(suite), "--judge", "exact", "--judge", "vrty", "--db", ledger_url,
        "--label-rate", "0.3", "--min-quality", "0.5",
    )  # fmt: skip
    assert result.exit_code in (0, 5), result.output
    with QualityLedger(ledger_url) as ledger:
        store = SamplingStore(ledger.engine)
        vrty = next(g for g in store.graders("qa", "small") if g.startswith("vrty:"))
        exact = store.queue("qa", "small", "exact")
        assert store.queue("qa", "small", vrty) == exact and 30 <= len(exact) <= 90
    lines = [line for line in result.stdout.splitlines() if line.startswith("labels:")]
    assert len(lines) == 1, lines
    assert f"{len(exact)} chosen case(s) of small on qa (judges exact, {vrty}) await a label" in lines[0]
    assert "llm-connect labels queue -t qa -c small -j exact --rate 0.3 --db " in lines[0]
    assert "or add --sheet FILE to that command for a sheet to fill" in result.stdout


def test_junit_judges_what_people_would_say_as_the_gate_does(tmp_path: Path) -> None:
    """With --target human a JUnit test case is the decision's verdict on people's evidence (no
    labels yet: skipped), not the judge's own (proven at 0.85), as the gate and --json say."""
    xml = tmp_path / "r.xml"
    suite = pair_suite(tmp_path / "suite.jsonl", N, same=SAME)
    code, out = _grade(suite, f"sqlite:///{tmp_path / 'l.db'}", "--junit", str(xml))
    assert code == 5 and "quality gate NOT SETTLED" in out, out
    root = ET.parse(xml).getroot()
    (case,) = [c for c in root.iter("testcase") if c.get("name") == "qa / recorded:candidate / exact"]
    skipped = case.find("skipped")
    assert skipped is not None and "no human labels yet" in (skipped.get("message") or "")
    assert {p.get("name"): p.get("value") for p in root.iter("property")}["gate"] == "not settled"
