"""Which graded cases go to people: choose_for_labels, the queue, --sampled-uniformly
(contracts/labels.md, S1-S7), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from llm_connect.errors import ConfigurationError, LabelError
from llm_connect.grading import GradingResult
from llm_connect.labels import HumanLabel, SamplingStore, choose_for_labels, import_labels
from llm_connect.ledger import QualityLedger, RecordItem

GRADER = "pairwise:openai:judge:pairwise-v1"


def grade_cases(
    ledger: QualityLedger,
    make_result: Callable[..., GradingResult],
    scores: list[float],
    *,
    start: int = 0,
    grader: str = GRADER,
) -> None:
    """Cases ``c{start}..`` of task ``qa``, candidate ``small`` against ``big``, in that order."""
    ledger.record_batch(
        [
            RecordItem(
                make_result(s, candidate_model="small", baseline_model="big", grader_id=grader),
                "qa",
                "r1",
                f"c{start + i:04d}",
            )
            for i, s in enumerate(scores)
        ]
    )


def _rows(ledger: QualityLedger) -> list[tuple[object, ...]]:
    with ledger.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                text(
                    "SELECT case_id, position, inclusion, chosen, strategy, rate, floor, seed "
                    "FROM label_sampling ORDER BY position"
                )
            )
        ]


def test_each_case_is_decided_once_in_arrival_order_and_the_queue_lists_the_chosen(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    grade_cases(ledger, make_result, [0.5] * 50)
    queue = choose_for_labels(ledger, task="qa", candidate="small", grader_id=GRADER, rate=0.2, seed=7)
    rows = _rows(ledger)
    assert [r[0] for r in rows] == [f"c{i:04d}" for i in range(50)]
    assert [r[1] for r in rows] == list(range(50))
    assert {(r[2], r[4], r[5], r[6], r[7]) for r in rows} == {(0.2, "uniform", 0.2, 0.2, 7)}
    assert queue == [r[0] for r in rows if r[3]]
    assert 0 < len(queue) < 25
    # Asked again (other arguments): nothing is redrawn; new cases are decided after the old.
    again = choose_for_labels(ledger, task="qa", candidate="small", grader_id=GRADER, rate=0.9, seed=8)
    assert again == queue and _rows(ledger) == rows
    grade_cases(ledger, make_result, [0.5] * 10, start=50)
    more = choose_for_labels(ledger, task="qa", candidate="small", grader_id=GRADER, rate=1.0, seed=8)
    assert [r[1] for r in _rows(ledger)] == list(range(60))
    assert more == queue + [f"c{i:04d}" for i in range(50, 60)]
    # A label takes a case off the queue.
    ledger.record_labels([HumanLabel("qa", queue[0], "small", "ana", preference="tie")])
    assert SamplingStore(ledger.engine).queue("qa", "small", GRADER) == more[1:]


def test_a_seed_gives_the_same_choices_whatever_the_batches(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    grade_cases(ledger, make_result, [0.5] * 40, grader="g1")
    grade_cases(ledger, make_result, [0.5] * 20, grader="g2")
    one = choose_for_labels(ledger, task="qa", candidate="small", grader_id="g1", rate=0.3, seed=11)
    choose_for_labels(ledger, task="qa", candidate="small", grader_id="g2", rate=0.3, seed=11)
    grade_cases(ledger, make_result, [0.5] * 20, start=20, grader="g2")
    two = choose_for_labels(ledger, task="qa", candidate="small", grader_id="g2", rate=0.3, seed=11)
    assert one == two  # the same cases for every judge: their labels serve each


def test_without_a_seed_every_judge_and_batch_draws_with_the_candidates_first_seed(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    grade_cases(ledger, make_result, [0.5] * 200, grader="g1")
    grade_cases(ledger, make_result, [0.5] * 100, grader="g2")
    one = choose_for_labels(ledger, task="qa", candidate="small", grader_id="g1", rate=0.3)
    first = choose_for_labels(ledger, task="qa", candidate="small", grader_id="g2", rate=0.3)
    grade_cases(ledger, make_result, [0.5] * 100, start=100, grader="g2")
    two = choose_for_labels(ledger, task="qa", candidate="small", grader_id="g2", rate=0.3)
    assert first == [c for c in one if c < "c0100"] and two == one  # one label serves both judges
    with ledger.engine.connect() as conn:
        seeds = set(conn.execute(text("SELECT seed FROM label_sampling")).scalars())
    assert len(seeds) == 1 and None not in seeds
    # Another candidate draws with a seed of its own; an explicit seed is used as given.
    ledger.record_batch(
        [RecordItem(make_result(0.5, candidate_model="tiny", baseline_model="big", grader_id="g1"),
                    "qa", "r1", f"c{i:04d}") for i in range(200)]
    )  # fmt: skip
    choose_for_labels(ledger, task="qa", candidate="tiny", grader_id="g1", rate=0.3)
    assert SamplingStore(ledger.engine).seed("qa", "tiny") not in seeds | {None}
    grade_cases(ledger, make_result, [0.5] * 100, start=200, grader="g1")
    choose_for_labels(ledger, task="qa", candidate="small", grader_id="g1", rate=0.3, seed=99)
    with ledger.engine.connect() as conn:
        late = conn.execute(text("SELECT DISTINCT seed FROM label_sampling WHERE position >= 200"))
        assert set(late.scalars()) == {99}


def test_after_an_imported_sample_the_judges_still_share_one_seed(
    ledger: QualityLedger, make_result: Callable[..., GradingResult], tmp_path: Path
) -> None:
    """A ``--sampled-uniformly`` import stores no seed: the next sampler runs look past it."""
    grade_cases(ledger, make_result, [0.5] * 10, grader="g1")
    grade_cases(ledger, make_result, [0.5] * 10, grader="g2")
    import_labels(ledger, _write(tmp_path / "drawn.jsonl", ["c0003"]), annotator="ana", sampled_uniformly=0.1)
    grade_cases(ledger, make_result, [0.5] * 200, start=10, grader="g1")
    grade_cases(ledger, make_result, [0.5] * 200, start=10, grader="g2")
    one = choose_for_labels(ledger, task="qa", candidate="small", grader_id="g1", rate=0.3)
    two = choose_for_labels(ledger, task="qa", candidate="small", grader_id="g2", rate=0.3)
    assert one == two and len(one) > 20
    assert SamplingStore(ledger.engine).seed("qa", "small") is not None


def test_active_sampling_prefers_the_cases_the_judge_is_unsure_of(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    grade_cases(ledger, make_result, [0.5, 1.0, 0.0, 0.5] * 25)
    choose_for_labels(
        ledger, task="qa", candidate="small", grader_id=GRADER, rate=0.3, strategy="active", seed=3
    )
    rows = _rows(ledger)
    probs = [r[2] for r in rows]
    assert sum(probs) / len(probs) == pytest.approx(0.3)
    floors = {r[6] for r in rows}  # the default floor: ACTIVE_FLOOR (0.9) * rate
    assert min(probs) == pytest.approx(0.27) and len(floors) == 1 and floors.pop() == pytest.approx(0.27)
    assert all(p > 0.3 for p, r in zip(probs, rows, strict=True) if int(r[0][1:]) % 4 in (0, 3))


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"rate": 0.0}, "rate"),
        ({"rate": 1.5}, "rate"),
        ({"rate": float("nan")}, "rate"),
        ({"strategy": "greedy"}, "strategy"),
        ({"strategy": "active", "rate": 0.2, "floor": 0.3}, "floor"),
        ({"strategy": "active", "floor": 0.0}, "floor"),
        ({"floor": 0.1}, "floor"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_arguments_are_refused_naming_them(
    ledger: QualityLedger, kwargs: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named):
        choose_for_labels(ledger, task="qa", candidate="small", grader_id=GRADER, **kwargs)  # type: ignore[arg-type]


def _write(path: Path, cases: list[str]) -> Path:
    path.write_text(
        "".join(
            json.dumps({"task": "qa", "case_id": c, "candidate": "small", "preference": "candidate"}) + "\n"
            for c in cases
        )
    )
    return path


def test_a_file_drawn_uniformly_marks_its_cases_chosen_and_the_rest_not(
    ledger: QualityLedger, make_result: Callable[..., GradingResult], tmp_path: Path
) -> None:
    grade_cases(ledger, make_result, [0.5] * 10)
    path = _write(tmp_path / "drawn.jsonl", ["c0003", "c0007"])
    import_labels(ledger, path, annotator="ana", sampled_uniformly=0.25)
    rows = _rows(ledger)
    assert [(r[0], r[3]) for r in rows if r[3]] == [("c0003", True), ("c0007", True)]
    assert len(rows) == 10 and {(r[2], r[4], r[6], r[7]) for r in rows} == {(0.25, "imported", 0.25, None)}
    # A case decided before cannot be marked as drawn now; nothing of the file is written.
    grade_cases(ledger, make_result, [0.5] * 2, start=10)
    choose_for_labels(ledger, task="qa", candidate="small", grader_id=GRADER, rate=0.5, seed=1)
    again = _write(tmp_path / "again.jsonl", ["c0011", "c0001"])
    with pytest.raises(LabelError, match=r"already decided.*'c0001'") as err:
        import_labels(ledger, again, annotator="bo", sampled_uniformly=0.25)
    assert "again.jsonl" in str(err.value)
    assert [lb.annotator for lb in ledger.labels()] == ["ana", "ana"]
    with pytest.raises(ConfigurationError, match="sampled-uniformly"):
        import_labels(ledger, again, annotator="bo", sampled_uniformly=0.0)


def test_the_queue_command_prints_the_chosen_cases(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    from typer.testing import CliRunner

    from llm_connect.cli import app

    grade_cases(ledger, make_result, [0.5] * 30)
    args = ["labels", "queue", "--task", "qa", "--candidate", "small", "--judge", GRADER, "--db", ledger.url]
    out = CliRunner().invoke(app, [*args, "--rate", "0.3", "--seed", "5", "--json"])
    assert out.exit_code == 0, out.output
    cases = json.loads(out.stdout)["cases"]
    assert cases == SamplingStore(ledger.engine).queue("qa", "small", GRADER) and cases
    bad = CliRunner().invoke(app, [*args, "--rate", "1.5"])
    assert bad.exit_code != 0 and "rate" in bad.output


def test_another_rate_later_notes_the_cases_that_keep_their_earlier_decision(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    from typer.testing import CliRunner

    from llm_connect.cli import app

    grade_cases(ledger, make_result, [0.5] * 20, grader="g1")
    grade_cases(ledger, make_result, [0.5] * 20, grader="g2")
    args = ["labels", "queue", "-t", "qa", "-c", "small", "--seed", "5", "--db", ledger.url]
    first = CliRunner().invoke(app, [*args, "--rate", "0.5"])
    assert first.exit_code == 0 and "note:" not in first.stderr, first.output
    again = CliRunner().invoke(app, [*args, "--rate", "0.5"])  # the same rate: nothing to say
    assert again.exit_code == 0 and "note:" not in again.stderr
    grade_cases(ledger, make_result, [0.5] * 5, start=20, grader="g1")
    grade_cases(ledger, make_result, [0.5] * 5, start=20, grader="g2")
    higher = CliRunner().invoke(app, [*args, "--rate", "0.9", "--json"])
    assert higher.exit_code == 0, higher.output
    assert (
        "note: 20 cases of small on qa were decided earlier at rate 0.5 and keep their decision "
        "(a case is decided once); only the 5 cases not decided yet are decided at rate 0.9\n"
    ) in higher.stderr  # the cases, not the cases times the judges
    rates = {(case, rate) for case, _, _, _, _, rate, _, _ in _rows(ledger)}
    assert {r for c, r in rates if c < "c0020"} == {0.5} and {r for c, r in rates if c >= "c0020"} == {0.9}
    json.loads(higher.stdout)  # the note goes to stderr: --json stays one object
    once = CliRunner().invoke(app, [*args, "--rate", "0.9", "--judge", "g1"])
    assert "note: 20 cases of small on qa were decided earlier at rate 0.5" in once.stderr
    assert "no case is left to decide at rate 0.9" in once.stderr


def test_without_a_judge_the_queue_command_decides_for_every_judge_of_the_candidate(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    from typer.testing import CliRunner

    from llm_connect.cli import app

    grade_cases(ledger, make_result, [0.5, 1.0, 0.0, 0.5] * 25, grader="g1")
    grade_cases(ledger, make_result, [1.0, 0.5, 0.5, 0.0] * 25, grader="g2")
    # One seed: the two judges' probabilities differ on every case (0.27 against 0.33), so a
    # random seed gives the same queue for both about once in 500 runs (0.94 ** 100).
    args = [
        "labels",
        "queue",
        "-t",
        "qa",
        "-c",
        "small",
        "--rate",
        "0.3",
        "--strategy",
        "active",
        "--seed",
        "7",
    ]
    out = CliRunner().invoke(app, [*args, "--db", ledger.url, "--json"])
    assert out.exit_code == 0, out.output
    found = json.loads(out.stdout)
    store = SamplingStore(ledger.engine)
    one, two = store.queue("qa", "small", "g1"), store.queue("qa", "small", "g2")
    assert found["judges"] == {"small": ["g1", "g2"]} and found["judge"] is None
    assert one != two and set(found["cases"]) == set(one) | set(two)  # active: each judge its own
    assert found["cases"] == sorted(found["cases"])  # the order the cases arrived (c0000, c0001, ...)
    assert len(store.decided("qa", "small", "g1")) == len(store.decided("qa", "small", "g2")) == 100


def test_without_a_candidate_the_queue_command_covers_every_candidate_of_the_task(
    ledger: QualityLedger, make_result: Callable[..., GradingResult], tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from llm_connect.cli import app

    grade_cases(ledger, make_result, [0.5] * 40, grader="g1")
    ledger.record_batch(
        [RecordItem(make_result(0.5, candidate_model="tiny", baseline_model="big", grader_id="g1"),
                    "qa", "r1", f"c{i:04d}") for i in range(40)]
    )  # fmt: skip
    sheet = tmp_path / "all.csv"
    args = ["labels", "queue", "-t", "qa", "--rate", "0.5", "--db", ledger.url]
    out = CliRunner().invoke(app, [*args, "--json", "--sheet", str(sheet)])
    assert out.exit_code == 0, out.output
    found = json.loads(out.stdout)
    store = SamplingStore(ledger.engine)
    want = {("small", c) for c in store.queue("qa", "small", "g1")} | {
        ("tiny", c) for c in store.queue("qa", "tiny")
    }
    assert {(c["candidate"], c["case_id"]) for c in found["cases"]} == want and len(want) > 20
    assert found["judges"] == {"small": ["g1"], "tiny": ["g1"]} and found["sheet"]["rows"] == len(want)
    plain = CliRunner().invoke(app, args)
    assert plain.exit_code == 0 and f"{len(want)} chosen case(s) of 2 candidate(s) on qa" in plain.stderr
    assert {tuple(line.split("\t")) for line in plain.stdout.splitlines()} == want


def test_a_mistyped_name_is_an_error_with_the_closest_graded_name_and_writes_nothing(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    """A task, candidate or judge with no grades is a slip, not an empty queue: exit 2 naming it,
    what was graded and the closest graded name; no sampling decision is stored."""
    from typer.testing import CliRunner

    from llm_connect.cli import app

    grade_cases(ledger, make_result, [0.5] * 30)

    def queue(task: str, candidate: str, judge: str) -> Any:
        return CliRunner().invoke(app, ["labels", "queue", "--task", task, "--candidate", candidate,
                                        "--judge", judge, "--db", ledger.url])  # fmt: skip

    judge_name = GRADER.split(":")[0]
    cases = [
        (queue("qa", "small", judge_name), f"judge {judge_name!r} has no grades on task 'qa'; did you mean {GRADER!r}?"),
        (queue("qa", "smal", GRADER), "candidate 'smal' has no grades on task 'qa'; did you mean 'small'?"),
        (queue("q", "small", GRADER), "task 'q' has no grades"),
    ]  # fmt: skip
    for result, message in cases:
        assert result.exit_code == 2 and message in result.output, result.output
    assert SamplingStore(ledger.engine).decided("qa") == {}
    # route prints the same as a note (routing code may ask about a candidate not graded yet).
    routed = CliRunner().invoke(app, ["route", "-t", "qa", "-b", "big", "-c", "smal", "-j", GRADER,
                                      "--db", ledger.url])  # fmt: skip
    assert routed.exit_code == 0 and "note: candidate 'smal' has no grades on task 'qa'" in routed.output


def test_status_shows_how_far_people_are_with_the_chosen_cases(
    ledger: QualityLedger, make_result: Callable[..., GradingResult]
) -> None:
    """``label_status`` / ``labels status``: per judge the sampler ran for, the cases it decided and
    chose and how many of those have a label (anyone's) or still wait; a label of a case it did
    not choose counts as labelled for the task, not for the sample."""
    from typer.testing import CliRunner

    from llm_connect.cli import app
    from llm_connect.labels import SamplingProgress, label_status

    grade_cases(ledger, make_result, [0.5] * 30)
    chosen = choose_for_labels(ledger, task="qa", candidate="small", grader_id=GRADER, rate=0.5, seed=4)
    unchosen = sorted(
        set(SamplingStore(ledger.engine).decided("qa")) - {("small", GRADER, c) for c in chosen}
    )
    ledger.record_labels(
        [HumanLabel("qa", c, "small", "ana", preference="candidate") for c in chosen[:3]]
        + [HumanLabel("qa", c, "small", "bo", preference="tie") for c in chosen[:1]]
        + [HumanLabel("qa", unchosen[0][2], "small", "ana", preference="baseline")]
    )
    (row,) = label_status(ledger, task="qa")
    assert row.cases_labelled == 4
    assert row.sampling == (SamplingProgress(GRADER, 30, len(chosen), 3, len(chosen) - 3),)
    plain = CliRunner().invoke(app, ["labels", "status", "--db", ledger.url])
    assert plain.exit_code == 0, plain.output
    assert "chosen by the label sampler" in plain.stdout
    line = next(x for x in plain.stdout.splitlines() if x.startswith("qa") and GRADER in x)
    assert line.split()[-4:] == ["30", str(len(chosen)), "3", str(len(chosen) - 3)]
    as_json = json.loads(CliRunner().invoke(app, ["labels", "status", "--db", ledger.url, "--json"]).stdout)
    assert as_json[0]["sampling"] == [
        {"grader_id": GRADER, "decided": 30, "chosen": len(chosen), "labelled": 3, "waiting": len(chosen) - 3}
    ]
