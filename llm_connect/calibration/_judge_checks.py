"""Judges as instruments (issue 37): freeze an anchor set, check a judge against it, read its history.

:func:`freeze_anchor` picks graded cases of a task (those people labelled first, the rest drawn
with a seed) and freezes the judge's grades of them with the judge's identity. :func:`check_judge`
asks the judge again on every anchored case (the stored prompt, both answers and run settings)
and continues the drift test of ``calibration._drift`` from the anchor's last complete check;
a check where a call failed is stored as ``incomplete`` and never read as stable. Every check
is stored (``ledger._anchors``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from llm_connect.calibration._calibrate import _run_config
from llm_connect.calibration._drift import DEFAULT_TOLERANCE, DriftState, verdict
from llm_connect.errors import CalibrationError, LLMConnectError
from llm_connect.ledger import AnchorCase, AnchorRow, AnchorStore, CheckRow
from llm_connect.values import describe_change, identity_changed, identity_of

if TYPE_CHECKING:
    from llm_connect.grading import Judge
    from llm_connect.ledger import GradeRow, QualityLedger

__all__ = [
    "INCOMPLETE",
    "CheckReport",
    "anchor_store",
    "check_judge",
    "freeze_anchor",
    "judge_identities",
    "last_verdict",
    "people_distance",
    "regrade",
]

INCOMPLETE = "incomplete"
DEFAULT_SIZE = 100


def anchor_store(ledger: QualityLedger) -> AnchorStore:
    """The anchor store over ``ledger``'s engine."""
    return AnchorStore(ledger.engine)


def judge_identities(ledger: QualityLedger, task: str | None = None) -> list[dict[str, Any]]:
    """Each judge with grades (per task): grade count and the served models its grades recorded,
    oldest first (more than one: the model behind the judge's name changed)."""
    return anchor_store(ledger).judge_identities(task)


def latest_with_text(ledger: QualityLedger, grader_id: str, task: str) -> tuple[dict[str, GradeRow], int]:
    """The judge's latest grade of each case of ``task`` whose texts are stored (keyed by case
    id, or prompt digest and candidate without one), and how many grades lacked their texts."""
    latest: dict[str, GradeRow] = {}
    without_text = 0
    for row in ledger.results(grader_id=grader_id, task=task):
        if not _has_text(row):
            without_text += 1
            continue
        latest[row.case_id if row.case_id is not None else f"{row.prompt_sha256}:{row.candidate_model}"] = row
    return latest, without_text


def judge_calls(result: Any) -> int:
    """The model calls behind one grade: none for a judge that asks no model, else one per
    call its details record (a pairwise judge asked in both orders: two)."""
    details = result.details if isinstance(result.details, Mapping) else {}
    if "judge_model" not in details:
        return 0  # no LLM call (exact, tools, embedding, ...)
    usage = details.get("judge_usage")
    return len(usage) if isinstance(usage, list) else 1


def _has_text(row: GradeRow) -> bool:
    return row.prompt is not None and row.baseline_text is not None and row.candidate_text is not None


