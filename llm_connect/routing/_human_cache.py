"""What a Router keeps between ``decide(target="human")`` calls, brought up to date cheaply.

Per (task, candidate), the labels as read so far (:class:`Labels`: each labelled case's
annotators' preferences and scores, and the mark of the last label read); per group (task,
baseline, candidate, grader), the sampled cases as arrays (:class:`Group`: the judge's
value, inclusion probability and whether chosen, in the sampler's order; people's value on
each chosen case) with the bound's running sums at the first pending label, per ``alpha``.

A decision reads only what arrived since (:class:`~llm_connect.ledger._design.DesignReader`:
sampling rows past the last position, labels past the last id, with the checks that say
the earlier read still holds), places new and changed labels, and continues the bound
(:func:`~llm_connect.routing._ppi.human_bound_continued`) from its running sums unless a
value before them changed (a label replaced, or one arriving for the pending case the
sequence stopped at: then it continues from that case, which is where the sums stop). A
group whose earlier read no longer holds is read in full. Every figure is that of a full
read and a fresh computation (``tests/routing/test_human_incremental.py``). Entries are
replaced, never changed in place, so a Router shared by threads sees whole entries.

A new Router (a new process) starts from the group as an earlier decision stored it
(``evidence_snapshots`` under :func:`snapshot_settings`, encoded by ``_human_snapshot``): the arrays and
their mark, the sampling positions of the labelled cases, and the bound's running sums with a
digest of people's values they were computed on. It reads only what arrived past the mark,
with the same checks (a re-graded case, a case joining before the mark: a full read), places
the labels read in full, and continues each sum whose digest still matches (a label replaced
or added before its end: that sum starts again). A decision stores the group again when none
is stored or :func:`_stale` cases arrived since the stored one; deleting those rows is safe.

The writes that add sampled cases or labels store it too (:func:`refresh_stored`, called by
``choose_for_labels`` and ``import_labels`` after their transaction), with the positions of
every chosen case and the running sums at the default ``alpha`` and those decisions asked for:
reading 100,000 sampled cases joined to their grades costs more than a decision may (issue 23:
50 ms), so it happens at write time and the first decision after the sampler or an import
restores the group like any new Router.
"""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from llm_connect.ledger._decisions import DecisionStore, evidence_snapshot_rows, write_evidence_snapshots
from llm_connect.ledger._design import DesignMark, DesignReader, DesignRows, join_rows
from llm_connect.ledger._engine import write
from llm_connect.routing._human_snapshot import decode_snapshot, digest_of, encode_group, snapshot_settings
from llm_connect.values import GraderEvidence, human_value

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from llm_connect.ledger import QualityLedger
    from llm_connect.routing._ppi_running import PPIState

__all__ = ["Group", "Labels", "group_evidence", "human_evidence", "refresh_stored", "snapshot_settings"]

_MAX_ENTRIES = 10_000
_ALPHAS = 4
_STORE_EVERY = 500
"""A group is stored again once this many cases (or a 200th of its cases, if more) arrived since
the stored one: a new Router reads and continues over at most about that many."""


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
    bound's running sums per ``alpha`` (valid for the first ``state.t`` cases as they are)."""

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
    states: dict[float, PPIState] = field(default_factory=dict)
    evidence: dict[Hashable, GraderEvidence] = field(default_factory=dict)
    stored: tuple[int, int] | None = None
    """The cases and the running sums' greatest ``t`` of the group's stored snapshot (``None``:
    none that this entry knows of, or its sums no longer hold)."""
    alphas: tuple[float, ...] = ()
    """The ``alpha`` of the latest decisions on the group other than the default (at most
    :data:`_ALPHAS`, newest last): :func:`refresh_stored` brings the running sums of these (and
    the default's) up to date."""


