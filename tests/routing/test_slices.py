"""Router.decide_slices (issue 38): one decision per slice of a task, e-BH across the slices."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import replace

import pytest

from llm_connect._conversation import Conversation
from llm_connect.grading import GradingResult
from llm_connect.ledger import CaseSeries, QualityLedger, RecordItem
from llm_connect.routing import Router, RoutingPolicy, SliceDecisions, SliceError, e_bh
from llm_connect.routing._evidence import assess_many
from llm_connect.values import NO_VALUE, Case, PolicyError, parse_slice_key, slice_of

MakeResult = Callable[..., GradingResult]


def _record(
    ledger: QualityLedger,
    make_result: MakeResult,
    slices: dict[str, float],
    *,
    n: int = 100,
    task: str = "support",
    seed: int = 0,
    prefix: str = "lang",
    spread: float = 0.04,
    prompt_chars: Callable[[str, int], int] | None = None,
    run_id: str = "r1",
) -> None:
    """``n`` cases per slice (tag ``PREFIX:NAME``, metadata ``tier``), values around each slice's
    mean, shuffled so the slices' cases interleave."""
    rng = random.Random(seed)
    items = []
    for name, mean in slices.items():
        for i in range(n):
            score = min(1.0, max(0.0, rng.gauss(mean, spread)))
            chars = 20 if prompt_chars is None else prompt_chars(name, i)
            prompt = f"{name} {i} ".ljust(chars, "x")
            result = make_result(score, candidate_model="mini", grader_id="exact", prompt=prompt)
            items.append(
                RecordItem(
                    result,
                    task,
                    run_id,
                    f"{name}-{i}",
                    (f"{prefix}:{name}", "other"),
                    metadata={"tier": name},
                )
            )
    rng.shuffle(items)
    ledger.record_batch(items)


def _decide(ledger: QualityLedger, key: str, **settings: object) -> SliceDecisions:
    return Router(ledger).decide_slices(
        "support", baseline="gpt-4o", candidates=["mini"], policy=RoutingPolicy(slice_by=key), **settings
    )


def test_membership_by_each_key_kind() -> None:
    tag, meta = parse_slice_key("tag:lang"), parse_slice_key("meta:customer_tier")
    assert slice_of(tag, tags=("x", "lang:fr", "lang:de")) == "fr"  # the first matching tag
    assert slice_of(tag, tags=("lang", "language:fr")) == NO_VALUE  # a prefix is a whole name
    assert slice_of(meta, metadata={"customer_tier": "gold"}) == "gold"
    assert slice_of(meta, metadata={"customer_tier": 2}) == "2"
    assert slice_of(meta, metadata={}) == NO_VALUE
    assert slice_of(parse_slice_key("tools"), tools=True) == "tools"
    assert slice_of(parse_slice_key("tools"), tools=False) == "no tools"
    length, cuts = parse_slice_key("length"), (10.0, 20.0, 30.0)
    assert [slice_of(length, prompt_chars=c, cuts=cuts) for c in (1, 10, 11, 20, 30, 31)] == [
        "Q1", "Q1", "Q2", "Q2", "Q3", "Q4",
    ]  # fmt: skip
    assert slice_of(length, prompt_chars=None, cuts=cuts) == NO_VALUE


def test_an_unknown_key_is_refused_naming_it() -> None:
    for bad in ("lang", "tag:", "meta:", "tags:lang", "Length", "tag: lang"):
        with pytest.raises(SliceError, match="unknown slice key") as info:
            parse_slice_key(bad)
        assert info.value.key == bad
        with pytest.raises(PolicyError) as refused:
            RoutingPolicy(slice_by=bad)
        assert refused.value.field == "slice_by" and repr(bad) in str(refused.value)
    assert RoutingPolicy.from_dict(RoutingPolicy(slice_by="meta:tier").to_dict()).slice_by == "meta:tier"


def test_e_bh_on_hand_checked_e_values() -> None:
    # K = 4, alpha = 0.1: thresholds K / (k alpha) = 40, 20, 13.3, 10
    assert e_bh([50, 20, 3, 0.5], 0.1) == [True, True, False, False]
    # the largest alone misses 40, but three clear 13.3: e-BH rejects three, Bonferroni none
    assert e_bh([25, 30, 1, 25], 0.1) == [True, True, False, True]
    assert e_bh([39, 19, 13, 9.9], 0.1) == [False, False, False, False]
    assert e_bh([10, 10, 10, 10], 0.1) == [True, True, True, True]
    assert e_bh([float("inf"), 0.0], 0.05) == [True, False]
    assert e_bh([], 0.05) == []
    with pytest.raises(ValueError):
        e_bh([-1.0], 0.05)


