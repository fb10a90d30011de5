"""What the report says in words and pictures: the one-sentence decision, the evidence badges, the
run's failures, the quality gate banner and the cost-quality chart's layout (no browser needed)."""

from __future__ import annotations

import html as htmllib
import re
from pathlib import Path
from typing import Any

import pytest

from llm_connect.errors import ConfigurationError
from llm_connect.ledger import QualityLedger, RecordItem
from llm_connect.report import render_report, write_report
from tests.fixtures.databases import _make_result


def _fill(ledger: QualityLedger, models: dict[str, float], *, cases: int, run_id: str = "r1") -> None:
    """``cases`` grades per candidate on two judges of task ``support``, each near its given mean."""
    items = []
    for cand, mean in models.items():
        for judge in ("embedding", "vrty"):
            for i in range(cases):
                score = min(1.0, max(0.0, mean + ((i * 7919) % 11 - 5) / 400)) if mean > 0 else 0.0
                result = _make_result(
                    score, grader_id=judge, candidate_model=cand, prompt=f"question {i}",
                    baseline_text=f"answer {i} is here", candidate_text=f"answer {i} is there",
                )  # fmt: skip
                items.append(RecordItem(result, task="support", run_id=run_id, case_id=f"support-{i}"))
    ledger.record_batch(items)


def _section(page: str, name: str) -> str:
    found = re.search(rf'<section id="{name}"[^>]*>(.*?)</section>', page, re.S)
    assert found is not None, f"no section#{name}"
    return found.group(1)


def _text(fragment: str) -> str:
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def _decision(ledger: QualityLedger, candidates: list[str]) -> Any:
    from llm_connect.report._decide import decide_task
    from llm_connect.routing import RoutingPolicy

    return decide_task(
        ledger, "support", baseline="gpt-4o", candidates=candidates, grader_ids=["embedding", "vrty"],
        policy=RoutingPolicy(),
    )  # fmt: skip


@pytest.fixture
def ledger(tmp_path: Path) -> QualityLedger:
    return QualityLedger(f"sqlite:///{tmp_path / 'ledger.db'}")


# -- the decision and the evidence --------------------------------------------------------------


def test_an_unsettled_decision_is_one_sentence_with_the_detail_behind_a_disclosure(
    ledger: QualityLedger,
) -> None:
    _fill(ledger, {"mini": 0.99, "llama": 0.2}, cases=12)
    page = render_report(ledger)
    decisions = _section(page, "routing")
    sentences = re.findall(r'<p class="sentence">(.*?)</p>', decisions, re.S)
    assert len(sentences) == 1
    sentence = htmllib.unescape(sentences[0])
    assert re.fullmatch(
        r"Keep gpt-4o: no candidate is proven at 0\.9 yet; mini needs about \d+ more cases, llama "
        r"(?:is ruled out|needs about \d+ more cases)\.",
        sentence,
    ), sentence
    assert sentence.count(". ") == 0 and len(sentence) < 160  # one short sentence
    # the full reason is there once, inside a closed <details> (no JavaScript needed to open it)
    details = re.findall(
        r'<details class="reason">\s*<summary>(.*?)</summary>(.*?)</details>', decisions, re.S
    )
    assert len(details) == 1 and details[0][0] == "Why, judge by judge"
    reason = _decision(ledger, ["mini", "llama"]).decision.reason
    assert _text(details[0][1]).startswith(reason[:60])
    # shown once (the embedded decisions JSON, for programs, aside)
    shown = re.sub(r'<script type="application/json" id="decisions">.*?</script>', "", page, flags=re.S)
    assert shown.count(htmllib.escape(reason[:60], quote=False)) == 1


def test_a_routed_decision_names_the_model_the_judges_and_the_cost(ledger: QualityLedger) -> None:
    from llm_connect.report._summary import decision_sentence

    _fill(ledger, {"mini": 0.995, "llama": 0.1}, cases=60)
    page = render_report(ledger)
    sentence = htmllib.unescape(re.findall(r'<p class="sentence">(.*?)</p>', page, re.S)[0])
    assert (
        sentence
        == "Route to mini instead of gpt-4o: proven at 0.9 on both routing judges, at 0.10x the baseline's cost."
    )
    kept = _decision(ledger, ["llama"]).decision
    assert decision_sentence(kept) == "Keep gpt-4o: no candidate is proven at 0.9; llama is ruled out."


def test_the_evidence_table_shows_badges_and_short_figures_never_the_paragraph(ledger: QualityLedger) -> None:
    _fill(ledger, {"mini": 0.99, "llama": 0.2}, cases=12)
    page = render_report(ledger)
    evidence = _section(page, "evidence")
    assert 'class="why"' not in evidence
    badges = re.findall(r'<span class="verdict v-[a-z-]+" title="([^"]+)">([a-z ]+)</span>', evidence)
    assert len(badges) == 4  # a badge per candidate x judge, its reason on demand (title)
    visible = _text(re.sub(r'title="[^"]*"', "", evidence))
    for why, _status in badges:
        assert htmllib.unescape(why) not in visible
    assert "anytime-valid" not in visible and "min_quality" not in visible
    assert re.search(r"~\d+ more cases", visible)


# -- failures -------------------------------------------------------------------------------------