def _restore(
    reader: DesignReader, key: tuple[str, str, str, str], snap: dict[str, Any], labels: Labels
) -> Group | None:
    """The group as ``snap`` stored it, brought up to date; ``None``: read it in full (the
    snapshot is unreadable, or more changed than new cases)."""
    from llm_connect.routing._ppi_running import PPIState

    parsed = decode_snapshot(snap)
    if parsed is None:
        return None
    rows, mark, known, sums, alphas = parsed
    read = reader.design_since(*key, mark)
    if read is None:
        return None
    group = _place(reader, key, join_rows(rows, read[0]), read[1], None, labels, known)
    kept = 0
    for st, digest in sums:
        if (
            isinstance(st, PPIState)
            and st.t <= len(group.rows)
            and digest_of(group.rows, group.human, st.t) == digest
        ):
            group.states[st.alpha] = st
            kept += 1
    stored = (len(rows), max((s.t for s, _ in sums), default=0)) if kept == len(sums) else None
    return replace(group, stored=stored, alphas=alphas)


def _progress(group: Group) -> tuple[int, int]:
    """The group's cases and its running sums' greatest ``t``."""
    return len(group.rows), max((s.t for s in group.states.values()), default=0)


def _stale(group: Group) -> bool:
    """Whether a decision should store ``group``: none stored, or the cases or the running sums
    went on by enough since the stored one (a new Router would read or sum them again)."""
    n, t = _progress(group)
    if group.stored is None:
        return n > 0
    step = max(_STORE_EVERY, n // 200)
    return n - group.stored[0] >= step or t - group.stored[1] >= step


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
    stored = None if old is None else old.stored
    if not check:
        return Group(
            rows,
            mark,
            human,
            applied,
            positions,
            frozenset(outside),
            dict(old.states) if old else {},
            {},
            stored,
            () if old is None else old.alphas,
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
        return Group(rows, mark, human, labels.values, positions, frozenset(outside), {}, {}, None)
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
        {},
        stored,
        () if old is None else old.alphas,
    )


def _stored_json(entry: tuple[Any, Any] | None) -> dict[str, Any] | None:
    """The JSON of a stored group (``evidence_snapshots`` entry), if it is one."""
    return entry[1] if entry is not None and isinstance(entry[1], dict) else None


def _current(
    reader: DesignReader,
    key: tuple[str, str, str, str],
    old: Group | None,
    snap: dict[str, Any] | None,
    labels: Labels,
) -> tuple[Group, Group | None]:
    """The group of ``key`` brought up to date, and ``old`` when the group continues it (else
    ``None``): ``old`` (this Router's entry) continued past its mark, else the stored ``snap``
    restored (:func:`_restore`), else a full read."""
    if old is None and snap is not None:
        restored = _restore(reader, key, snap, labels)
        if restored is not None:
            return restored, None
    read = None if old is None else reader.design_since(*key, old.mark)
    if read is None or old is None:
        rows, mark = reader.design(*key)
        if old is None:
            return _place(reader, key, rows, mark, None, labels), None
        group = _place(reader, key, rows, mark, None, labels, old.positions)
        return replace(group, alphas=old.alphas), None
    return _place(reader, key, join_rows(old.rows, read[0]), read[1], old, labels), old


def _default_alpha() -> float:
    """The ``alpha`` of a decision over one candidate at the default confidence (0.95), whose
    running sums :func:`refresh_stored` always keeps current."""
    from llm_connect.routing._evidence import candidate_alpha

    return candidate_alpha(0.95, 1)


def _with_chosen(reader: DesignReader, key: tuple[str, str, str, str], group: Group) -> Group:
    """``group`` knowing the sampling position of every chosen case (so that a decision places
    their labels when they arrive without looking the positions up)."""
    task, _, candidate, grader_id = key
    known = {p for p in group.positions.values() if p is not None}
    missing = [p for p in group.rows.positions[group.rows.chosen].tolist() if p not in known]
    if not missing:
        return group
    found = reader.chosen_from(task, candidate, grader_id, min(missing))
    return replace(group, positions={**group.positions, **found})


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
        start=group.states.get(alpha),
    )


def _snapshot_rows(task: str, baseline: str, groups: list[tuple[str, str, Group]]) -> list[dict[str, Any]]:
    """The ``evidence_snapshots`` rows that store ``(candidate, grader id, group)`` each."""
    return evidence_snapshot_rows(
        task,
        baseline,
        snapshot_settings(),
        [(c, g, (grp.mark.grades, grp.mark.sum_quality, 0.0), encode_group(grp)) for c, g, grp in groups],
    )


