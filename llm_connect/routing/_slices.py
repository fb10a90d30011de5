"""Per-slice routing decisions, with e-BH across the slices (issue 38).

A whole-task decision can hide a part of the task where the candidate fails (tool calls, one
language, long prompts). Deciding each of ``K`` slices at ``alpha`` would route a bad slice
most of the time; at ``alpha / K`` each (Bonferroni) it would rarely route a good one. e-BH
(Wang & Ramdas, "False discovery rate control with e-values", JRSS-B 84(3), 2022) keeps the
expected share of wrongly routed slices among the routed ones at most ``alpha``, under any
dependence between the slices, from one e-value per slice:

* **The e-value.** For a slice, a judge and a threshold ``q``, the betting capital ``K_t(q)`` of
  :mod:`~llm_connect.routing._betting` over the slice's cases in arrival order, *now* (after
  its last case; never the running maximum). Under "the slice's mean is at most ``q``" it is a
  non-negative supermartingale from 1, so its value at the time the decision is asked (a
  stopping time) has expectation at most 1: an e-value. With several routing judges the slice
  needs every one, and the least of their capitals is an e-value for "below on some judge".
  Below ``min_samples`` cases on a judge the e-value is 0 (never larger than a valid one).
* **e-BH.** Each candidate's ``K`` e-values at its share ``alpha`` of ``1 - confidence``
  (:func:`candidate_alpha`, as the whole-task decision splits it): the ``k*`` largest are
  proven, ``k* = max{k : e_(k) >= K / (k alpha)}`` (:func:`e_bh`).
* **The bounds shown** are those of the capital now at ``alpha k* / K`` (``alpha / K`` when no
  slice is proven): at least ``q`` exactly for the proven slices.

``docs/decisions.md`` ("Slices") has the argument and the measured rates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError
from llm_connect.routing._betting import BetState, betting_bounds, grid, mirror, plugin_weight
from llm_connect.routing._choice import cheapest_proven
from llm_connect.routing._evidence import candidate_alpha
from llm_connect.routing._rollback import slice_watch
from llm_connect.values import (
    INSUFFICIENT,
    LENGTH_SLICES,
    NO_GRADES,
    NO_TOOLS,
    NO_VALUE,
    PROVEN,
    RULED_OUT,
    TOOLS,
    UNDECIDED,
    RoutingDecision,
    RoutingPolicy,
    SliceCandidate,
    SliceDecision,
    SliceDecisions,
    SliceError,
    SliceKey,
    length_cuts,
    parse_slice_key,
    slice_of,
)

if TYPE_CHECKING:
    from llm_connect.ledger import CaseAttributes, QualityLedger

__all__ = ["current_log_capital", "decide_slices", "e_bh", "slice_order"]

_MAX_LOG_E = 690.0
"""e-values are kept below ``exp(690)`` (about 1e300): finite in JSON, far past any threshold."""


def e_bh(e_values: Sequence[float], alpha: float) -> list[bool]:
    """Which hypotheses e-BH rejects at ``alpha`` (Wang & Ramdas 2022): with ``K`` e-values, the
    ``k*`` largest, ``k* = max{k : e_(k) >= K / (k alpha)}`` (none when no ``k`` qualifies).
    The expected share of true hypotheses among the rejected is at most ``alpha K0 / K``
    whatever the dependence between the e-values."""
    import numpy as np

    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, not {alpha!r}")
    e = np.asarray(e_values, dtype=float)
    if e.size == 0:
        return []
    if np.isnan(e).any() or (e < 0.0).any():
        raise ValueError("e-values must be non-negative numbers")
    order = np.argsort(-e, kind="stable")
    ranks = np.arange(1, e.size + 1)
    qualifies = e[order] * ranks * alpha >= e.size  # e_(k) >= K / (k alpha)
    out = np.zeros(e.size, dtype=bool)
    if qualifies.any():
        out[order[: int(ranks[qualifies].max())]] = True
    return [bool(v) for v in out]


def current_log_capital(state: BetState, threshold: float) -> Any:
    """The log capital of the betting mixture at each point of :func:`grid` (``threshold``
    first) after the state's last case: the value now, not the running maximum."""
    import numpy as np

    w = plugin_weight(threshold)
    return np.logaddexp(np.array(state.log_aimed) + math.log1p(-w), np.array(state.log_plugin) + math.log(w))


def _largest_rejected(state: BetState, threshold: float, level: float) -> float:
    """The largest grid mean the capital now rejects at ``level`` (0 when none)."""
    means = grid(threshold)
    rejected = means[current_log_capital(state, threshold) >= math.log(1.0 / level)]
    return float(rejected.max()) if rejected.size else 0.0


def slice_order(key: SliceKey, names: set[str]) -> list[str]:
    """The slices in the order a table lists them: quartiles in order, tools first, else by name
    with :data:`~llm_connect.values.NO_VALUE` last."""
    if key.kind == "length":
        fixed: Sequence[str] = (*LENGTH_SLICES, NO_VALUE)
    elif key.kind == "tools":
        fixed = (TOOLS, NO_TOOLS)
    else:
        return sorted(names - {NO_VALUE}) + ([NO_VALUE] if NO_VALUE in names else [])
    return [n for n in fixed if n in names]


