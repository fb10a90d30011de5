"""What a Router keeps between ``decide(target="human")`` calls, brought up to date cheaply.

Per (task, candidate), the labels as read so far (:class:`Labels`: each labelled case's
annotators' preferences and scores, and the mark of the last label read); per group (task,
baseline, candidate, grader), the sampled cases as arrays (:class:`Group`: the judge's
value, inclusion probability and whether chosen, in the sampler's order; people's value on
each chosen case) with the bound's running sums at the first pending label, per ``alpha`` and threshold.

A decision reads only what arrived since (:class:`~llm_connect.ledger._design.DesignReader`:
sampling rows past the last position, labels past the last id, with the checks that say
the earlier read still holds), places new and changed labels, and continues the bound
(:func:`~llm_connect.routing._ppi.human_bound_continued`) from its running sums unless a
value before them changed (a label replaced, or one arriving for the pending case the
sequence stopped at: then it continues from that case, which is where the sums stop). A
group whose earlier read no longer holds is read in full. Every figure is that of a full
read and a fresh computation (``tests/routing/test_human_incremental.py``). Entries are
replaced, never changed in place, so a Router shared by threads sees whole entries.

Nothing is stored: a new Router reads each group in full once (a few hundred ms at 100,000
sampled cases), then reads only what arrives (issue 33 retired the stored snapshots that
let a new process skip that read, and the refresh call writers had to remember).
"""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from llm_connect.ledger import DesignMark, DesignReader, DesignRows, join_rows
from llm_connect.values import GraderEvidence, human_value

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger
    from llm_connect.routing._ppi_running import PPIState

__all__ = ["Group", "Labels", "group_evidence", "human_evidence"]

_MAX_ENTRIES = 10_000


@dataclass(frozen=True, slots=True)
class Labels:
    """A candidate's labels on a task as read so far: per case id, the annotators'
    preferences and scores (in id order) and people's value (``None``: neither)."""

    last_id: int
    version: tuple[Any, ...]
    raw: dict[str, tuple[tuple[str, ...], tuple[float, ...]]]
    values: dict[str, float]


@dataclass(frozen=True, slots=True, eq=False)
class Group:
    """One group's sampled cases as read so far, people's values placed on them, and the
    bound's running sums per ``alpha`` and threshold (valid for the first ``state.t`` cases as they are)."""

    rows: DesignRows
    mark: DesignMark
    human: Any
    """People's value per case: NaN where not chosen or not labelled yet."""
    applied: dict[str, float]
    """The label values placed (or found outside the chosen cases), by case id."""
    positions: dict[str, int | None]
    """Sampling position of each labelled case id (``None``: not sampled when last looked)."""
    outside: frozenset[str]
    """Labelled case ids not on a chosen case of :attr:`rows` (left out of the bound)."""
    states: dict[tuple[float, float], PPIState] = field(default_factory=dict)
    evidence: dict[Hashable, GraderEvidence] = field(default_factory=dict)


def _preferences(labels: Labels) -> bool:
    """Whether people's values are preferences (a label with a preference decides a case's
    value, ``human_value``), not scores."""
    return any(prefs for prefs, _ in labels.raw.values())


def _labels(reader: DesignReader, task: str, candidate: str, old: Labels | None) -> Labels:
    """``old`` brought up to date (or read in full)."""
    got = reader.labels_since(
        task, candidate, None if old is None else old.last_id, () if old is None else old.version
    )
    if not got.rows and not got.full and old is not None:
        return old
    raw: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = (
        {} if got.full or old is None else dict(old.raw)
    )
    values = {} if got.full or old is None else dict(old.values)
    empty: tuple[tuple[str, ...], tuple[float, ...]] = ((), ())
    for case_id, preference, score in got.rows:
        prefs, scores = raw.get(case_id, empty)
        raw[case_id] = (
            prefs if preference is None else (*prefs, preference),
            scores if score is None else (*scores, score),
        )
    for case_id in dict.fromkeys(r[0] for r in got.rows):
        value = human_value(*raw[case_id])
        if value is None:
            values.pop(case_id, None)
        else:
            values[case_id] = value
    return Labels(got.last_id, got.version, raw, values)