def _write_snapshots(engine: Engine, rows: list[dict[str, Any]]) -> None:
    """Store ``rows`` (of :func:`_snapshot_rows`) in one transaction; nothing without rows."""
    if rows:
        write(engine, "storing the human target's running state", lambda c: write_evidence_snapshots(c, rows))


def refresh_stored(
    engine: Engine, task: str, candidates: Sequence[str], grader_ids: Sequence[str] | None = None
) -> int:
    """Bring the stored state of the human target up to date, as a write that changed it leaves
    it: for each group (baseline, grader) of ``candidates`` on ``task`` (model names, or adapter
    ids, as graded; every grader, or those of ``grader_ids``), the stored group restored (or
    read in full), the sampled cases and labels past its mark read and placed, the positions of
    its chosen cases added, the running sums continued at the default ``alpha`` (one candidate,
    confidence 0.95) and at each ``alpha`` the latest decisions asked for, and the group stored
    again. The sampler (``choose_for_labels``) and ``import_labels`` call it after their writes,
    so the first ``decide(target="human")`` after them restores this instead of reading every
    sampled case. A new Router checks what it restores as ever, so the figures stay those of a
    full read and a fresh computation whatever happens in between. Returns the groups stored."""
    reader = DesignReader(engine)
    wanted = None if grader_ids is None else set(grader_ids)
    snapshots = DecisionStore(engine)
    labels: dict[str, Labels] = {}
    stored: dict[str, dict[tuple[str, str], Any]] = {}
    rows_out: list[dict[str, Any]] = []
    for cand, baseline, gid in reader.groups(task, candidates):
        if wanted is not None and gid not in wanted:
            continue
        if cand not in labels:
            labels[cand] = _labels(reader, task, cand, None)
        if baseline not in stored:
            stored[baseline] = snapshots.evidence_snapshots(
                task=task, baseline_model=baseline, settings=snapshot_settings()
            )
        key = (task, baseline, cand, gid)
        group, _ = _current(reader, key, None, _stored_json(stored[baseline].get((cand, gid))), labels[cand])
        rows = group.rows
        if not len(rows):
            continue
        group = _with_chosen(reader, key, group)
        for alpha in dict.fromkeys((_default_alpha(), *group.alphas)):
            _, state = _continued(group, alpha, 0.5, 2)  # the running sums depend on neither setting
            if state is not None:
                group.states[alpha] = state
        rows_out += _snapshot_rows(task, baseline, [(cand, gid, group)])
    _write_snapshots(engine, rows_out)
    return len(rows_out)


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
    from llm_connect.routing._human import bound_evidence  # _human imports nothing from here

    reader = DesignReader(ledger.engine)
    if len(cache) > _MAX_ENTRIES:
        cache.clear()
    out: dict[tuple[str, str], GraderEvidence] = {}
    settings = (min_quality, min_samples, alpha)
    stored: dict[tuple[str, str], Any] | None = None
    to_store: list[tuple[str, str, Group]] = []
    for cand in candidates:
        lkey = ("labels", task, cand)
        labels = _labels(reader, task, cand, cache.get(lkey))
        cache[lkey] = labels
        for gid in grader_ids:
            gkey = ("group", task, baseline, cand, gid)
            snap = None
            if gkey not in cache:
                if stored is None:
                    stored = ledger.evidence_snapshots(
                        task=task, baseline_model=baseline, settings=snapshot_settings()
                    )
                snap = _stored_json(stored.get((cand, gid)))
            group, old = _current(reader, (task, baseline, cand, gid), cache.get(gkey), snap, labels)
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
                    start = group.states.get(alpha)
                    if start is None or (start.floor, start.share) != (state.floor, state.share):
                        group = replace(group, stored=None)  # the sums started again: store them
                    group.states[alpha] = state
                if alpha not in group.alphas and alpha != _default_alpha():  # for refresh_stored
                    group = replace(group, alphas=(*group.alphas, alpha)[-_ALPHAS:], stored=None)
                ev = bound_evidence(hb, gid, left_out=len(group.outside), undecided=undecided, alpha=alpha)
            if _stale(group):
                to_store.append((cand, gid, group))
                group = replace(group, stored=_progress(group))
            group.evidence[settings] = ev
            cache[gkey] = group
            out[(cand, gid)] = ev
    _write_snapshots(ledger.engine, _snapshot_rows(task, baseline, to_store))
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