@dataclass
class _Group:
    """One (candidate, judge, slice): its per-case values in arrival order and its betting state."""

    model: str
    grader_id: str
    name: str
    values: Any
    first_ids: Any
    state: tuple[BetState, BetState] | None = None


def decide_slices(
    ledger: QualityLedger,
    whole: RoutingDecision,
    policy: RoutingPolicy,
    key: SliceKey,
) -> SliceDecisions:
    """The decision per slice of ``whole``'s task under ``key``, with e-BH across the slices for
    each candidate at its share of ``1 - confidence``; not stored. ``whole`` is the whole-task
    decision under ``policy`` (its usable judges, thresholds and stability verdicts are the
    slices' too). :class:`~llm_connect.values.SliceError` names ``key`` when no case carries it."""
    import numpy as np

    from llm_connect.ledger import SliceStore

    task, baseline = whole.task, whole.baseline
    cands = [c.model for c in whole.candidates]
    used = list(whole.used_grader_ids)
    thresholds = whole.thresholds()
    store = SliceStore(ledger.engine)
    # the case values first, then their attributes (which then cover every case read)
    series = (
        ledger.case_series(task=task, baseline_model=baseline, candidate_model=cands, grader_id=used)
        if cands and used
        else []
    )
    attrs = store.case_attributes(task, baseline, cands, kind=key.kind)
    if not attrs:
        raise SliceError(str(key), f"task {task!r} has no case graded against {baseline!r} to slice by {key}")
    cuts = _cuts(store, key, task, attrs)
    label = {
        a.first_id: slice_of(
            key, tags=a.tags, metadata=a.metadata, tools=a.tools, prompt_chars=a.prompt_chars, cuts=cuts
        )
        for a in attrs
    }
    members: dict[str, set[str]] = {}
    for a in attrs:
        members.setdefault(label[a.first_id], set()).add(a.case_key)
    if key.kind in ("tag", "meta") and set(members) == {NO_VALUE}:
        what = f"a tag {key.name}:VALUE" if key.kind == "tag" else f"metadata key {key.name!r}"
        raise SliceError(
            str(key), f"no case of task {task!r} has {what}: slice key {key} gives no slice with cases"
        )
    names = slice_order(key, set(members))
    alpha = candidate_alpha(whole.confidence, len(cands))
    bet_alpha = alpha / len(names)

    groups: list[_Group] = []
    for s in series:
        values = np.clip(np.asarray(s.sum_quality, dtype=float) / np.asarray(s.grades, dtype=float), 0.0, 1.0)
        where = np.array([label.get(i, NO_VALUE) for i in s.first_ids], dtype=object)
        ids = np.asarray(s.first_ids, dtype=np.int64)
        for name in names:
            groups.append(
                _Group(s.candidate_model, s.grader_id, name, values[where == name], ids[where == name])
            )
    found = {(g.model, g.name, g.grader_id): g for g in groups}

    # The watch (routing/_rollback.py): the candidate serving each slice in the newest stored
    # slice decision is checked on its slice cases since it was routed; a rolled-back candidate
    # is judged on the slice's cases graded after the rollback only.
    def streams_of(name: str) -> Callable[[str, str, int], list[float]]:
        def stream(model: str, grader_id: str, after_id: int) -> list[float]:
            g = found.get((model, name, grader_id))
            return [] if g is None else list(g.values[g.first_ids > after_id].tolist())

        return stream

    prior = store.newest_slices(task, baseline, str(key))
    before = {s["name"]: s for s in prior[1]["slices"]} if prior is not None else {}
    now = whole.created_at
    plans = {
        name: slice_watch(
            before.get(name), prior[0] if prior is not None else 0, cands,
            streams_of(name), thresholds,
            arl=policy.rollback_arl, alpha=alpha, now=now, watermark=ledger.decision_store.grade_watermark,
        )
        for name in names
    }  # fmt: skip
    for name, plan in plans.items():
        for model, after_id in plan.restrict.items():
            for j in used:
                g = found.get((model, name, j))
                if g is not None:
                    keep = g.first_ids > after_id
                    g.values, g.first_ids = g.values[keep], g.first_ids[keep]
    todo = [g for g in groups if g.values.size]
    if todo:
        _, _, states = betting_bounds(
            [g.values for g in todo],
            [bet_alpha] * len(todo),
            [thresholds[g.grader_id] for g in todo],
            [None] * len(todo),
        )
        for g, state in zip(todo, states, strict=True):
            g.state = state

    stable = {c.model: c.stability_ok for c in whole.candidates}
    log_e: dict[tuple[str, str], float] = {}
    for model in cands:
        for name in names:
            judged = [found.get((model, name, j)) for j in used]
            log_e[(model, name)] = _log_e(judged, thresholds, used, policy.min_samples, stable[model])
    proven: set[tuple[str, str]] = set()
    levels: dict[str, float] = {}
    for model in cands:
        rejected = e_bh([math.exp(log_e[(model, name)]) for name in names], alpha)
        proven |= {(model, name) for name, r in zip(names, rejected, strict=True) if r}
        levels[model] = alpha * max(1, sum(rejected)) / len(names)

    slices = []
    for name in names:
        per = tuple(
            _candidate(
                model,
                [found.get((model, name, j)) for j in used],
                [thresholds[j] for j in used],
                proven=(model, name) in proven,
                e_value=math.exp(log_e[(model, name)]),
                level=levels[model],
                min_samples=policy.min_samples,
            )
            for model in cands
        )
        evidence = [replace(c, passed=(c.model, name) in proven) for c in whole.candidates]
        chosen = cheapest_proven(evidence, cands, prefer=whole.prefer)
        model = baseline if chosen is None else chosen.model
        since, rollback = plans[name].outcome(model, baseline, now, ledger.decision_store.grade_watermark)
        slices.append(
            SliceDecision(
                name=name,
                cases=len(members.get(name, ())),
                model=model,
                candidates=per,
                routed_since=since,
                rollback=rollback,
            )
        )
    return SliceDecisions(
        whole=whole,
        slice_by=str(key),
        slices=tuple(slices),
        alpha=alpha,
        length_cuts=None if cuts is None else tuple(cuts),
    )


