"""Every command of README.md runs, and says what the README says it says.

The commands are parsed from the README (``tests/docs/_commands.py``): shell blocks and inline
code that starts with a program. Each is either run by a test below (``RUN``: command -> test)
or listed with the reason it is not (``NOT_RUN``); ``test_every_command_is_run_or_listed``
fails on a command in neither list, so a new one cannot go untested. Templates (``SUITE``,
``RUN_ID``, ``T``) run with their placeholders filled in.

The steps build on one ledger, as a reader's would: a copy of the first command's
``llm_connect.db`` in this module's work directory, where the commands run in the README's
order. A claim is checked against the README's own words (``claim``: when the text changes,
the check must change with it); figures to the precision printed, "about X" to within one unit
of X's last digit. Wall times are not checked (they depend on the machine and its load).
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from tests.docs._commands import README, find, unlisted
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
    substitute,
)
from tests.docs.conftest import FIRST, Graded, workdir_for
from tests.fixtures.openai_server import OpenAIServer
from tests.ledger.test_readme_sql import readme_sql_blocks

pytestmark = [pytest.mark.embeddings, pytest.mark.slow]

TASKS = ("summary", "extraction", "support")
EMBEDDING, VRTY = "embedding:all-MiniLM-L6-v2", "vrty:1.0.1"
MINI, LLAMA = "gpt-4o-mini", "llama-3.1-8b"

# -- the commands --------------------------------------------------------------------------------

RUN: dict[str, str] = {
    FIRST: "test_first_command_prints_the_output_shown",
    "llm-connect report -o report.html": "test_report_writes_one_file_that_needs_no_network",
    "llm-connect labels import labels.csv --annotator ana": "test_labels_import_status_and_export",
    "llm-connect labels status": "test_labels_import_status_and_export",
    "llm-connect labels export -o labels.csv": "test_labels_import_status_and_export",
    "llm-connect view": "test_view_serves_a_label_page_with_a_token_and_no_label_serves_read_only",
    "llm-connect view --no-label": "test_view_serves_a_label_page_with_a_token_and_no_label_serves_read_only",
    "llm-connect labels queue --task T --candidate C --rate 0.2": "test_labels_queue_sheet_and_import",
    "llm-connect labels import cases.csv --annotator NAME": "test_labels_queue_sheet_and_import",
    "llm-connect route --target human": "test_route_target_human_prints_the_judge_beside_people",
    "llm-connect route --history --task support": "test_route_history_lists_the_stored_decisions",
    "llm-connect report": "test_report_shows_the_labelling_status",
    "llm-connect ledger failures": "test_ledger_failures_and_the_read_commands",
    "llm-connect ledger summary|show|failures|export|sql": "test_ledger_failures_and_the_read_commands",
    "llm-connect db upgrade|current": "test_db_upgrade_and_current",
    "llm-connect grade --resume RUN_ID --db URL": "test_resume_grades_only_what_is_missing",
    "llm-connect grade --help": "test_grade_help_groups_the_options",
    "llm-connect suite import FILE... -o suite.jsonl": "test_suite_import_and_grade_against_production",
    "llm-connect grade suite.jsonl --baseline recorded:production --candidate openai:gpt-4o-mini": (
        "test_suite_import_and_grade_against_production"
    ),
    "llm-connect grade examples/tools.jsonl -b recorded:gpt-4o -c recorded:gpt-4o-mini -c recorded:llama-3.1-8b"
    " --judge tools": "test_tools_suite_grades_23_conversations",
    "llm-connect route --task support -b gpt-4o -c gpt-4o-mini -j exact --min-stability SAFE": (
        "test_route_min_stability_names_the_missing_analysis"
    ),
    "llm-connect grade SUITE ... --report report.html --junit results.xml": "test_grade_report_and_junit",
    "llm-connect route --task support -b gpt-4o -c gpt-4o-mini -j embedding:all-MiniLM-L6-v2 --slice-by length": (
        "test_route_slice_by_length_prints_the_slice_table"
    ),
    "llm-connect report --target human -o report.html": "test_report_target_human",
    "llm-connect run status RUN_ID [--watch]": "test_run_status_of_a_shared_run",
}

_INSTALLS = "installs packages from the package index (network), which a test must not reach"
_SUITE = "runs the whole test suite (this module included) after installing it; CI runs it"
NOT_RUN: dict[str, str] = {
    "llm-connect judges anchor --judge llm:openai:gpt-4o-mini --task support": (
        "needs a real LLM judge's grades; tests/cli/test_judges_cli.py anchors, checks and accepts a judge"
        " over the loopback server"
    ),
    "llm-connect judges check --judge llm:openai:gpt-4o-mini --task support": (
        "needs a real LLM judge (an OpenAI API key); tests/cli/test_judges_cli.py runs judges check"
    ),
    "python3 -m venv .venv": f"sets up the environment the tests run in; with the next two it {_INSTALLS}",
    ". .venv/bin/activate": "activates the environment the tests already run in",
    "pip install torch==2.13.0 -e .[embeddings]": _INSTALLS,
    "pip install -e .[postgres]": _INSTALLS,
    "./scripts/test": _SUITE,
    ".ci/run": _SUITE,
    "llm-connect labels import": "names the command in prose; its full form (labels import labels.csv) runs",
    "llm-connect stability": "names the command in prose; examples/README.md's stability command runs",
    "llm-connect calibrate --judge pairwise:openai:MODEL --against human": (
        "needs a real LLM judge (a provider's API key or a model server); a stub's verdicts would test nothing"
    ),
    "llm-connect calibrate --judge llm:openai:MODEL --against embedding --against vrty": (
        "needs a real LLM judge (a provider's API key or a model server); a stub's grades would test nothing"
    ),
    "llm-connect calibrate --judge llm:openai:gpt-4o-mini --against embedding --against vrty --probe position"
    " --probe length": "needs a real LLM judge: an OpenAI API key for gpt-4o-mini",
    "python -m llama_cpp.server --model model.gguf --port 8080": (
        "starts a live llama-cpp-python server on a GGUF model (not installed here; a manual check)"
    ),
    "scripts/check_live_server.sh": "needs a live llama-cpp-python server (the command above)",
    "llm-connect stability --input examples/stability-query.json --model openai:gemma-270m --runs 10": (
        "the reported run against a live llama-cpp-python server serving Gemma 3 270M"
    ),
    "llm-connect grade SUITE -b SPEC -c SPEC... -j JUDGE...": (
        "the synopsis of grade; the first command is its concrete form and runs"
    ),
    "llm-connect route --task T -b MODEL -c MODEL... -j GRADER_ID...": (
        "the synopsis of route; its concrete forms (--min-stability, --target human) run"
    ),
    "llm-connect grade suite.jsonl -b openai:gpt-4o -c openai:gpt-4o-mini --judge exact --db"
    " postgresql+psycopg://grader@db.internal/llm --shared --run-id release-42 --rpm 600": (
        "needs an OpenAI API key and the PostgreSQL server db.internal; test_run_status_of_a_shared_run runs"
        " a shared run and run status on the test PostgreSQL with recorded answers"
    ),
    "llm-connect run status release-42 --db postgresql+psycopg://grader@db.internal/llm --watch": (
        "needs the PostgreSQL server db.internal and the live run above; run status runs in"
        " test_run_status_of_a_shared_run"
    ),
    "llm-connect stability --input query.json [--prompt system.txt] [--tools tools.json] --model"
    " openai:gpt-4o-mini --runs 20 [--temperature 0] [--output report.json] [--json]": (
        "the synopsis of stability (the reader's query.json, an OpenAI API key); examples/README.md's"
        " concrete stability command runs against a local server"
    ),
    "llm-connect watch traces.jsonl --task-from task -b openai:gpt-4o -c openai:gpt-4o-mini -j"
    " llm:openai:gpt-4o-mini --sample-rate 0.05 --on-rollback ./page-oncall.sh": (
        "needs an OpenAI API key and the reader's traces; tests/cli/test_watch.py runs watch over the"
        " loopback server (growth, rotation, SIGTERM and resume, a rollback calling the hook)"
    ),
    "sqlite3 llm_connect.db": (
        "an interactive shell; the queries the README pastes into it run in"
        " test_readme_sql_runs_on_the_examples_ledger (and tests/ledger/test_readme_sql.py)"
    ),
    "psql $LLM_CONNECT_DATABASE_URL": (
        "an interactive shell on the reader's PostgreSQL; tests/ledger/test_readme_sql.py runs the"
        " queries on the test PostgreSQL"
    ),
}


def test_every_command_is_run_or_listed() -> None:
    assert unlisted(README, RUN, NOT_RUN, {n for n in globals() if n.startswith("test_")}) == []


# -- the work directory --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory, first_grade: Graded) -> Iterator[Path]:
    yield from workdir_for("readme", tmp_path_factory, first_grade)


def _grades(work: Path) -> int:
    with closing(sqlite3.connect(work / "llm_connect.db")) as con:
        return int(con.execute("SELECT COUNT(*) FROM grades").fetchone()[0])


# -- the first command ----------------------------------------------------------------------------


def test_first_command_prints_the_output_shown(first_grade: Graded, work: Path) -> None:
    assert first_grade.exit_code == 0, first_grade.output
    shown = block_after(README, "On the examples\nit prints (abridged; piped output, a table on a terminal):")
    assert shown_output_matches(shown, first_grade.output) == [], first_grade.output
    run = header(first_grade.output)
    assert (run["cases"], run["rest"].split(" · ")[0]) == ("66", "0 model calls, 0 cached")
    assert _grades(work) == 66 * 2 * 2, claim(README, "Every grade is now in `llm_connect.db`.")


def test_first_command_prints_each_figure_the_readme_lists(first_grade: Graded) -> None:
    claim(README, "the number of cases, the\nmean quality with its anytime-valid confidence bounds, the paired difference to\nthe baseline (for judges that score each response on its own), cost and latency\nrelative to the baseline, and a verdict, then one short line per task saying what\nto route")  # fmt: skip
    figures = stats(first_grade.output)
    assert len(figures) == len(TASKS) * 2 * 2, first_grade.output
    for stat in figures.values():
        assert (stat.delta == "-") == (stat.judge == EMBEDDING), stat  # vrty scores each answer on its own
    assert set(decisions(first_grade.output)) == set(TASKS)


def test_verdicts_are_the_words_the_readme_explains(first_grade: Graded) -> None:
    claim(README, "**proven**: with at least `--min-samples` cases (30)")
    claim(README, "**not settled** (`insufficient` or `undecided`)")
    verdicts = {s.verdict for s in stats(first_grade.output).values()}
    words = {re.sub(r" \(~\d+ more cases\)$", "", v) for v in verdicts}
    assert words <= {"proven", "ruled out", "insufficient", "undecided"}, verdicts
    assert all("more cases" in v for v in verdicts if v.startswith(("insufficient", "undecided"))), verdicts


def test_the_examples_keep_the_baseline_for_the_reasons_given(first_grade: Graded, work: Path) -> None:
    db, figures = work / "llm_connect.db", stats(first_grade.output)
    where = claim(README, "On the examples `gpt-4o-mini` holds up (about 0.97 on both judges at ~1/17 of the\ncost)")  # fmt: skip
    assert about(mean_of(db, MINI, EMBEDDING), "0.97") and about(mean_of(db, MINI, VRTY), "0.97"), where
    with closing(sqlite3.connect(db)) as con:
        base, cand = con.execute(
            "SELECT AVG(baseline_cost_usd), AVG(candidate_cost_usd) FROM grades WHERE candidate_model = ?",
            [MINI],
        ).fetchone()
    assert round(base / cand) == 17, where
    where = claim(README, "21-24 cases per task do not *prove* 0.9 at 95%, so the baseline is\nkept")
    assert {s.n for s in figures.values()} == {21, 24}, where
    assert decisions(first_grade.output) == dict.fromkeys(TASKS, "keep baseline gpt-4o"), where
    where = claim(README, "`llama-3.1-8b` is ruled out on support and summary and not settled yet on extraction.")  # fmt: skip
    llama = {
        (task, judge): figures[(task, LLAMA, judge)].verdict for task in TASKS for judge in (EMBEDDING, VRTY)
    }
    assert all(v == "ruled out" for (task, _), v in llama.items() if task != "extraction"), (llama, where)
    assert all(v.startswith(("insufficient", "undecided")) for (task, _), v in llama.items() if task == "extraction"), (llama, where)  # fmt: skip


@pytest.fixture(scope="module")
def with_exact(work: Path) -> str:
    """The first command again with what the README suggests adding: its output."""
    result = llm(find(README, FIRST), "--judge", "exact", "--route-on", "embedding", "--route-on", "vrty")
    assert result.exit_code == 0, result.output
    return result.output


def test_exact_as_a_diagnostic(first_grade: Graded, with_exact: str) -> None:
    where = claim(README, "Add\n`--judge exact --route-on embedding --route-on vrty` to also see how often the\ncandidates answer word for word like the baseline, without that gating routing.")  # fmt: skip
    figures = stats(with_exact)
    exact = {k: s for k, s in figures.items() if k[2] == "exact"}
    assert len(exact) == len(TASKS) * 2 and all(s.verdict.endswith("(diagnostic)") for s in exact.values()), (
        where
    )
    assert decisions(with_exact) == decisions(first_grade.output), where
    where = claim(README, "re-run on the same ledger it takes\nunder a second, every vector coming from the ledger's embedding cache")  # fmt: skip
    assert re.search(r"^embeddings: 0 text\(s\) embedded, \d+ from the cache", with_exact, re.M), where


# -- the quality gate ----------------------------------------------------------------------------


def _gate(db: Path, *args: str) -> tuple[int, str]:
    argv = [
        "grade",
        "examples/suite.jsonl",
        "-b",
        "recorded:gpt-4o",
        "--judge",
        "vrty",
        "--db",
        f"sqlite:///{db}",
    ]
    result = llm(["llm-connect", *argv, *args])
    return result.exit_code, result.output


def test_quality_gate_has_three_outcomes_with_their_exit_codes(work: Path) -> None:
    """``--min-quality Q`` (an option the README adds to the first command), on the examples."""
    claim(README, "`passed` (exit 0) only when every candidate is proven on every\nusable routing judge")
    code, out = _gate(
        work / "gate-both.db", "-c", f"recorded:{MINI}", "-c", f"recorded:{LLAMA}", "--min-quality", "0.9"
    )
    assert code == 1 and "quality gate FAILED" in out, claim(
        README, "`FAILED` (exit 1) when one is\nruled out"
    )
    mini = ("-c", f"recorded:{MINI}")
    code, out = _gate(work / "gate-mini.db", *mini, "--min-quality", "0.9")
    where = claim(README, "otherwise `NOT SETTLED` (exit 5), naming each unsettled candidate and judge with\nits mean against Q and about how many more cases would settle it")  # fmt: skip
    assert code == 5 and "quality gate NOT SETTLED (min 0.9)" in out, where
    unsettled = [line for line in out.splitlines() if line.startswith(f"  recorded:{MINI} on {VRTY} in ")]
    assert len(unsettled) == 3 and all(re.search(r"mean 0\.\d{3} vs 0\.9, .*about \d+ more cases would settle it", ln) for ln in unsettled), where  # fmt: skip
    code, again = _gate(work / "gate-mini.db", *mini, "--min-quality", "0.9", "--allow-unsettled")
    where = claim(README, "`--allow-unsettled` makes NOT SETTLED exit 0\nwith the same message")
    assert code == 0 and "quality gate NOT SETTLED (min 0.9)" in again, where
    code, out = _gate(work / "gate-mini.db", *mini, "--min-quality", "0.7", "--min-samples", "20", "--json")
    assert code == 0 and json.loads(out)["gate"] == "passed", out
    code, out = _gate(work / "gate-mini.db", *mini, "--min-quality", "0.9", "--json")
    assert code == 5 and json.loads(out)["gate"] == "not settled", claim(README, '`--json` carries `"gate": "passed" | "failed" | "not settled"`')  # fmt: skip


# -- report, labels, view ------------------------------------------------------------------------


def test_report_writes_one_file_that_needs_no_network(work: Path) -> None:
    where = claim(README, "One more command turns that ledger into a single HTML file you can mail (decision,\nevidence, charts and the answers side by side, offline)")  # fmt: skip
    result = llm(find(README, "llm-connect report -o report.html"))
    assert result.exit_code == 0, result.output
    page = (work / "report.html").read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page), where  # nothing to fetch
    for part in ("Decision per task", "Evidence", "Charts", "<svg", "Cases"):
        assert part in page, (part, where)
    assert sum(f"{t}: keep the baseline gpt-4o" in result.output for t in TASKS) == 3, result.output


def _support_cases(n: int) -> list[str]:
    rows = [
        json.loads(line) for line in Path("examples/suite.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return [r["id"] for r in rows if r["task"] == "support"][:n]


@pytest.fixture(scope="module")
def ana_labels(work: Path) -> str:
    """``labels.csv`` (three labels of gpt-4o-mini's support answers) imported: the output."""
    with (work / "labels.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["task", "case_id", "candidate", "preference"])
        for case, preference in zip(_support_cases(3), ("baseline", "tie", "candidate"), strict=True):
            writer.writerow(["support", case, MINI, preference])
    result = llm(find(README, "llm-connect labels import labels.csv --annotator ana"))
    assert result.exit_code == 0, result.output
    return result.output


def test_labels_import_status_and_export(work: Path, ana_labels: str) -> None:
    where = claim(
        README,
        "reads JSONL or\nCSV with `task, case_id, candidate, preference|score[, annotator, note, run_id]`",
    )
    assert "3 written" in ana_labels, (ana_labels, where)
    command = find(README, "llm-connect labels import labels.csv --annotator ana")
    result = llm(command)
    where = claim(README, "The identical label again changes nothing")
    assert result.exit_code == 0 and "0 written, 3 unchanged" in result.output, (result.output, where)
    status = llm(find(README, "llm-connect labels status"))
    where = claim(README, "shows per task and\ncandidate the cases graded and labelled, the annotators")
    row = re.search(rf"^support\s+{MINI}\s+(\d+)\s+(\d+)\s+(\d+)\s", status.output, re.M)
    assert status.exit_code == 0 and row is not None, (status.output, where)
    assert row.groups() == ("24", "3", "1"), (status.output, where)  # graded, labelled, annotators
    exported = llm(find(README, "llm-connect labels export -o labels.csv"))
    assert exported.exit_code == 0, exported.output
    again = llm(command)
    where = claim(README, "writes them back in\na form that imports again")
    assert again.exit_code == 0 and "0 written, 3 unchanged" in again.output, (again.output, where)


def test_view_serves_a_label_page_with_a_token_and_no_label_serves_read_only(work: Path) -> None:
    # --port 0: any free port, so a busy 8765 cannot fail the test (8765 is the default --help shows).
    assert "[default: 8765" in llm(["llm-connect", "view", "--help"]).output
    with serving(find(README, "llm-connect view"), "--port", "0") as printed:
        where = claim(README, "prints\n`label cases at http://127.0.0.1:PORT/label?token=...`")
        match = re.search(
            r"^label cases at (http://127\.0\.0\.1:\d+)/label\?token=([\w-]{20,})$", printed, re.M
        )
        assert match is not None, (printed, where)
        base = match[1]
        status, page = http(f"{base}/label?token={match[2]}")
        assert status == 200 and "<html" in page.lower()
        status, answer = http(f"{base}/api/label", {"ref": "x", "choice": "tie", "annotator": "ana"})
        assert status == 403, (answer, claim(README, "refuses writes without the token"))
    with serving(find(README, "llm-connect view --no-label"), "--port", "0") as printed:
        where = claim(
            README, "`llm-connect view --no-label` serves the report read-only, with no write route at all"
        )
        assert "(read-only; Ctrl-C to stop)" in printed and "label" not in printed, (printed, where)
        base = re.findall(r"serving (http://\S+?)/? ", printed)[0]
        assert http(f"{base}/")[0] == 200
        status, answer = http(f"{base}/api/label", {"ref": "x", "choice": "tie", "annotator": "ana"})
        assert status == 405 and "labelling is off" in answer["error"], (answer, where)


def _fill(sheet: Path, choices: list[str]) -> None:
    """Fill the sheet's ``better`` column with ``choices`` (a blank one leaves the row for later)."""
    with sheet.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= len(choices), rows
    for row, choice in zip(rows, choices, strict=False):
        row["better"] = choice
    with sheet.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_labels_queue_sheet_and_import(work: Path) -> None:
    queue = substitute(find(README, "llm-connect labels queue --task T --candidate C --rate 0.2"), {"T": "support", "C": LLAMA})  # fmt: skip
    # "add `--sheet cases.csv` to `labels queue` for a sheet to hand to annotators"
    result = llm([*queue, "--seed", "7", "--sheet", "cases.csv"])
    where = claim(README, "picks which graded\ncases go to people: each case is decided once")
    assert result.exit_code == 0, (result.output, where)
    with (work / "cases.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    where = claim(README, "(the prompt, both answers in a blind order, and a `better` column to\nfill with 1, 2 or tie)")  # fmt: skip
    assert rows and {"prompt", "answer_1", "answer_2", "better"} <= set(rows[0]), where
    assert all(r["case_id"].startswith("support-") and r["candidate"] == LLAMA for r in rows)
    _fill(work / "cases.csv", ["1"] * (len(rows) - 1))  # the last row left blank
    imported = llm(
        substitute(find(README, "llm-connect labels import cases.csv --annotator NAME"), {"NAME": "bo"})
    )
    assert imported.exit_code == 0 and f"{len(rows) - 1} written" in imported.output, imported.output
    status = llm(find(README, "llm-connect labels status"))
    where = claim(README, "`llm-connect labels status` shows per judge how many chosen cases\nare labelled and how many still wait")  # fmt: skip
    line = next(
        ln.split() for ln in status.output.splitlines() if re.match(rf"support\s+{LLAMA}\s+{VRTY}\s", ln)
    )
    assert line[-2:] == [str(len(rows) - 1), "1"], (status.output, where)  # labelled, waiting: the blank row


def test_route_target_human_prints_the_judge_beside_people(work: Path) -> None:
    command = find(README, "llm-connect route --target human")
    result = llm(command, "--task", "support", "-b", "gpt-4o", "-c", LLAMA, "-j", VRTY)
    assert result.exit_code == 0, result.output
    where = claim(README, "It prints the judge's\nestimate beside the people's")
    assert re.search(rf"{LLAMA}  {VRTY}: judge alone 0\.\d{{3}} \| people 0\.\d{{3}} \[", result.output), (result.output, where)  # fmt: skip
    where = claim(README, "So on this target the default\nthreshold is **0.45**")
    assert "min_quality 0.45" in result.output or ">= 0.45" in result.output, (result.output, where)


def test_route_history_lists_the_stored_decisions(work: Path) -> None:
    """After the README's own `route` commands: their decisions folded into periods, oldest first."""
    slices = "llm-connect route --task support -b gpt-4o -c gpt-4o-mini -j embedding:all-MiniLM-L6-v2 --slice-by length"
    assert llm(find(README, slices)).exit_code == 0  # at least one stored decision of the task
    result = llm(find(README, "llm-connect route --history --task support"))
    assert result.exit_code == 0, result.output
    where = claim(
        README,
        "lists the task's decisions and rollbacks over time\n(runs of the same decision folded into one line",
    )
    lines = result.output.splitlines()
    assert lines[0].startswith("routing history of support ("), (result.output, where)
    events = [line.split()[3] for line in lines[1:] if not line.startswith("      ")]
    assert events and set(events) <= {"routed", "baseline", "rollback"}, (result.output, where)
    data = json.loads(llm(find(README, "llm-connect route --history --task support"), "--json").output)
    assert sum(p["decisions"] for p in data["periods"]) >= 1 and data["task"] == "support"


def test_route_slice_by_length_prints_the_slice_table(work: Path) -> None:
    command = "llm-connect route --task support -b gpt-4o -c gpt-4o-mini -j embedding:all-MiniLM-L6-v2 --slice-by length"
    result = llm(find(README, command))
    assert result.exit_code == 0, result.output
    where = claim(README, "on the example's 24 cases\neach quartile has fewer than the 30 cases a slice needs, so every quartile keeps gpt-4o")  # fmt: skip
    lines = result.output.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("slices of support by length"))
    assert lines[head + 1].split() == ["slice", "cases", "decision", "bound"], (result.output, where)
    rows = [line.split() for line in lines[head + 2 :]]
    assert [r[0] for r in rows] == ["Q1", "Q2", "Q3", "Q4"] and sum(int(r[1]) for r in rows) == 24, where
    assert all(r[2:4] == ["gpt-4o", "(gpt-4o-mini"] and r[4] == "insufficient)" for r in rows), where


def test_report_shows_the_labelling_status(work: Path, ana_labels: str) -> None:
    result = llm(find(README, "llm-connect report"))
    assert result.exit_code == 0, result.output
    page = re.sub(r"<[^>]+>", " ", (work / "report.html").read_text(encoding="utf-8"))
    where = claim(README, "`llm-connect report` shows these figures beside the calibration against other judges, and the\nlabelling status per task and candidate.")  # fmt: skip
    assert re.search(r"Human labels\s+As\s+llm-connect labels status", page), where
    assert re.search(rf"support\s+{MINI}\s+24\s+3\s+1\b", page), where


# -- the ledger ----------------------------------------------------------------------------------


def test_ledger_failures_and_the_read_commands(work: Path) -> None:
    result = llm(find(README, "llm-connect ledger failures"))
    assert result.exit_code == 0 and result.output.strip() == "no failures", result.output
    template = find(README, "llm-connect ledger summary|show|failures|export|sql")
    extra = {"export": ["-o", "grades.jsonl"], "sql": ["SELECT COUNT(*) AS n FROM grades"]}
    for sub in ("summary", "show", "failures", "export", "sql"):
        result = llm(substitute(template, {"summary|show|failures|export|sql": sub}), *extra.get(sub, []))
        assert result.exit_code == 0 and result.output.strip(), (sub, result.output)
    assert len((work / "grades.jsonl").read_text(encoding="utf-8").splitlines()) == _grades(work)


def test_db_upgrade_and_current(work: Path) -> None:
    template = find(README, "llm-connect db upgrade|current")
    upgrade = llm(substitute(template, {"upgrade|current": "upgrade"}))
    assert upgrade.exit_code == 0 and "up to date" in upgrade.output, upgrade.output
    current = llm(substitute(template, {"upgrade|current": "current"}))
    assert current.exit_code == 0 and re.search(r"revision \S+ \(head \S+\) up to date", current.output), (
        current.output
    )


def test_resume_grades_only_what_is_missing(first_grade: Graded, work: Path) -> None:
    run_id = header(first_grade.output)["run_id"]
    command = substitute(find(README, "llm-connect grade --resume RUN_ID --db URL"), {"RUN_ID": run_id, "URL": "sqlite:///llm_connect.db"})  # fmt: skip
    before = _grades(work)
    result = llm(command)
    where = claim(README, "`llm-connect grade --resume RUN_ID --db URL` grades only\nwhat is missing")
    assert result.exit_code == 0, (result.output, where)
    assert "66 already graded · 0 model calls" in header(result.output)[0], (result.output, where)
    assert _grades(work) == before, where


def test_grade_help_groups_the_options() -> None:
    result = llm(find(README, "llm-connect grade --help"))
    listed = "suite and models, judges and the gate, model calls, runs and the ledger, routing policy, output"
    where = claim(README, f"`llm-connect grade --help` groups the options ({listed})")
    groups = [g.casefold() for g in re.findall(r"^([A-Z][a-z ]+):$", result.output, re.M)]
    assert [g for g in groups if g not in ("arguments", "options")] == listed.split(", "), (groups, where)


def test_suite_import_and_grade_against_production(work: Path, openai_server: OpenAIServer) -> None:
    call = {
        "request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "How long is the refund window?"}], "temperature": 0},
        "response": {
            "id": "c1", "object": "chat.completion", "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "14 days from purchase."}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
        },
        "latency_ms": 812.0, "cost_usd": 0.00009,
    }  # fmt: skip
    (work / "calls.jsonl").write_text(json.dumps(call) + "\n", encoding="utf-8")
    imported = llm(
        substitute(
            find(README, "llm-connect suite import FILE... -o suite.jsonl"), {"FILE...": "calls.jsonl"}
        )
    )
    where = claim(README, "`llm-connect suite import FILE... -o suite.jsonl` turns real calls into a suite")
    assert imported.exit_code == 0, (imported.output, where)
    (case,) = [json.loads(line) for line in (work / "suite.jsonl").read_text(encoding="utf-8").splitlines()]
    assert case["responses"]["production"]["text"] == "14 days from purchase.", where
    env = {"OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-test", "LLM_CONNECT_DATABASE_URL": "sqlite:///production.db"}  # fmt: skip
    command = find(
        README, "llm-connect grade suite.jsonl --baseline recorded:production --candidate openai:gpt-4o-mini"
    )
    graded = llm(command, "--judge", "exact", env=env)
    where = claim(
        README,
        "only the candidate is called,\nand the baseline's served model, usage, cost and latency come from the source",
    )
    assert graded.exit_code == 0, (graded.output, where)
    assert [r.body["model"] for r in openai_server.requests_to("/chat/completions")] == [MINI], where
    with closing(sqlite3.connect(work / "production.db")) as con:
        row = con.execute("SELECT baseline_served_model, baseline_cost_usd, baseline_latency_ms, baseline_prompt_tokens FROM grades").fetchone()  # fmt: skip
    assert row == ("gpt-4o-2024-08-06", 0.00009, 812.0, 12), where


def test_tools_suite_grades_23_conversations(work: Path) -> None:
    command = find(README, next(t for t in RUN if t.startswith("llm-connect grade examples/tools.jsonl")))
    result = llm(command)
    where = claim(README, "grades 23 recorded support conversations with tools")
    assert result.exit_code == 0, (result.output, where)
    assert header(result.output)["cases"] == "23", where
    figures = stats(result.output)
    assert {k[1] for k in figures} == {MINI, LLAMA} and {s.n for s in figures.values()} == {23}, where


def test_route_min_stability_names_the_missing_analysis(with_exact: str) -> None:
    # `exact` is graded on support: the README's "Add --judge exact" (with_exact).
    result = llm(
        find(
            README, "llm-connect route --task support -b gpt-4o -c gpt-4o-mini -j exact --min-stability SAFE"
        )
    )
    where = claim(README, "routes only to a candidate that is both\nproven good enough and whose newest analysis on that task is SAFE; the reason says\nwhich candidate lacked an analysis")  # fmt: skip
    assert result.exit_code == 0 and result.output.splitlines()[0] == "gpt-4o", (result.output, where)
    assert f"{MINI}: " in result.output and "no stability analysis stored on support" in result.output, where


def test_grade_report_and_junit(work: Path) -> None:
    template = find(README, "llm-connect grade SUITE ... --report report.html --junit results.xml")
    first = find(README, FIRST).argv[2:]
    result = llm(substitute(template, {"SUITE": first[0], "...": first[1:]}))
    where = claim(README, "`--junit` and `--report` show the same outcome")
    assert result.exit_code == 0, result.output
    cases = ET.parse(work / "results.xml").getroot().iter("testcase")
    outcome = {c.get("name", ""): "failed" if c.find("failure") is not None else "skipped" if c.find("skipped") is not None else "passed" for c in cases}  # fmt: skip
    figures = stats(result.output)
    assert len(outcome) == len(figures), (outcome, where)
    assert sorted(outcome.values()) == sorted("failed" if s.verdict == "ruled out" else "skipped" for s in figures.values()), where  # fmt: skip
    assert (work / "report.html").stat().st_size > 0


def test_report_target_human(work: Path) -> None:
    result = llm(find(README, "llm-connect report --target human -o report.html"))
    where = claim(README, "decide on what people would say (labels)")
    assert result.exit_code == 0 and (work / "report.html").exists(), (result.output, where)
    page = (work / "report.html").read_text(encoding="utf-8")
    assert "people" in page.casefold(), where


@pytest.mark.postgres
def test_run_status_of_a_shared_run(work: Path, postgres_url: str) -> None:
    grade = ["llm-connect", "grade", "examples/tools.jsonl", "-b", "recorded:gpt-4o", "-c", f"recorded:{MINI}", "--judge", "tools"]  # fmt: skip
    result = llm([*grade, "--db", postgres_url, "--shared", "--run-id", "release-42"])
    assert result.exit_code == 0, result.output
    status = llm(substitute(find(README, "llm-connect run status RUN_ID [--watch]"), {"RUN_ID": "release-42", "[--watch]": []}), "--db", postgres_url)  # fmt: skip
    where = claim(
        README,
        "`run status` shows cases done, claimed and left,\nthe workers alive, calls, failures and the rate",
    )
    assert status.exit_code == 0, (status.output, where)
    assert "run release-42: 23 of 23 cases finished, 0 left" in status.output, (status.output, where)


# -- SQL -----------------------------------------------------------------------------------------


def test_readme_sql_runs_on_the_examples_ledger(work: Path) -> None:
    blocks = readme_sql_blocks()
    engine = create_engine(f"sqlite:///{work / 'llm_connect.db'}")
    try:
        with engine.connect() as conn:
            summary, worst, served, cost = (conn.exec_driver_sql(b.strip().rstrip(";")).all() for b in blocks)
    finally:
        engine.dispose()
    assert {(r[0], r[1]) for r in summary} >= {(t, m) for t in TASKS for m in (MINI, LLAMA)}
    assert len(worst) == 10 and all(r[1] for r in worst), claim(README, "The ten worst `support` answers of `gpt-4o-mini`")  # fmt: skip
    assert {r[0] for r in served} >= {MINI, LLAMA}
    ratios = {(r[0], r[2]): r[4] for r in cost if r[0] in TASKS}
    assert all(rounds_to(ratios[(t, MINI)], "0.06") for t in TASKS), ratios
