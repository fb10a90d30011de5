"""One number per headline (issue 34, item 5): the decision's sentence says the number of cases the
row of the judge that settles the candidate prints, and names a likely rule-out."""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path

from tests.cli._util import invoke, pair_suite


def _suite(tmp_path: Path, n: int, wrong: int, cased: int) -> Path:
    """``n`` cases: the first ``wrong`` candidates differ from the baseline (both judges fail them),
    the next ``cased`` differ in case and spacing only (``exact`` fails them, ``exact:normalized``
    passes them), the rest are equal."""
    path = pair_suite(tmp_path / "s.jsonl", n, same=n)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for i, row in enumerate(rows):
        if i < wrong:
            row["candidate_response"]["text"] = f"other {i}"
        elif i < wrong + cased:
            row["candidate_response"]["text"] = row["candidate_response"]["text"].upper().replace(" ", "  ")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_sentence_says_the_rows_number_for_the_rule_out_it_names(tmp_path: Path) -> None:
    # exact: mean 0.833, below 0.9 but not yet ruled out (its row: ~N more cases would rule it
    # out); exact:normalized: mean 0.933, hundreds of cases from proof. The candidate is
    # settled when exact rules it out, so the headline is exact's number, named as a rule-out
    # (it used to be the other judge's hundreds).
    report = tmp_path / "r.html"
    result = invoke(
        "grade", str(_suite(tmp_path, 30, 2, 3)), "--db", f"sqlite:///{tmp_path / 'l.db'}",
        "-j", "exact", "-j", "exact:normalize=true", "--min-quality", "0.9", "--report", str(report),
    )  # fmt: skip
    out = result.stdout
    rows = dict(re.findall(r"judge=(\S+) .*verdict=undecided \(~(\d+) more cases\)", out))
    assert set(rows) == {"exact", "exact:normalized"}, out
    assert int(rows["exact"]) < int(rows["exact:normalized"])
    sentence = " ".join(line.strip() for line in out.split("task qa: keep baseline big")[1].splitlines()[1:3])
    expected = f"small needs about {rows['exact']} more cases (likely to be ruled out)."
    assert expected in sentence, out
    # the gate's line for that judge says the same number
    assert (
        f"on exact in qa: mean 0.833 vs 0.9, bounds [0.562, 1.000], 30 cases; about {rows['exact']} " in out
    )

    page = report.read_text(encoding="utf-8")
    (shown,) = re.findall(r'<p class="sentence">(.*?)</p>', page, re.S)
    assert expected in htmllib.unescape(shown)
    badge = re.search(r'data-judge="exact" data-verdict="undecided">.*?~(\d+) more cases', page, re.S)
    assert badge is not None and badge.group(1) == rows["exact"]


def test_when_every_judge_would_prove_it_the_sentence_says_the_slowest(tmp_path: Path) -> None:
    # exact: mean 0.967, exact:normalized: 1.0; both above 0.9, neither proven on 30 cases. Proof
    # takes both judges: the headline is the larger of the two rows' numbers.
    result = invoke(
        "grade", str(_suite(tmp_path, 30, 0, 1)), "--db", f"sqlite:///{tmp_path / 'l.db'}",
        "-j", "exact", "-j", "exact:normalize=true", "--min-quality", "0.9",
    )  # fmt: skip
    out = result.stdout
    rows = {j: int(m) for j, m in re.findall(r"judge=(\S+) .*verdict=\w+ \(~(\d+) more cases\)", out)}
    assert set(rows) == {"exact", "exact:normalized"} and len(set(rows.values())) == 2, out
    sentence = " ".join(line.strip() for line in out.split("task qa: keep baseline big")[1].splitlines()[1:3])
    assert f"small needs about {max(rows.values())} more cases." in sentence, out
    assert "ruled out" not in sentence