def _cuts(store: Any, key: SliceKey, task: str, attrs: Sequence[CaseAttributes]) -> tuple[float, ...] | None:
    """``length``: the cut points the task's first stored length decision fixed, else the
    quartiles of its cases' prompt lengths now (fixed once this decision is stored)."""
    if key.kind != "length":
        return None
    stored = store.length_cuts(task)
    if stored is not None:
        return tuple(stored)
    lengths = {a.case_key: a.prompt_chars for a in attrs if a.prompt_chars is not None}
    if not lengths:
        raise SliceError(
            str(key), f"no case of task {task!r} has its prompt stored: slice key length needs the texts"
        )
    return length_cuts(list(lengths.values()))


def _log_e(
    groups: Sequence[_Group | None],
    thresholds: dict[str, float],
    judges: Sequence[str],
    min_samples: int,
    stable: bool,
) -> float:
    """The log e-value of one (candidate, slice): the least over the judges of the capital at the
    judge's threshold now; ``-inf`` (e-value 0) without a judge, below ``min_samples`` cases on
    one, or when the candidate's stability is not good enough."""
    if not groups or not stable:
        return -math.inf
    worst = math.inf
    for g, judge in zip(groups, judges, strict=True):
        if g is None or g.state is None or g.values.size < min_samples:
            return -math.inf
        worst = min(worst, float(current_log_capital(g.state[0], thresholds[judge])[0]))
    return min(worst, _MAX_LOG_E)


def _candidate(
    model: str,
    groups: Sequence[_Group | None],
    thresholds: Sequence[float],
    *,
    proven: bool,
    e_value: float,
    level: float,
    min_samples: int,
) -> SliceCandidate:
    """One candidate's figures on one slice, the weakest over the judges, bounds at ``level``."""
    sizes = [0 if g is None else int(g.values.size) for g in groups]
    lows: list[float] = []
    highs: list[float] = []
    means: list[float] = []
    ruled_out = False
    for g, q in zip(groups, thresholds, strict=True):
        if g is None or g.state is None:
            continue
        lows.append(_largest_rejected(g.state[0], q, level))
        high = 1.0 - _largest_rejected(g.state[1], mirror(q), level)
        highs.append(high)
        means.append(float(g.values.mean()))
        ruled_out = ruled_out or high < q
    if proven:
        status = PROVEN
    elif ruled_out:
        status = RULED_OUT
    elif not sizes or min(sizes) == 0:
        status = NO_GRADES
    elif min(sizes) < min_samples:
        status = INSUFFICIENT
    else:
        status = UNDECIDED
    complete = bool(sizes) and min(sizes) > 0
    return SliceCandidate(
        model=model,
        status=status,
        n=min(sizes) if sizes else 0,
        mean=min(means) if complete else None,
        lower_bound=min(lows) if complete else None,
        upper_bound=min(highs) if complete else None,
        e_value=e_value,
        level=level,
    )


def check_slicing(policy: RoutingPolicy, slice_by: str | None) -> SliceKey:
    """The slice key a ``decide_slices`` call asks for (``slice_by``, else ``policy.slice_by``),
    checked before anything is read: :class:`~llm_connect.values.SliceError` naming an unknown
    key, :class:`ConfigurationError` for none or a policy whose bounds e-BH cannot use."""
    given = slice_by if slice_by is not None else policy.slice_by
    if given is None:
        raise ConfigurationError("decide_slices needs a slice key: RoutingPolicy.slice_by or slice_by=")
    key = parse_slice_key(given)
    if policy.target != "judge" or policy.fixed_n:
        raise ConfigurationError(
            "slices are decided on the judges' target with anytime-valid bounds "
            "(target='judge', fixed_n=False)"
        )
    return key