def test_the_runs_failures_are_listed_whole_and_escaped(ledger: QualityLedger, tmp_path: Path) -> None:
    _fill(ledger, {"mini": 0.99}, cases=12)
    cause = "1 validation error:\nresponse_format.type\n  Input should be 'text' or 'json_object' <b>x</b>\n"
    message = ("ServerError: openai:gemma-270m: Error code: 500 - " + cause * 40)[:2000]
    ledger.record_failure(run_id="r1", case_id="support-90", task="support", stage="judge",
                          error_type="ServerError", message=message, adapter_id="openai:gemma-270m")  # fmt: skip
    ledger.record_failure(run_id="other", case_id="support-91", task="support", stage="candidate",
                          error_type="Timeout", message="not this run")  # fmt: skip
    page = write_report(ledger, tmp_path / "r.html", run_ids=["r1"]).path.read_text("utf-8")
    section = _section(page, "failures")
    cards = re.findall(r'<article class="failure"(.*?)</article>', section, re.S)
    assert len(cards) == 1 and "not this run" not in page
    card = cards[0]
    assert 'data-case="support-90"' in card and 'data-stage="judge"' in card
    for shown in ("support-90", "support", "judge", "openai:gemma-270m", "ServerError", "r1"):
        assert shown in _text(card)
    pre = re.search(r'<pre class="message">(.*?)</pre>', card, re.S)
    assert pre is not None and htmllib.unescape(pre.group(1)) == message  # whole, newlines kept
    assert "<b>x</b>" not in card and "&lt;b&gt;x&lt;/b&gt;" in card
    assert 'href="#failures"' in page and "1 case could not be graded" in _text(page)
    # the whole ledger: both failures; no failures: no section
    assert len(re.findall(r'<article class="failure"', render_report(ledger))) == 2
    empty = QualityLedger(f"sqlite:///{tmp_path / 'empty.db'}")
    _fill(empty, {"mini": 0.99}, cases=12)
    assert 'id="failures"' not in render_report(empty)


# -- the quality gate ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "head"), [("passed", "passed"), ("failed", "FAILED"), ("not settled", "NOT SETTLED")]
)
def test_the_gate_banner_shows_exactly_the_outcome_given(
    ledger: QualityLedger, tmp_path: Path, outcome: str, head: str
) -> None:
    _fill(ledger, {"mini": 0.99}, cases=12)
    lines = ["mini on embedding: mean 0.990 against 0.9, ~18 more cases would settle it <i>"]
    page = write_report(
        ledger, tmp_path / "r.html", gate={"outcome": outcome, "min_quality": 0.9, "lines": lines}
    ).path.read_text("utf-8")
    banner = re.search(r'<section id="gate" class="gate gate-([a-z-]+)" data-outcome="([a-z ]+)"[^>]*>(.*?)</section>', page, re.S)  # fmt: skip
    assert banner is not None and banner.group(2) == outcome
    assert banner.group(1) == outcome.replace(" ", "-")
    text = _text(banner.group(3))
    assert text.startswith(f"Quality gate: {head} (min_quality 0.9)") and lines[0] in text
    assert "&lt;i&gt;" in banner.group(3)
    assert ("passed" in text) == (outcome == "passed")  # never "passed" for another outcome
    assert page.index('id="gate"') < page.index('id="routing"')


def test_without_a_gate_there_is_no_banner_and_a_bad_gate_writes_nothing(
    ledger: QualityLedger, tmp_path: Path
) -> None:
    _fill(ledger, {"mini": 0.99}, cases=12)
    assert 'id="gate"' not in render_report(ledger)
    for bad in ({"outcome": "PASSED"}, {"outcome": "ok"}, {}, {"outcome": "passed", "lines": "x"},
                {"outcome": "passed", "min_quality": 2}, {"outcome": "passed", "extra": 1}):  # fmt: skip
        with pytest.raises(ConfigurationError, match="gate"):
            write_report(ledger, tmp_path / "bad.html", gate=bad)
    assert list(tmp_path.glob("bad.html*")) == [] and list(tmp_path.glob(".bad.html*")) == []


# -- the chart ------------------------------------------------------------------------------------


def _drawn(ledger: QualityLedger) -> tuple[Any, Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from llm_connect.report._charts import cost_quality_figure

    fig = cost_quality_figure(_decision(ledger, ["mini", "zero"]))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return fig, fig.axes[0], canvas.get_renderer()


def test_a_point_at_zero_stays_inside_the_axes(ledger: QualityLedger) -> None:
    _fill(ledger, {"mini": 0.99, "zero": 0.0}, cases=40)
    _fig, ax, renderer = _drawn(ledger)
    low, high = ax.get_ylim()
    assert low <= -0.03 + 1e-9 and low < 0.0 and high >= 1.03 - 1e-9
    box = ax.get_window_extent(renderer)
    y0 = ax.transData.transform((1.0, 0.0))[1]
    assert box.y0 + 3 < y0  # the 0.000 point is drawn above the bottom edge, not on it
    for line in ax.lines:
        if line.get_label() in ("embedding", "vrty"):
            assert not line.get_clip_on()


def test_the_min_quality_label_and_the_legend_are_outside_the_data(ledger: QualityLedger) -> None:
    _fill(ledger, {"mini": 0.99, "zero": 0.0}, cases=40)
    fig, ax, renderer = _drawn(ledger)
    box = ax.get_window_extent(renderer)
    label = next(t for t in ax.texts if t.get_gid() == "min-quality-label")
    where = label.get_window_extent(renderer)
    assert where.x0 >= box.x1  # in the right margin: no error bar can strike it through
    assert where.x1 <= fig.bbox.x1  # and on the figure
    assert not ax.get_legend() and len(fig.legends) == 1
    legend = fig.legends[0].get_window_extent(renderer)
    assert not legend.overlaps(box)  # below the axes: it covers no point
    assert legend.y1 <= ax.xaxis.label.get_window_extent(renderer).y0 and legend.y0 >= fig.bbox.y0
