"""The report shows the judge's and the people's estimate side by side (issue 23, item 3)."""

from __future__ import annotations

from pathlib import Path

from llm_connect.labels import HumanLabel, choose_for_labels
from llm_connect.ledger import QualityLedger
from llm_connect.report import render_report
from tests.cli._util import invoke, pair_suite


def _graded(tmp_path: Path, n: int = 40) -> str:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    suite = pair_suite(tmp_path / "s.jsonl", n, same=n * 4 // 5)  # the judge (exact) says 0.8
    assert invoke("grade", str(suite), "--db", db).exit_code == 0
    return db


def test_people_row_beside_the_judge_once_cases_are_sampled_and_labelled(tmp_path: Path) -> None:
    db = _graded(tmp_path)
    with QualityLedger(db) as ledger:
        chosen = choose_for_labels(ledger, task="qa", candidate="small", grader_id="exact", rate=0.5, seed=3)
        assert chosen
        # people think the candidate is only half as good as the judge does
        ledger.record_labels(
            [
                HumanLabel("qa", case_id, "small", "ana", preference="tie" if i % 2 else "baseline")
                for i, case_id in enumerate(chosen)
            ]
        )
        html = render_report(ledger, min_quality=0.4)
    assert "what people would say" in html
    assert "judge alone 0.800 | people " in html and f"{len(chosen)} labels used" in html


def test_no_people_row_without_sampling_or_labels(tmp_path: Path) -> None:
    db = _graded(tmp_path)
    with QualityLedger(db) as ledger:
        html = render_report(ledger)
    assert "what people would say" not in html


def test_sampled_but_unlabelled_says_no_labels_yet(tmp_path: Path) -> None:
    db = _graded(tmp_path)
    with QualityLedger(db) as ledger:
        chosen = choose_for_labels(ledger, task="qa", candidate="small", grader_id="exact", rate=0.5, seed=3)
        html = render_report(ledger)
    assert "no human labels yet" in html and f"{len(chosen)} pending" in html
    # the Human labels section says how many chosen cases wait, before anyone has labelled
    assert (
        f"chosen by the label sampler on\n    exact: {len(chosen)} of 40 cases, 0 labelled, {len(chosen)} waiting"
        in html
    )


def test_the_decision_on_what_people_would_say_and_a_bad_target(tmp_path: Path) -> None:
    """``target="human"``: the decision per task is ``Router.decide(target="human")``'s (the judge
    at 0.8 proves 0.5, people who call every other case a tie and prefer the baseline on the
    rest do not); the figures per judge stay the judge's; a target other than judge or human is
    refused naming it."""
    import pytest

    from llm_connect.errors import ConfigurationError
    from llm_connect.routing import Router

    db = _graded(tmp_path, 200)
    with QualityLedger(db) as ledger:
        chosen = choose_for_labels(ledger, task="qa", candidate="small", grader_id="exact", rate=0.5, seed=3)
        ledger.record_labels(
            [
                HumanLabel("qa", c, "small", "ana", preference="tie" if i % 2 else "baseline")
                for i, c in enumerate(chosen)
            ]
        )
        on_judge = render_report(ledger, min_quality=0.5)
        on_people = render_report(ledger, min_quality=0.5, target="human")
        routed = Router(ledger).decide("qa", baseline="big", candidates=["small"], grader_id="exact",
                                       min_quality=0.5, target="human")  # fmt: skip
        with pytest.raises(ConfigurationError, match="target"):
            render_report(ledger, target="people")
    assert 'route to <strong class="model">small</strong>' in on_judge
    assert not routed.routed and 'keep the baseline <strong class="model">big</strong>' in on_people
    assert "<em>by what people would say</em>" in on_people and "by what people would say" not in on_judge
    assert "0.800 [" in on_people  # the judge's own figure is still shown


def test_view_follows_labels_and_decides_on_people(tmp_path: Path) -> None:
    """``view`` re-renders its page when a label arrives (the people's figures depend on labels,
    not only on grades), and ``target="human"`` decides there as in the report."""
    import urllib.request

    from llm_connect.report import serve

    db = _graded(tmp_path)
    with QualityLedger(db) as ledger:
        chosen = choose_for_labels(ledger, task="qa", candidate="small", grader_id="exact", rate=0.5, seed=3)
        server = serve(ledger, port=0, target="human", min_quality=0.4, min_samples=10)
        try:

            def page() -> str:
                with urllib.request.urlopen(server.url, timeout=30) as resp:
                    return str(resp.read().decode("utf-8"))

            before = page()
            assert (
                f"{len(chosen)} pending" in before and 'keep the baseline <strong class="model">big' in before
            )
            ledger.record_labels(
                [HumanLabel("qa", c, "small", "ana", preference="candidate") for c in chosen]
            )
            after = page()
            assert f"{len(chosen)} labels used" in after and "pending" not in after.split("Cases")[0]
            assert 'route to <strong class="model">small</strong>' in after
        finally:
            server.shutdown()
