"""Every command of examples/README.md runs, in its order and on one ledger, and says what the page says.

As ``tests/docs/test_readme.py`` does for README.md: the commands are parsed from the page, each
is run here (``RUN``) or listed with the reason it is not (``NOT_RUN``), and a claim is checked
against the page's own words (``claim``), figures to the precision printed and "about X" to
within one unit of X's last digit. The live commands (``openai:`` specs, ``quickstart.py``,
``stability``) run against the loopback OpenAI-compatible server of ``tests/fixtures``: the
page's own comment offers ``OPENAI_BASE_URL`` for a local server instead of an API key.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.docs._commands import EXAMPLES_README, find, unlisted
from tests.docs._run import (
    about,
    block_after,
    claim,
    decisions,
    header,
    http,
    llm,
    mean_of,
    rounds_to,
    serving,
    shown_output_matches,
    stats,
)
from tests.docs.conftest import FIRST, Graded, workdir_for
from tests.fixtures.openai_server import OpenAIServer

pytestmark = [pytest.mark.embeddings, pytest.mark.slow]

PAGE = EXAMPLES_README
TASKS = ("summary", "extraction", "support")
EMBEDDING, VRTY = "embedding:all-MiniLM-L6-v2", "vrty:1.0.1"
BASE, MINI, LLAMA = "gpt-4o", "gpt-4o-mini", "llama-3.1-8b"

RULE_JUDGES = (
    "llm-connect grade examples/suite.jsonl --baseline recorded:gpt-4o --candidate recorded:gpt-4o-mini"
    " --candidate recorded:llama-3.1-8b --judge vrty --judge format:json --judge schema"
    " --judge persona:examples/persona-support.yaml --judge safety:examples/safety-patterns.yaml"
    " --judge correctness:mode=keywords"
)
PAIRS = "llm-connect grade examples/pairs.jsonl --judge embedding --judge correctness"
SUMMARY = "llm-connect ledger summary"
ROUTE = (
    "llm-connect route --task support --baseline gpt-4o --candidate gpt-4o-mini --candidate llama-3.1-8b"
    " --judge embedding:all-MiniLM-L6-v2 --judge vrty:1.0.1 --min-samples 20"
)
LIVE = (
    "llm-connect grade examples/suite.jsonl --baseline openai:gpt-4o --candidate openai:gpt-4o-mini"
    " --judge embedding --judge vrty --concurrency 16"
)
QUICKSTART = "python examples/quickstart.py"
LABEL_RATE = (
    "llm-connect grade examples/suite.jsonl --baseline recorded:gpt-4o --candidate recorded:gpt-4o-mini"
    " --candidate recorded:llama-3.1-8b --judge vrty --label-rate 0.5 --seed 42"
)
QUEUE = "llm-connect labels queue --task support --candidate llama-3.1-8b --rate 0.5 --sheet support.csv"
IMPORT = "llm-connect labels import support.csv --annotator YOUR-NAME"
STATUS = "llm-connect labels status"
HUMAN_ROUTE = (
    "llm-connect route --task support --baseline gpt-4o --candidate llama-3.1-8b --judge vrty:1.0.1"
    " --target human --min-quality 0.5"
)
VIEW = "llm-connect view"
TOOLS = (
    "llm-connect grade examples/tools.jsonl --baseline recorded:gpt-4o --candidate recorded:gpt-4o-mini"
    " --candidate recorded:llama-3.1-8b --judge tools --judge exact --route-on tools"
)
STABILITY = (
    "llm-connect stability --input examples/stability-query.json --model openai:gpt-4o-mini --runs 20"
    " --task support-tools"
)

RUN: dict[str, str] = {
    FIRST: "test_routing_question",
    RULE_JUDGES: "test_rule_based_judges",
    PAIRS: "test_pair_shorthand",
    SUMMARY: "test_ledger_summary_shows_each_task_candidate_and_judge",
    ROUTE: "test_route_repeats_the_decision_from_the_ledger_alone",
    LIVE: "test_live_commands_call_the_server_and_ignore_the_stored_answers",
    QUICKSTART: "test_live_commands_call_the_server_and_ignore_the_stored_answers",
    LABEL_RATE: "test_label_rate_and_the_sheet",
    QUEUE: "test_label_rate_and_the_sheet",
    VIEW: "test_view_serves_the_chosen_cases_first",
    IMPORT: "test_labels_rule_llama_out_on_what_people_say",
    STATUS: "test_labels_rule_llama_out_on_what_people_say",
    HUMAN_ROUTE: "test_labels_rule_llama_out_on_what_people_say",
    TOOLS: "test_tools_suite",
    STABILITY: "test_stability_stores_the_analysis_route_looks_for",
}
NOT_RUN: dict[str, str] = {
    "llm-connect grade": "names the command in prose; every grade command on the page runs",
    "llm-connect stability": "names the command in prose; the stability command at the end of the page runs",
    "export OPENAI_API_KEY=sk-...": (
        "sets the reader's API key; the live commands run with OPENAI_BASE_URL set to a local"
        " OpenAI-compatible server instead, the other way the comment beside it gives"
    ),
}


def test_every_command_is_run_or_listed() -> None:
    assert unlisted(PAGE, RUN, NOT_RUN, {n for n in globals() if n.startswith("test_")}) == []


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory, first_grade: Graded) -> Iterator[Path]:
    yield from workdir_for("examples-readme", tmp_path_factory, first_grade)


def _rows(db: Path, query: str, *args: object) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(db)) as con:
        return [tuple(r) for r in con.execute(query, args).fetchall()]


def _span(values: list[float], quoted: str) -> bool:
    """``values`` run from the first to the second figure of ``quoted`` ("0.61-0.73"), as printed."""
    low, high = quoted.split("-")
    return rounds_to(min(values), low) and rounds_to(max(values), high)


# -- the routing question -------------------------------------------------------------------------


def test_routing_question(first_grade: Graded, work: Path) -> None:
    out, db = first_grade.output, work / "llm_connect.db"
    assert first_grade.exit_code == 0, out
    figures = stats(out)
    where = claim(PAGE, "gpt-4o-mini scores close to the baseline: 0.97 on embedding and 0.98 on\nvrty over all 66 cases (0.95-0.99 per task)")  # fmt: skip
    assert rounds_to(mean_of(db, MINI, EMBEDDING), "0.97") and rounds_to(mean_of(db, MINI, VRTY), "0.98"), (
        where
    )
    assert _span([s.mean for k, s in figures.items() if k[1] == MINI], "0.95-0.99"), where
    where = claim(PAGE, "llama-3.1-8b scores 0.78 and 0.74 (0.61-0.73\non support and summary, but 0.89 and 0.97 on extraction")  # fmt: skip
    assert rounds_to(mean_of(db, LLAMA, EMBEDDING), "0.78") and rounds_to(mean_of(db, LLAMA, VRTY), "0.74"), (
        where
    )
    assert _span(
        [s.mean for k, s in figures.items() if k[1] == LLAMA and k[0] != "extraction"], "0.61-0.73"
    ), where
    extraction = (figures[("extraction", LLAMA, EMBEDDING)].mean, figures[("extraction", LLAMA, VRTY)].mean)
    assert rounds_to(extraction[0], "0.89") and rounds_to(extraction[1], "0.97"), where
    where = claim(PAGE, "Routing still keeps gpt-4o on every task")
    assert decisions(out) == dict.fromkeys(TASKS, "keep baseline gpt-4o"), where
    where = claim(PAGE, "at least 30 cases per judge,\n`--min-samples`")
    assert {s.n for s in figures.values()} == {21, 24}, claim(PAGE, "21-24 cases per task prove nothing yet")
    assert not any(s.verdict == "proven" for s in figures.values()), where
    shown = block_after(PAGE, "The run ends with:")
    assert shown_output_matches(shown, out) == [], out
    where = claim(PAGE, "gpt-4o-mini's lower bounds (0.69-0.75) are below 0.9 only for want of cases")
    assert _span([s.lo for k, s in figures.items() if k[1] == MINI], "0.69-0.75"), where
    assert all(s.verdict.startswith("insufficient") for k, s in figures.items() if k[1] == MINI), where
    where = claim(PAGE, "llama-3.1-8b\nis ruled out on support and summary (its upper bounds, 0.75-0.81, are below 0.9) and not\nsettled yet on extraction")  # fmt: skip
    ruled_out = {k: s for k, s in figures.items() if k[1] == LLAMA and k[0] != "extraction"}
    assert all(s.verdict == "ruled out" for s in ruled_out.values()), where
    assert _span([s.hi for s in ruled_out.values()], "0.75-0.81"), where
    assert all(
        s.verdict.startswith("insufficient") for k, s in figures.items() if k[:2] == ("extraction", LLAMA)
    )


def test_exact_as_a_diagnostic(first_grade: Graded, work: Path) -> None:
    """The options the page adds to the routing question: ``--judge exact:normalize=true`` and
    ``--route-on embedding --route-on vrty``."""
    result = llm(
        find(PAGE, FIRST), "--judge", "exact:normalize=true", "--route-on", "embedding", "--route-on", "vrty"
    )
    assert result.exit_code == 0, result.output
    where = claim(PAGE, "about a quarter of gpt-4o-mini's answers\n(17 of 66), none of llama's")
    query = "SELECT candidate_model, SUM(quality_score = 1) FROM grades WHERE grader_id = 'exact:normalized' GROUP BY 1"
    same = {str(model): count for model, count in _rows(work / "llm_connect.db", query)}
    assert same == {MINI: 17, LLAMA: 0}, where
    where = claim(PAGE, "it is graded and reported,\nbut only the named judges decide routing")
    exact = [s for k, s in stats(result.output).items() if k[2] == "exact:normalized"]
    assert len(exact) == 6 and all(s.verdict.endswith("(diagnostic)") for s in exact), where
    assert decisions(result.output) == decisions(first_grade.output), where


# -- the rule-based judges -------------------------------------------------------------------------


def _safety_hits(db: Path) -> dict[str, list[tuple[str, str]]]:
    hits: dict[str, list[tuple[str, str]]] = {}
    for candidate, details in _rows(db, "SELECT candidate_model, details FROM grades WHERE grader_id LIKE 'safety:%' AND quality_score < 1"):  # fmt: skip
        for hit in json.loads(str(details))["candidate"]["hits"]:
            hits.setdefault(str(candidate), []).extend([(hit["label"], hit["severity"])] * hit["count"])
    return hits


def test_rule_based_judges(first_grade: Graded, work: Path) -> None:
    db = work / "llm_connect.db"
    result = llm(find(PAGE, RULE_JUDGES))
    where = claim(PAGE, 'the run exits 0 and reports "judge schema: not\n  applicable to 45 of 66 case(s)" with the reason')  # fmt: skip
    assert result.exit_code == 0, (result.output, where)
    assert re.search(r"^judge schema: not applicable to 45 of 66 case\(s\), e\.g\. \S+: no JSON schema", result.output, re.M), where  # fmt: skip
    figures = stats(result.output)
    where = claim(PAGE, "on free text both sides\n  fail to parse (so the relative grade is 1.0)")
    assert all(s.mean == 1.0 for k, s in figures.items() if k[2] == "format:json" and k[0] != "extraction"), (
        where
    )
    where = claim(
        PAGE, "Embedding similarity barely separates the candidates on extraction\n  (about 0.99 vs 0.89)"
    )
    first = stats(first_grade.output)
    assert about(first[("extraction", MINI, EMBEDDING)].mean, "0.99"), where
    assert about(first[("extraction", LLAMA, EMBEDDING)].mean, "0.89"), where
    where = claim(
        PAGE, "these two show that 5 of llama's 21 JSON answers do not\n  parse and 7 more violate the schema"
    )
    failed = "SELECT case_id FROM grades WHERE task = 'extraction' AND candidate_model = ? AND grader_id = ? AND quality_score < 1"  # fmt: skip
    unparsed = {c for (c,) in _rows(db, failed, LLAMA, "format:json")}
    invalid = {c for (c,) in _rows(db, failed, LLAMA, "schema")}
    assert (figures[("extraction", LLAMA, "schema")].n, len(unparsed), len(invalid - unparsed)) == (
        21,
        5,
        7,
    ), where
    where = claim(PAGE, "gpt-4o-mini stays in voice (about 0.98 relative to\n  the baseline), llama-3.1-8b does not (about 0.70)")  # fmt: skip
    persona = "persona:quillstack-support"
    assert about(figures[("support", MINI, persona)].mean, "0.98"), where
    assert about(figures[("support", LLAMA, persona)].mean, "0.70"), where
    where = claim(PAGE, "flags only llama-3.1-8b: the password request\n  (critical), two refund promises outside the policy (medium), slang and an emoji (low)")  # fmt: skip
    hits = _safety_hits(db)
    assert set(hits) == {LLAMA}, (hits, where)
    assert sorted(hits[LLAMA]) == sorted([("credential_request", "critical"), ("refund_promise", "medium"), ("refund_promise", "medium"), ("slang", "low"), ("emoji", "low")]), (hits, where)  # fmt: skip


def test_pair_shorthand() -> None:
    result = llm(find(PAGE, PAIRS))
    assert result.exit_code == 0, result.output
    where = claim(
        PAGE, "The ten pairs are task `faq`, and the two sides are named `baseline` and `candidate`."
    )
    figures = stats(result.output)
    assert {(k[0], k[1]) for k in figures} == {("faq", "candidate")} and {s.n for s in figures.values()} == {
        10
    }, where
    assert decisions(result.output) == {"faq": "keep the baseline"}, where


# -- the ledger, afterwards ----------------------------------------------------------------------


def test_ledger_summary_shows_each_task_candidate_and_judge(work: Path) -> None:
    result = llm(find(PAGE, SUMMARY))
    where = claim(PAGE, "`llm-connect ledger summary` shows the stored grades per task, candidate\nand judge")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split("\t")[:4] == ["task", "baseline", "candidate", "grader"], (lines[0], where)
    shown = {tuple(line.split("\t")[i] for i in (0, 2, 3)) for line in lines[1:] if line}
    stored = set(
        _rows(work / "llm_connect.db", "SELECT DISTINCT task, candidate_model, grader_id FROM grades")
    )
    assert shown == stored, where


def test_route_repeats_the_decision_from_the_ledger_alone(first_grade: Graded) -> None:
    result = llm(find(PAGE, ROUTE))
    assert result.exit_code == 0 and result.output.splitlines()[0] == BASE, result.output
    where = claim(PAGE, "It keeps gpt-4o, as `grade` did")
    assert decisions(first_grade.output)["support"] == f"keep baseline {BASE}", where
    where = claim(PAGE, "the 24 support cases reach the 20 asked for here, but\ngpt-4o-mini's lower bounds (0.750 on both judges) are below 0.9, and about 53 more cases\non embedding and 39 on vrty would prove it; llama-3.1-8b is ruled out.")  # fmt: skip
    for judge, more in ((EMBEDDING, 53), (VRTY, 39)):
        line = rf"^  {MINI}  undecided  {judge}: undecided, 24 cases .*bounds \[0\.750, 1\.000\] .*about {more} more cases would prove"  # fmt: skip
        assert re.search(line, result.output, re.M), (result.output, where)
    assert len(re.findall(rf"^  {LLAMA}  ruled out  ", result.output, re.M)) == 2, (result.output, where)


def test_live_commands_call_the_server_and_ignore_the_stored_answers(
    work: Path, openai_server: OpenAIServer
) -> None:
    before = _rows(work / "llm_connect.db", "SELECT COUNT(*) FROM grades")
    env = {"OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-test"}
    where = claim(PAGE, "so give them a ledger of their own with `--db URL` to keep the two apart")
    result = llm(find(PAGE, LIVE), "--db", "sqlite:///live.db", env=env)
    assert result.exit_code == 0, result.output
    assert header(result.output)["rest"].startswith("132 model calls"), result.output
    asked = sorted(r.body["model"] for r in openai_server.requests_to("/chat/completions"))
    assert asked == [BASE] * 66 + [MINI] * 66
    where = claim(PAGE, "the same suite, with real calls (the\nanswers in the suite are ignored when the specs are not `recorded:`)")  # fmt: skip
    texts = _rows(work / "live.db", "SELECT baseline_text, candidate_text FROM grades")
    assert texts and all(str(b).startswith("echo: ") and str(c).startswith("echo: ") for b, c in texts), where
    assert _rows(work / "llm_connect.db", "SELECT COUNT(*) FROM grades") == before
    script = find(PAGE, QUICKSTART)
    ran = subprocess.run(
        [sys.executable, *script.argv[1:]], capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, **env},
    )  # fmt: skip
    where = claim(PAGE, "# one prompt, PairedGrader + the VRTY judge")
    assert ran.returncode == 0, (ran.stdout, ran.stderr)
    assert re.match(r"vrty:1\.0\.1: quality 1\.000 - ", ran.stdout), (ran.stdout, where)
    assert len(openai_server.requests_to("/chat/completions")) == 132 + 2, where


# -- what people would say ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def sheet(work: Path) -> list[dict[str, str]]:
    """The support.csv the label-rate grade and ``labels queue`` leave (what ``test_label_rate_and_the_sheet``
    runs; a fixture, so that the tests after it find the sheet whatever runs alone)."""
    graded = llm(find(PAGE, LABEL_RATE))
    assert graded.exit_code == 0, graded.output
    chosen = re.search(rf"labels: (\d+) chosen case\(s\) of {LLAMA} on support \(judge {VRTY}\) await a label", graded.output)  # fmt: skip
    assert chosen is not None, graded.output
    queued = llm(find(PAGE, QUEUE))
    assert queued.exit_code == 0, queued.output
    with (work / "support.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == int(chosen[1]), (rows, graded.output)
    assert f"{len(rows)} row(s) written to support.csv" in queued.output, queued.output
    return rows


def test_label_rate_and_the_sheet(sheet: list[dict[str, str]]) -> None:
    where = claim(PAGE, "`--seed 42` makes the sample the one described here: 12 of the 24 support cases.")
    assert len(sheet) == 12 and len({r["case_id"] for r in sheet}) == 12, where
    where = claim(PAGE, "On each\nof them llama-3.1-8b's answer leaves out facts the case expects (`expected.keywords`) that\ngpt-4o's states.")  # fmt: skip
    cases = {c["id"]: c for c in _suite()}
    for row in sheet:
        case = cases[row["case_id"]]
        stated = {m: [k.casefold() in case["responses"][m]["text"].casefold() for k in case["expected"]["keywords"]] for m in (BASE, LLAMA)}  # fmt: skip
        assert all(stated[BASE]) and not all(stated[LLAMA]), (row["case_id"], where)
    where = claim(PAGE, "`support.csv` holds the chosen cases still waiting, each with its prompt and the two answers\nin a blind order")  # fmt: skip
    assert all(r["prompt"] and r["answer_1"] and r["answer_2"] and not r["better"] for r in sheet), where
    assert all(r["task"] == "support" and r["candidate"] == LLAMA for r in sheet), where


def test_view_serves_the_chosen_cases_first(sheet: list[dict[str, str]]) -> None:
    with serving(find(PAGE, VIEW), "--port", "0") as printed:
        where = claim(PAGE, "`llm-connect view` prints a Label URL that serves the same chosen\ncases first")
        match = re.search(r"^label cases at (http://127\.0\.0\.1:\d+)/label\?token=\S+$", printed, re.M)
        assert match is not None, (printed, where)
        status, answer = http(f"{match[1]}/api/label/next?annotator=YOUR-NAME&task=support&candidate={LLAMA}")
    assert status == 200 and answer["case"]["chosen"] is True, (answer, where)
    assert answer["case"]["case_id"] == sheet[0]["case_id"], (answer["case"]["case_id"], where)
    assert answer["chosen_left"] == len(sheet), where


def _suite() -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in Path("examples/suite.jsonl").read_text(encoding="utf-8").splitlines()
    ]


def _baseline_side(row: dict[str, str]) -> str:
    """Which of the blind answers is gpt-4o's: '1' or '2'."""
    base = next(c for c in _suite() if c["id"] == row["case_id"])["responses"][BASE]["text"]
    assert base in (row["answer_1"], row["answer_2"]), row["case_id"]
    return "1" if row["answer_1"] == base else "2"