def test_a_bad_slice_is_not_routed_while_good_ones_are(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    _record(ledger, make_result, {"en": 0.98, "fr": 0.98, "de": 0.6})
    sliced = _decide(ledger, "tag:lang")
    assert [s.name for s in sliced.slices] == ["de", "en", "fr"]
    by = {s.name: s for s in sliced.slices}
    assert by["de"].model == "gpt-4o" and by["de"].candidates[0].status == "ruled out"
    assert by["en"].model == "mini" and by["fr"].model == "mini"
    for name in ("en", "fr"):
        c = by[name].candidates[0]
        assert c.status == "proven" and c.lower_bound is not None and c.lower_bound >= 0.9
        assert c.e_value >= 3 / (0.05 * 2) and c.level == pytest.approx(0.05 * 2 / 3)
    assert by["de"].candidates[0].lower_bound < 0.9  # type: ignore[operator]
    assert all(s.cases == 100 for s in sliced.slices)
    # the whole task hides the bad slice: its mean is below 0.9, so the whole keeps the baseline
    assert sliced.whole.model == "gpt-4o"
    # routing code: a case's slice decides; an unseen slice gets the baseline (the whole was not proven)
    assert sliced.model_for({"tags": ["lang:fr"]}) == "mini"
    assert sliced.model_for(Case(id="x", prompt="p", tags=("lang:de",))) == "gpt-4o"
    assert sliced.model_for({"tags": ["lang:it"]}) == "gpt-4o"
    # stored once, as the whole decision with its slices; reads back equal
    stored = ledger.decisions()
    assert len(stored) == 1 and stored[0] == sliced.whole and stored[0].decision_id == sliced.decision_id
    assert SliceDecisions.from_dict(json.loads(json.dumps(sliced.to_dict()))) == sliced
    # metadata slices give the same answer
    by_meta = {s.name: s.model for s in _decide(ledger, "meta:tier").slices}
    assert by_meta == {"de": "gpt-4o", "en": "mini", "fr": "mini"}


def test_an_unseen_slice_gets_the_whole_tasks_model_only_when_proven(
    ledger: QualityLedger, make_result: MakeResult
) -> None:
    _record(ledger, make_result, {"en": 0.98, "fr": 0.98})
    sliced = _decide(ledger, "tag:lang")
    assert sliced.whole.model == "mini"  # proven on the whole task
    assert sliced.model_for({"tags": ["lang:it"]}) == "mini"
    assert sliced.model_for({}) == "mini"


def test_few_cases_in_a_slice_are_insufficient(ledger: QualityLedger, make_result: MakeResult) -> None:
    _record(ledger, make_result, {"en": 0.99, "fr": 0.99}, n=40)
    by = {s.name: s for s in _decide(ledger, "tag:lang", min_samples=50).slices}
    assert {s.candidates[0].status for s in by.values()} == {"insufficient"}
    assert all(s.model == "gpt-4o" and s.candidates[0].e_value == 0 for s in by.values())


def test_length_quartiles_are_fixed_once_stored(ledger: QualityLedger, make_result: MakeResult) -> None:
    _record(ledger, make_result, {"a": 0.95}, n=40, prompt_chars=lambda _, i: 20 + i)
    first = _decide(ledger, "length")
    assert first.length_cuts == (29.75, 39.5, 49.25)
    assert [s.cases for s in first.slices] == [10, 10, 10, 10]
    # far longer prompts arrive: the quartiles stay where the first stored decision put them
    _record(ledger, make_result, {"b": 0.95}, n=40, prompt_chars=lambda _, i: 500 + i, run_id="r2", seed=1)
    again = _decide(ledger, "length")
    assert again.length_cuts == first.length_cuts
    assert [s.cases for s in again.slices] == [10, 10, 10, 50]
    assert again.model_for({"prompt": "x" * 25}) == again.slice("Q1").model
    with pytest.raises(SliceError, match="no slice 'Q9'"):
        again.slice("Q9")


def test_tools_slices_follow_the_conversation(ledger: QualityLedger, make_result: MakeResult) -> None:
    tools = [{"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}]
    items = []
    for i in range(120):
        offered = i % 2 == 0
        conv = Conversation([{"role": "user", "content": f"q{i}"}], tools=tools if offered else None)
        result = make_result(
            0.99 if offered else 0.5, candidate_model="mini", grader_id="exact", prompt=f"q{i}"
        )
        result = replace(result, conversation=conv)
        items.append(RecordItem(result, "support", "r1", f"c{i}"))
    ledger.record_batch(items)
    sliced = _decide(ledger, "tools", min_samples=10)
    assert [(s.name, s.cases) for s in sliced.slices] == [("tools", 60), ("no tools", 60)]
    assert [s.model for s in sliced.slices] == ["mini", "gpt-4o"]
    case = Case(
        id="n", prompt="p", conversation=Conversation([{"role": "user", "content": "p"}], tools=tools)
    )
    assert sliced.model_for(case) == "mini" and sliced.model_for({"tools": []}) == "gpt-4o"


def test_bad_input_is_named_and_nothing_is_written(ledger: QualityLedger, make_result: MakeResult) -> None:
    _record(ledger, make_result, {"en": 0.98})
    router = Router(ledger)
    with pytest.raises(SliceError, match="unknown slice key 'language'"):
        router.decide_slices("support", baseline="gpt-4o", candidates=["mini"], slice_by="language")
    with pytest.raises(SliceError, match=r"no case of task 'support' has a tag region:VALUE") as info:
        router.decide_slices("support", baseline="gpt-4o", candidates=["mini"], slice_by="tag:region")
    assert info.value.key == "tag:region"
    with pytest.raises(SliceError, match="metadata key 'plan'"):
        router.decide_slices("support", baseline="gpt-4o", candidates=["mini"], slice_by="meta:plan")
    with pytest.raises(SliceError, match="no case graded against 'gpt-4'"):
        router.decide_slices(
            "support", baseline="gpt-4", candidates=["mini"], slice_by="tag:lang", grader_id="exact"
        )
    assert ledger.decisions() == []


def test_fdr_through_the_router_stays_under_alpha_and_beats_bonferroni(
    sqlite_url: str, make_result: MakeResult
) -> None:
    """Seeded, small: 60 runs of 10 slices x 80 cases, 5 slices exactly at min_quality 0.9 (the
    hardest null) and 5 at 0.98 (Beta values, concentration 10), decided once per run through the
    real Router and ledger. The mean share of wrongly routed slices among the routed stays under a
    loose 0.15 (nominal 0.05; measured 0 in 200 runs), e-BH routes most good slices, and more than
    per-slice Bonferroni (the Router's own verdict on each slice at alpha / 10: about 9%)."""
    ledger = QualityLedger(sqlite_url)
    router = Router(ledger)
    rng = random.Random(38)
    fdp, good, bonferroni, runs, n = [], 0, 0, 60, 80
    names = [f"s{k}" for k in range(10)]
    for run in range(runs):
        task = f"t{run}"
        items, per_slice = [], {name: [] for name in names}
        for i in range(n):
            for k, name in enumerate(names):
                mean = 0.9 if k < 5 else 0.98
                score = rng.betavariate(10 * mean, 10 * (1 - mean))
                per_slice[name].append(score)
                result = make_result(score, candidate_model="mini", grader_id="exact", prompt=f"{name} {i}")
                items.append(RecordItem(result, task, task, f"{name}-{i}", (f"s:{name}",)))
        ledger.record_batch(items)
        sliced = router.evaluate_slices(task, baseline="gpt-4o", candidates=["mini"], slice_by="tag:s")
        routed = {s.name for s in sliced.slices if s.routed}
        wrong = set(names[:5]) & routed
        fdp.append(len(wrong) / max(1, len(routed)))
        good += len(routed - wrong)
        series = [
            (CaseSeries(task, "gpt-4o", "exact", "mini", (1,) * n, tuple(v), (0,) * n, (0.0,) * n), "exact")
            for v in per_slice.values()
        ]
        verdicts = assess_many(series, min_quality=0.9, min_samples=30, alpha=0.05 / 10, confidence=0.95)
        bonferroni += sum(v.status == "proven" for v in verdicts[5:])
    assert sum(fdp) / len(fdp) <= 0.15
    assert good >= 0.8 * 5 * runs and good > 2 * bonferroni
    ledger.close()
