"""``--slice-by KEY`` for ``route`` and ``grade``: the option, its checks, and the slice table.

The table is one line per slice (slice, cases, decision, bound) under a heading that names the
key, the e-BH level and the number of slices; the decisions come from ``Router.decide_slices``
(``routing/_slices.py``) and nothing here computes a figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer

from llm_connect.cli._common import fail

__all__ = ["SliceBy", "check_suite_has_key", "grade_slices", "slice_key", "slice_lines", "slices_json"]

SliceBy = Annotated[
    str | None,
    typer.Option(
        "--slice-by",
        metavar="KEY",
        show_default=False,
        help="Also decide per slice of each task, e-BH across the slices: tag:PREFIX (a tag "
        "PREFIX:VALUE), meta:KEY (a metadata key), tools (the case offers tools or not) or length "
        "(prompt length quartiles, fixed when first stored).",
        rich_help_panel="Routing policy",
    ),
]


def slice_key(value: str | None) -> Any:
    """The parsed ``--slice-by`` value (``None`` when not given); an unknown key exits 2 naming it."""
    if value is None:
        return None
    from llm_connect.values import SliceError, parse_slice_key

    try:
        return parse_slice_key(value)
    except SliceError as exc:
        fail(f"--slice-by: {exc}")


def check_suite_has_key(suite_path: str | None, task: str | None, key: Any) -> None:
    """Before a ``grade`` run calls anything: every task of the suite has a case carrying a
    ``tag:``/``meta:`` key, else exit 2 naming the key and the task. A suite that does not load
    is left to the run (which says why)."""
    if key is None or suite_path is None or key.kind not in ("tag", "meta"):
        return
    from llm_connect.grading import load_suite
    from llm_connect.values import NO_VALUE, slice_of

    try:
        suite = load_suite(suite_path, default_task=task)
    except Exception:  # the run reports a suite it cannot load
        return
    carried: dict[str, bool] = {}
    for case in suite.cases:
        found = slice_of(key, tags=case.tags, metadata=case.metadata) != NO_VALUE
        carried[case.task] = carried.get(case.task, False) or found
    for name, ok in carried.items():
        if not ok:
            what = f"a tag {key.name}:VALUE" if key.kind == "tag" else f"metadata key {key.name!r}"
            fail(f"--slice-by {key}: no case of task {name!r} has {what}")


def _bound(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def slice_lines(sliced: Any) -> list[str]:
    """The slice table of one :class:`~llm_connect.values.SliceDecisions`, as lines of text."""
    k = len(sliced.slices)
    head = (
        f"slices of {sliced.whole.task} by {sliced.slice_by} ({k} slice{'s' if k != 1 else ''}; "
        f"e-BH, expected share of wrongly routed slices at most {1 - sliced.whole.confidence:g})"
    )
    if sliced.length_cuts is not None:
        head += " quartile cuts at " + ", ".join(f"{c:g}" for c in sliced.length_cuts) + " chars"
    rows: list[Sequence[str]] = [("slice", "cases", "decision", "bound")]
    for s in sliced.slices:
        shown = s.shown
        if s.routed:
            decision = f"{s.model} (proven)"
        elif shown is None:
            decision = f"{s.model} (no candidates)"
        else:
            decision = f"{s.model} ({shown.model} {shown.status})"
        rows.append((s.name, str(s.cases), decision, _bound(None if shown is None else shown.lower_bound)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [head]
    for r in rows:
        lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    return lines


def slices_json(decisions: Sequence[Any]) -> list[dict[str, Any]]:
    """``grade --json``'s ``slices``: per task, the slice part of its stored decision."""
    return [{"task": d.whole.task, "decision_id": d.decision_id, **d.slices_dict()} for d in decisions]


def grade_slices(outcome: Any, decisions: Sequence[Any], key: Any) -> tuple[list[Any], str | None]:
    """``grade --slice-by``: each task's decision per slice under the policy its whole-task
    decision was made under, stored once every task's slices are known (a key no case of a task
    carries stores none and says why)."""
    if key is None or not decisions:
        return [], None
    from llm_connect.routing import Router
    from llm_connect.values import SliceError

    router = Router(outcome.ledger)
    found = []
    for d in decisions:
        try:
            cands = [c.model for c in d.candidates]
            found.append(
                router.evaluate_slices(
                    d.task, baseline=d.baseline, candidates=cands, policy=d.policy, slice_by=str(key)
                )
            )
        except SliceError as exc:
            return [], f"--slice-by {key}: {exc}"
    ledger = outcome.ledger
    return [s.with_id(ledger.record_decision(s.whole, slices=s.slices_dict())) for s in found], None