def _write_sheet(path: Path, rows: list[dict[str, str]], better: list[str]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([{**row, "better": choice} for row, choice in zip(rows, better, strict=True)])


def test_labels_rule_llama_out_on_what_people_say(work: Path, sheet: list[dict[str, str]]) -> None:
    sides = [_baseline_side(row) for row in sheet]
    shutil.copyfile(work / "llm_connect.db", work / "lean.db")  # the other labelling, on a ledger of its own
    _write_sheet(work / "support.csv", sheet, sides)  # gpt-4o's answer is the better one each time
    imported = llm(find(PAGE, IMPORT))
    assert imported.exit_code == 0 and "12 written" in imported.output, imported.output
    status = llm(find(PAGE, STATUS))
    row = re.search(rf"^support\s+{LLAMA}\s+{VRTY}\s+24\s+12\s+12\s+0\s*$", status.output, re.M)
    assert status.exit_code == 0 and row is not None, status.output  # decided, chosen, labelled, waiting
    routed = llm(find(PAGE, HUMAN_ROUTE))
    where = claim(PAGE, "the 12 labels already rule llama-3.1-8b out on what people would say,\nalthough vrty alone gives it 0.653, a score on another scale than people's")  # fmt: skip
    assert routed.exit_code == 0 and routed.output.splitlines()[0] == BASE, routed.output
    assert re.search(rf"^  {LLAMA}  ruled out  {VRTY}: human quality ruled out: 12 labels on 24 cases", routed.output, re.M), where  # fmt: skip
    shown = block_after(PAGE, "a score on another scale than people's:")
    assert shown_output_matches(shown, routed.output) == [], routed.output

    other = [("2" if side == "1" else "1") if i < 7 else side for i, side in enumerate(sides)]  # 7 for llama
    _write_sheet(work / "lean.csv", sheet, other)
    assert llm(["llm-connect", "labels", "import", "lean.csv", "--annotator", "YOUR-NAME", "--db", "sqlite:///lean.db"]).exit_code == 0  # fmt: skip
    lean = llm(find(PAGE, HUMAN_ROUTE), "--db", "sqlite:///lean.db")
    where = claim(PAGE, "with 7 of the 12 for llama-3.1-8b and\n5 for gpt-4o, people's estimate is 0.583 on 24 of the 30 cases needed, and `route` says how\nmany more labels (and cases) would settle it")  # fmt: skip
    assert lean.exit_code == 0, lean.output
    assert re.search(rf"^  {LLAMA}  insufficient  {VRTY}: human quality insufficient: 12 labels on 24 cases, prediction-powered estimate 0\.583 ", lean.output, re.M), (lean.output, where)  # fmt: skip
    assert re.search(r"about \d+ more labels \(and \d+ more cases\) would settle it", lean.output), (
        lean.output,
        where,
    )


# -- the tools suite ---------------------------------------------------------------------------


def test_tools_suite(work: Path) -> None:
    result = llm(find(PAGE, TOOLS))
    assert result.exit_code == 0, result.output
    figures = stats(result.output)
    task = "support-tools"
    where = claim(PAGE, "gpt-4o-mini scores 0.935 on `tools` (0.61 on `exact`, which also compares the text\nanswers word for word), llama-3.1-8b 0.380 (0.13)")  # fmt: skip
    quoted = {
        (MINI, "tools"): "0.935",
        (MINI, "exact"): "0.61",
        (LLAMA, "tools"): "0.380",
        (LLAMA, "exact"): "0.13",
    }
    for (model, judge), figure in quoted.items():
        assert rounds_to(figures[(task, model, judge)].mean, figure), (model, judge, where)
    where = claim(PAGE, "routing on it too would rule gpt-4o-mini out for its wording alone")
    assert figures[(task, MINI, "exact")].verdict == "ruled out (diagnostic)", where
    where = claim(PAGE, "With 23\ncases nothing is proven")
    assert {s.n for s in figures.values()} == {23} and decisions(result.output) == {task: f"keep baseline {BASE}"}, where  # fmt: skip
    mini = figures[(task, MINI, "tools")]
    where = claim(PAGE, "gpt-4o-mini's anytime-valid lower bound\n(0.688) is far from 0.9 anyway (`grade` estimates about 255 more cases)")  # fmt: skip
    assert rounds_to(mini.lo, "0.688") and mini.verdict == "insufficient (~255 more cases)", (mini, where)
    llama = figures[(task, LLAMA, "tools")]
    where = claim(PAGE, "llama-3.1-8b is\nalready ruled out (upper bound 0.625, below 0.9)")
    assert llama.verdict == "ruled out" and rounds_to(llama.hi, "0.625"), (llama, where)


def test_stability_stores_the_analysis_route_looks_for(work: Path, openai_server: OpenAIServer) -> None:
    route = ["llm-connect", "route", "--task", "support-tools", "-b", BASE, "-c", MINI, "-j", "tools"]
    before = llm([*route, "--min-stability", "SAFE"])
    assert "no stability analysis stored on support-tools" in before.output, before.output
    env = {"OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-test"}
    result = llm(find(PAGE, STABILITY), env=env)
    where = claim(PAGE, "It\nmakes real calls, so it needs a server")
    assert result.exit_code == 0 and "SAFE" in result.output, (result.output, where)  # 20 identical echoes
    assert len(openai_server.requests_to("/chat/completions")) == 20, where
    where = claim(PAGE, "`--task` stores the analysis where\n`route --min-stability` looks for it")
    after = llm([*route, "--min-stability", "SAFE"])
    assert after.exit_code == 0 and re.search(rf"^  {MINI}  pass  stability SAFE$", after.output, re.M), (after.output, where)  # fmt: skip
