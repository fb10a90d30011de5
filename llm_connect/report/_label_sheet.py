"""Write a labelling sheet: the chosen cases waiting for a label, with both answers, blind.

The rows are :data:`~llm_connect.labels.SHEET_FIELDS`; the answers are those of each
case's latest grade (as the Label page shows them, tool calls as ``tool call: ...`` lines, a
conversation as ``role: text`` lines), in the per-case order of
:func:`~llm_connect.labels.candidate_first`. ``llm-connect labels import`` reads the
filled sheet back (``llm_connect.labels._files``).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING

from llm_connect.labels import SHEET_FIELDS, candidate_first
from llm_connect.report._label_queue import LabelCase, QueueItem, load_case

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = ["write_label_sheet"]

_LATEST = (
    "SELECT baseline_model FROM grades WHERE task = :task AND case_id = :case "
    "AND candidate_model = :cand ORDER BY id DESC LIMIT 1"
)


def _answer(text: str, tools: list[str]) -> str:
    return "\n".join([*([text] if text else []), *(f"tool call: {call}" for call in tools)])


def _prompt(case: LabelCase) -> str:
    if case.messages:
        return "\n".join(f"{m['role']}: {m['content']}" for m in case.messages)
    return case.prompt


def _row(case: LabelCase) -> dict[str, str]:
    item = case.item
    candidate = _answer(case.candidate_text, case.candidate_tools)
    baseline = _answer(case.baseline_text, case.baseline_tools)
    shown = candidate_first(item.task, item.case_id, item.candidate)
    first, second = (candidate, baseline) if shown else (baseline, candidate)
    return {
        "task": item.task,
        "case_id": item.case_id,
        "candidate": item.candidate,
        "prompt": _prompt(case),
        "answer_1": first,
        "answer_2": second,
        "better": "",
        "annotator": "",
        "note": "",
        "run_id": case.run_id or "",
    }


def write_label_sheet(
    ledger: QualityLedger, cases: Sequence[tuple[str, str, str]], out: IO[str], format: str = "csv"
) -> int:
    """Write one sheet row per ``(task, candidate, case id)`` in ``cases``, in that order, to
    ``out`` as ``csv`` or ``jsonl``; returns how many (a case with no grade left is skipped)."""
    from sqlalchemy import text

    if format not in ("csv", "jsonl"):
        raise ValueError(f"sheet format must be csv or jsonl, not {format!r}")
    rows = []
    with ledger.engine.connect() as conn:
        baselines = [
            conn.execute(text(_LATEST), {"task": task, "case": case_id, "cand": candidate}).scalar()
            for task, candidate, case_id in cases
        ]
        conn.rollback()
    for (task, candidate, case_id), baseline in zip(cases, baselines, strict=True):
        if baseline is None:
            continue
        item = QueueItem(task, baseline, candidate, case_id, disagreement=0.0, spread=0.0, judges=0)
        case = load_case(ledger, item)
        if case is not None:
            rows.append(_row(case))
    if format == "jsonl":  # blank fields as null, but for ``better``, the one to fill in
        for row in rows:
            shown = {k: v if v or k == "better" else None for k, v in row.items()}
            out.write(json.dumps(shown, ensure_ascii=False) + "\n")
    else:
        writer = csv.DictWriter(out, fieldnames=list(SHEET_FIELDS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)