def freeze_anchor(
    ledger: QualityLedger,
    grader_id: str,
    task: str,
    *,
    size: int = DEFAULT_SIZE,
    seed: int | None = None,
    replace: bool = False,
    tolerance: float = DEFAULT_TOLERANCE,
    note: str | None = None,
) -> AnchorRow:
    """Freeze ``grader_id``'s grades of up to ``size`` cases of ``task`` (its latest grade of
    each case with stored texts): the cases people labelled first, the rest drawn at random
    with ``seed`` (drawn and stored when not given). Raises :class:`CalibrationError` naming
    the judge and task when it has no such grade (nothing written), and the store's
    ``AnchorExistsError`` when an anchor set is active and ``replace`` is false."""
    if size < 1:
        raise CalibrationError(f"an anchor set needs at least one case, not {size}")
    latest, without_text = latest_with_text(ledger, grader_id, task)
    if not latest:
        more = f" ({without_text} without their stored texts)" if without_text else ""
        raise CalibrationError(f"no grades by {grader_id!r} on task {task!r} to anchor{more}")
    seed = random.SystemRandom().randrange(2**62) if seed is None else int(seed)
    candidates = sorted({row.candidate_model for row in latest.values()})
    people = ledger.label_store.case_values(task, candidates)
    keys = sorted(latest)
    labelled = [k for k in keys if (latest[k].candidate_model, latest[k].case_id) in people]
    rest = [k for k in keys if k not in set(labelled)]
    rng = np.random.default_rng(seed)
    chosen = [labelled[i] for i in rng.permutation(len(labelled))]
    chosen += [rest[i] for i in rng.permutation(len(rest))]
    chosen = chosen[:size]
    cases = [
        AnchorCase(i, latest[k].id, latest[k].case_id, latest[k].quality_score, k in set(labelled))
        for i, k in enumerate(chosen)
    ]
    newest = max(latest.values(), key=lambda r: r.id)
    store = anchor_store(ledger)
    why = note or ("replaced the active anchor set" if replace else "first anchor set")
    anchor_id = store.freeze_anchor(
        grader_id=grader_id, task=task, cases=cases, seed=seed, tolerance=tolerance,
        identity=identity_of(newest.details), note=why, replace=replace,
    )  # fmt: skip
    anchor = next(a for a in store.anchors(grader_id, task) if a.id == anchor_id)
    return anchor


@dataclass(frozen=True)
class CheckReport:
    """One check's result as stored and printed."""

    check_id: int
    anchor_id: int
    grader_id: str
    task: str
    status: str
    cases: int
    calls: int
    changed_share: float | None
    mean_change: float | None
    change_upper: float | None
    shift: float | None
    shift_low: float | None
    shift_high: float | None
    checks_so_far: int
    people: Mapping[str, Any]
    identity: Mapping[str, Any]
    identity_changed: bool
    why: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        data = asdict(self)
        data["people"] = dict(self.people)
        data["identity"] = dict(self.identity)
        return data


def last_verdict(ledger: QualityLedger, grader_id: str, task: str) -> CheckRow | None:
    """The newest complete check of ``grader_id``'s active anchor set on ``task`` (``None``: no
    anchor set or no complete check)."""
    store = anchor_store(ledger)
    anchor = store.active_anchor(grader_id, task)
    if anchor is None:
        return None
    done = [c for c in store.checks(anchor.id) if c.status != INCOMPLETE]
    return done[-1] if done else None


def regrade(judge: Judge, rows: Sequence[GradeRow], *, concurrency: int = 4) -> list[Any]:
    """Each stored grade's pair asked of ``judge`` again (the stored prompt, both answers and run
    settings), ``concurrency`` at a time, in order: the new result, or the
    :class:`~llm_connect.errors.LLMConnectError` a failed call raised."""

    def one(row: GradeRow) -> Any:
        config = _run_config(row)
        return judge.judge(
            row.baseline_response, row.candidate_response, prompt=row.prompt or "", run_config=config
        )

    out: list[Any] = []
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for fut in [pool.submit(one, r) for r in rows]:
            try:
                out.append(fut.result())
            except LLMConnectError as exc:
                out.append(exc)
    return out


def people_distance(
    ledger: QualityLedger, task: str, rows: Sequence[GradeRow], grades: Mapping[str, Any]
) -> dict[str, Any]:
    """Each named series of grades (aligned with ``rows``) against people on the rows' cases
    people labelled: ``{"labelled": n, "<name>_mean_abs_diff": mean |grade - people|, ...}``."""
    labels = ledger.label_store.case_values(task, sorted({r.candidate_model for r in rows}))
    human = [labels.get((r.candidate_model, r.case_id or "")) for r in rows]
    keep = [i for i, v in enumerate(human) if v is not None]
    if not keep:
        return {"labelled": 0}
    people = np.array([human[i] for i in keep], dtype=float)
    out: dict[str, Any] = {"labelled": len(keep)}
    for name, values in grades.items():
        out[f"{name}_mean_abs_diff"] = float(np.abs(np.asarray(values, dtype=float)[keep] - people).mean())
    return out


