"""``grade --route-on``: only the named judges decide routing and the quality gate."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli._util import invoke, pair_suite


def _suite(tmp_path: Path) -> Path:
    # Candidates differ from the baseline in wording only, so exact fails and normalised-exact
    # passes on every case: "answer i" vs "ANSWER  i".
    path = pair_suite(tmp_path / "s.jsonl", 60, same=60)  # enough cases to prove 0.9
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for row in lines:
        row["candidate_response"]["text"] = row["candidate_response"]["text"].upper().replace(" ", "  ")
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_every_judge_gates_by_default(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    result = invoke(
        "grade",
        str(_suite(tmp_path)),
        "--db",
        db,
        "-j",
        "exact",
        "-j",
        "exact:normalize=true",
        "--min-quality",
        "0.9",
        "--min-samples",
        "2",
        "--json",
    )
    data = json.loads(result.stdout)
    assert result.exit_code == 1
    assert [g.rsplit(" / ", 1)[1] for g in data["gate_failed"]] == ["exact"]
    assert data["routing"][0]["model"] == "big"


def test_route_on_limits_routing_and_the_gate_to_the_named_judges(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    result = invoke(
        "grade",
        str(_suite(tmp_path)),
        "--db",
        db,
        "-j",
        "exact",
        "-j",
        "exact:normalize=true",
        "--route-on",
        "exact:normalized",
        "--min-quality",
        "0.9",
        "--min-samples",
        "2",
        "--json",
        "--report",
        str(tmp_path / "r.html"),
    )
    data = json.loads(result.stdout)
    assert result.exit_code == 0, result.stdout
    assert data["gate_failed"] == []
    assert data["routing"][0]["model"] == "small"
    # --report decides on the same judges (it used to ignore --route-on and keep the baseline).
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'route to <strong class="model">small</strong> instead of big' in html
    # the diagnostic judge is still graded and reported
    assert {s["grader_id"] for s in data["stats"]} == {"exact", "exact:normalized"}


def test_route_on_an_unknown_judge_is_a_usage_error_before_any_write(tmp_path: Path) -> None:
    db_path = tmp_path / "l.db"
    result = invoke(
        "grade",
        str(_suite(tmp_path)),
        "--db",
        f"sqlite:///{db_path}",
        "-j",
        "exact",
        "--route-on",
        "vrty",
    )
    assert result.exit_code == 2
    assert "--route-on 'vrty' names none of the run's judges" in result.output
    assert not db_path.exists()
