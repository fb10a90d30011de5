"""``route`` after the switch (issue 38): a rollback said on stderr and handed to the
``--on-rollback`` command as JSON, and ``route --history`` listing decisions and rollbacks."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

from llm_connect.grading import GradingResult
from llm_connect.ledger import QualityLedger
from tests.cli._util import invoke

MakeResult = Callable[..., GradingResult]
ROUTE = ("route", "-t", "qa", "-b", "gpt-4o", "-c", "small", "-j", "exact")


def _record(db: str, make_result: MakeResult, start: int, p: float, n: int, rng: random.Random) -> None:
    with QualityLedger(db) as ledger:
        ledger.record_many(
            [
                make_result(float(rng.random() < p), candidate_model="small", prompt=f"case {i}")
                for i in range(start, start + n)
            ],
            task="qa",
        )


def test_a_rollback_runs_the_hook_and_the_history_shows_it(
    tmp_path: Path, ledger_url: str, make_result: MakeResult
) -> None:
    rng = random.Random(11)
    _record(ledger_url, make_result, 0, 0.99, 300, rng)
    routed = invoke(*ROUTE, "--db", ledger_url)
    assert routed.exit_code == 0 and routed.stdout.splitlines()[0] == "small", routed.output
    assert invoke(*ROUTE, "--db", ledger_url).stdout.splitlines()[0] == "small"

    # the candidate falls; the hook writes what it is given on stdin to a file
    got = tmp_path / "hook.json"
    hook = f"{sys.executable} -c \"import sys; open(sys.argv[1], 'w').write(sys.stdin.read())\" {got}"
    done, fell = 300, None
    for _ in range(30):
        _record(ledger_url, make_result, done, 0.7, 20, rng)
        done += 20
        fell = invoke(*ROUTE, "--db", ledger_url, "--on-rollback", hook)
        assert fell.exit_code == 0, fell.output
        if fell.stdout.splitlines()[0] == "gpt-4o":
            break
    assert fell is not None and fell.stdout.splitlines()[0] == "gpt-4o", fell.output
    assert "rollback: small was rolled back at" in fell.stderr
    sent = json.loads(got.read_text(encoding="utf-8"))
    assert sent["model"] == "gpt-4o" and sent["rollback"]["new"] is True and sent["decision_id"] > 0
    assert sent["rollback"]["model"] == "small" and sent["rollback"]["grader_id"] == "exact"

    # asked again: still the baseline, the rollback carried, the hook not run again
    got.unlink()
    again = invoke(*ROUTE, "--db", ledger_url, "--on-rollback", hook)
    assert again.stdout.splitlines()[0] == "gpt-4o" and "rollback:" not in again.stderr
    assert not got.exists()

    history = invoke("route", "--history", "--task", "qa", "--db", ledger_url)
    assert history.exit_code == 0, history.output
    events = [line.split()[3] for line in history.stdout.splitlines()[1:] if not line.startswith("      ")]
    assert events == ["routed", "rollback"], history.stdout
    assert "small was rolled back at" in history.stdout
    data = json.loads(invoke("route", "--history", "--task", "qa", "--db", ledger_url, "--json").stdout)
    first, second = data["periods"]
    assert (first["event"], first["model"], second["event"], second["model"]) == (
        "routed", "small", "rollback", "gpt-4o"
    )  # fmt: skip
    assert first["decisions"] >= 2 and second["decisions"] == 2  # the rollback and the one after


def test_a_failing_hook_is_a_warning_and_route_needs_its_models(
    ledger_url: str, make_result: MakeResult
) -> None:
    rng = random.Random(12)
    _record(ledger_url, make_result, 0, 1.0, 1_000, rng)
    assert invoke(*ROUTE, "--db", ledger_url).stdout.splitlines()[0] == "small"
    _record(ledger_url, make_result, 1_000, 0.3, 150, rng)
    fell = invoke(*ROUTE, "--db", ledger_url, "--on-rollback", "echo paged >&2; exit 7")
    assert fell.exit_code == 0 and fell.stdout.splitlines()[0] == "gpt-4o", fell.output
    assert "warning: --on-rollback command exited 7: echo paged >&2; exit 7: paged" in fell.stderr

    missing = invoke("route", "-t", "qa", "-j", "exact", "--db", ledger_url)
    assert missing.exit_code == 2 and "--baseline" in missing.output
    empty = invoke("route", "--history", "-t", "nothing", "--db", ledger_url)
    assert empty.exit_code == 0 and "no routing decisions stored for task 'nothing'" in empty.stdout