def check_judge(
    ledger: QualityLedger,
    judge: Judge,
    task: str,
    *,
    alpha: float = 0.05,
    concurrency: int = 4,
) -> CheckReport:
    """Ask ``judge`` again on its active anchor set of ``task``, store the check, return it.

    Raises :class:`CalibrationError` when the judge has no anchor set on the task, or when
    anchored cases lost their stored texts (naming them; nothing stored). A failed judge call
    stores the check as ``incomplete`` (the drift test unchanged) and reports it so."""
    grader_id = judge.grader_id
    store = anchor_store(ledger)
    anchor = store.active_anchor(grader_id, task)
    if anchor is None:
        raise CalibrationError(
            f"{grader_id} has no anchor set on task {task!r}: freeze one with "
            f"llm-connect judges anchor --judge {grader_id} --task {task}"
        )
    rows = store.grade_rows([c.grade_id for c in anchor.cases])
    lost = [c for c in anchor.cases if c.grade_id not in rows or not _has_text(rows[c.grade_id])]
    if lost:
        names = ", ".join(str(c.case_id or f"grade {c.grade_id}") for c in lost[:10])
        more = f" and {len(lost) - 10} more" if len(lost) > 10 else ""
        raise CalibrationError(
            f"anchor set {anchor.id}: {len(lost)} anchored case(s) lost their stored texts ({names}{more}); "
            "freeze a new anchor set with --replace"
        )
    previous = [c for c in store.checks(anchor.id) if c.status != INCOMPLETE]
    state = DriftState(**previous[-1].state) if previous else DriftState()

    raw = regrade(judge, [rows[c.grade_id] for c in anchor.cases], concurrency=concurrency)
    results = [None if isinstance(r, LLMConnectError) else r for r in raw]
    errors = [
        f"case {case.case_id or case.grade_id}: {type(r).__name__}: {r}"
        for case, r in zip(anchor.cases, raw, strict=True)
        if isinstance(r, LLMConnectError)
    ]
    calls = sum(judge_calls(r) for r in results if r is not None)
    scores = [None if r is None else float(r.quality_score) for r in results]
    done = [r for r in results if r is not None]
    identity = identity_of(done[-1].details) if done else {}
    changed_identity = bool(identity) and identity_changed(anchor.identity, identity)
    frozen = [c.frozen_score for c in anchor.cases]
    if errors:
        why = f"incomplete: {len(errors)} of {len(anchor.cases)} judge call(s) failed ({errors[0]})"
        check_id = store.record_check(
            anchor_id=anchor.id, status=INCOMPLETE, scores=scores, figures={"errors": errors[:20]},
            state=asdict(state), identity=identity, calls=calls, error="; ".join(errors[:5]),
        )  # fmt: skip
        return CheckReport(
            check_id, anchor.id, grader_id, task, INCOMPLETE, len(anchor.cases), calls, None, None, None,
            None, None, None, state.checks, {}, identity, changed_identity, why,
        )  # fmt: skip
    got = verdict(frozen, scores, state, alpha=alpha, tolerance=anchor.tolerance)
    people = people_distance(
        ledger, task, [rows[c.grade_id] for c in anchor.cases], {"frozen": frozen, "new": scores}
    )
    figures = {
        "changed_share": got.changed_share, "mean_change": got.mean_change, "change_upper": got.change_upper,
        "shift": got.shift, "shift_low": got.shift_low, "shift_high": got.shift_high,
        "tolerance": anchor.tolerance, "alpha": alpha, "people": people,
    }  # fmt: skip
    changed = describe_change(anchor.identity, identity)
    why = got.why + (f"; the judge's identity changed since the anchor: {changed}" * changed_identity)
    check_id = store.record_check(
        anchor_id=anchor.id, status=got.status, scores=scores, figures=figures, state=asdict(got.state),
        identity=identity, calls=calls,
    )  # fmt: skip
    return CheckReport(
        check_id, anchor.id, grader_id, task, got.status, len(anchor.cases), calls, got.changed_share,
        got.mean_change, got.change_upper, got.shift, got.shift_low, got.shift_high, got.state.checks,
        people, identity, changed_identity, why,
    )  # fmt: skip