def _place(
    reader: DesignReader,
    key: tuple[str, str, str, str],
    rows: DesignRows,
    mark: DesignMark,
    old: Group | None,
    labels: Labels,
    known: dict[str, int | None] | None = None,
) -> Group:
    """A group entry for ``rows`` with ``labels`` placed; what ``old`` placed is reused when
    ``rows`` extend ``old.rows`` (``known``: sampling positions found before, which never
    change). The running sums of ``old`` are kept when no value before their end changed."""
    task, _, candidate, grader_id = key
    grown = old is not None and len(rows) > len(old.rows)
    if old is None:
        human = np.full(len(rows), np.nan)
        applied: dict[str, float] = {}
        positions: dict[str, int | None] = {c: p for c, p in (known or {}).items() if p is not None}
        outside: set[str] = set()
        check = set(labels.values)
    else:
        human = (
            old.human
            if not grown
            else np.concatenate((old.human, np.full(len(rows) - len(old.rows), np.nan)))
        )
        applied, positions, outside = old.applied, old.positions, set(old.outside)
        if labels.values is applied:
            check = set(outside) if grown else set()
        else:
            check = {
                c for c in labels.values.keys() | applied.keys() if labels.values.get(c) != applied.get(c)
            }
            if grown:
                check |= outside
        if check:
            applied, positions = dict(applied), dict(positions)
    if not check:
        return Group(
            rows, mark, human, applied, positions, frozenset(outside), dict(old.states) if old else {}
        )
    unknown = [c for c in check if positions.get(c) is None]
    if unknown:
        found = reader.positions(task, candidate, grader_id, unknown)
        for c in unknown:
            positions[c] = found.get(c)
    if old is not None and human is old.human:
        human = human.copy()
    dirty = len(rows)
    # Each labelled case's row (-1: not a chosen case of these rows), found in one search.
    order = list(check)
    wanted = np.fromiter((-1 if (p := positions.get(c)) is None else p for c in order), np.int64, len(order))
    at = np.minimum(np.searchsorted(rows.positions, wanted), max(len(rows) - 1, 0))
    hit = (wanted >= 0) & (rows.positions[at] == wanted) & rows.chosen[at] if len(rows) else wanted < -1
    if old is None:  # every label is new here: placed at once
        values = np.fromiter((labels.values[c] for c in order), float, len(order))
        human[at[hit]] = values[hit]
        outside = {c for c, placed in zip(order, hit.tolist(), strict=True) if not placed}
        return Group(rows, mark, human, labels.values, positions, frozenset(outside))
    rows_of = np.where(hit, at, -1).tolist()
    for c, index in zip(order, rows_of, strict=True):
        value = labels.values.get(c)
        pos = positions.get(c)
        if index < 0:
            if value is not None:
                outside.add(c)
            else:
                outside.discard(c)
        else:
            outside.discard(c)
            new = np.nan if value is None else value
            if not (np.isnan(new) and np.isnan(human[index])) and new != human[index]:
                human[index] = new
                dirty = min(dirty, index)
        if value is None:
            applied.pop(c, None)
            if pos is None:
                positions.pop(c, None)
        else:
            applied[c] = value
    states = {a: s for a, s in (old.states.items() if old else ()) if s.t <= dirty}
    return Group(
        rows,
        mark,
        human,
        labels.values if applied == labels.values else applied,
        positions,
        frozenset(outside),
        states,
    )


def _current(
    reader: DesignReader, key: tuple[str, str, str, str], old: Group | None, labels: Labels
) -> tuple[Group, Group | None]:
    """The group of ``key`` brought up to date, and ``old`` when the group continues it (else
    ``None``): ``old`` (this Router's entry) continued past its mark, else a full read."""
    read = None if old is None else reader.design_since(*key, old.mark)
    if read is None or old is None:
        rows, mark = reader.design(*key)
        known = None if old is None else old.positions
        return _place(reader, key, rows, mark, None, labels, known), None
    return _place(reader, key, join_rows(old.rows, read[0]), read[1], old, labels), old


def _continued(group: Group, alpha: float, min_quality: float, min_samples: int) -> tuple[Any, Any]:
    """The bound over ``group``'s cases at ``alpha``, continued from its running sums there."""
    from llm_connect.routing import _ppi  # looked up at call time (tests watch it)

    rows = group.rows
    return _ppi.human_bound_continued(
        rows.judge,
        rows.inclusion,
        rows.chosen,
        group.human,
        alpha=alpha,
        min_quality=min_quality,
        floor=rows.floor,
        min_samples=min_samples,
        start=group.states.get((alpha, min_quality)),
    )


def group_evidence(
    ledger: QualityLedger,
    task: str,
    baseline: str,
    candidates: Sequence[str],
    grader_ids: Sequence[str],
    *,
    min_quality: float,
    min_samples: int,
    alpha: float,
    cache: MutableMapping[Hashable, Any],
) -> dict[tuple[str, str], GraderEvidence]:
    """Evidence per (candidate, grader id), with ``cache`` (kept by the caller) brought up to date."""
    from llm_connect.routing._human import bound_evidence, rank_agreement  # no import of this module

    reader = DesignReader(ledger.engine)
    if len(cache) > _MAX_ENTRIES:
        cache.clear()
    out: dict[tuple[str, str], GraderEvidence] = {}
    settings = (min_quality, min_samples, alpha)
    for cand in candidates:
        lkey = ("labels", task, cand)
        labels = _labels(reader, task, cand, cache.get(lkey))
        cache[lkey] = labels
        for gid in grader_ids:
            gkey = ("group", task, baseline, cand, gid)
            group, old = _current(reader, (task, baseline, cand, gid), cache.get(gkey), labels)
            rows, mark = group.rows, group.mark
            undecided = mark.id_cases - len(rows)
            hit = None
            if (
                old is not None
                and group.rows is old.rows
                and group.human is old.human
                and group.outside == old.outside
            ):
                hit = old.evidence.get(settings) if old.mark.id_cases == mark.id_cases else None
            if hit is not None:
                ev = hit
            else:
                hb, state = _continued(group, alpha, min_quality, min_samples)
                if state is not None:
                    group.states[(alpha, min_quality)] = state
                ev = bound_evidence(
                    hb, gid, left_out=len(group.outside), undecided=undecided, alpha=alpha,
                    preferences=_preferences(labels), agreement=rank_agreement(group.rows.judge, group.human),
                    min_quality=min_quality,
                )  # fmt: skip
            group.evidence[settings] = ev
            cache[gkey] = group
            out[(cand, gid)] = ev
    return out


def human_evidence(
    ledger: QualityLedger,
    task: str,
    *,
    baseline: str,
    candidates: Sequence[str],
    grader_ids: Sequence[str],
    min_quality: float,
    min_samples: int,
    alpha: float,
    cache: MutableMapping[Hashable, Any] | None = None,
) -> dict[tuple[str, str], GraderEvidence]:
    """Evidence about the mean human quality for every (candidate, grader id) of ``task`` against
    ``baseline``.

    ``cache`` (kept by the caller between calls) holds each group's sampled cases as arrays,
    each candidate's labels and the bound's running sums (``routing/_human_cache.py``): a
    later call reads only what arrived since and continues the bound; the evidence is that of
    a full read and a fresh computation (the tests' oracle, ``tests/routing/_human_group.py``,
    reads every sampled case and label with SQL of its own and computes the bound afresh).
    """
    cands = list(dict.fromkeys(candidates))
    graders = list(dict.fromkeys(grader_ids))
    return group_evidence(
        ledger,
        task,
        baseline,
        cands,
        graders,
        min_quality=min_quality,
        min_samples=min_samples,
        alpha=alpha,
        cache={} if cache is None else cache,
    )
