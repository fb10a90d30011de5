"""Labelling sheets: the queued cases as a file people fill in, with the answers in a blind order.

``llm-connect labels queue --sheet FILE`` writes one row per chosen case still waiting for a
label (:data:`SHEET_FIELDS`): the case's key, its prompt and the two answers as ``answer_1``
and ``answer_2``, and an empty ``better`` for the annotator: ``1``, ``2`` or ``tie``. Which
answer is the candidate's is drawn per case by :func:`candidate_first` (the order the Label
page shows too) and is not in the file, so an annotator cannot tell the models apart by
position. ``labels import`` reads a file with a ``better`` field as a sheet: a row left blank
is not labelled yet and is skipped (:func:`sheet_preference` turns the rest into a
preference), the prompt and answers are context and are not stored.
"""

from __future__ import annotations

import hashlib

from llm_connect.errors import LabelError

__all__ = ["BETTER", "BLIND_SEED", "SHEET_FIELDS", "candidate_first", "sheet_preference"]

BLIND_SEED = "llm-connect-label-v1"
"""The default seed of the blind order (:func:`candidate_first`)."""

SHEET_FIELDS: tuple[str, ...] = (
    "task",
    "case_id",
    "candidate",
    "prompt",
    "answer_1",
    "answer_2",
    "better",
    "annotator",
    "note",
    "run_id",
)
"""A sheet's fields, in the order they are written."""

BETTER: tuple[str, ...] = ("1", "2", "tie")
"""What ``better`` may hold: the first answer, the second, or neither."""


def candidate_first(task: str, case_id: str, candidate: str, *, seed: str = BLIND_SEED) -> bool:
    """Whether the candidate's answer is shown first for this case (a seeded hash, not random:
    the same on every reload, about half the cases each way)."""
    digest = hashlib.sha256("\x00".join((seed, task, case_id, candidate)).encode("utf-8")).digest()
    return digest[0] & 1 == 1


def sheet_preference(better: object, task: str, case_id: str, candidate: str) -> str | None:
    """The preference a sheet row's ``better`` stands for (``None``: left blank, not labelled).

    Raises :class:`LabelError` (field ``better``) for anything but 1, 2, tie or blank.
    """
    if better is None or (isinstance(better, str) and not better.strip()):
        return None
    text = str(better).strip().lower() if not isinstance(better, bool) else ""
    if text not in BETTER:
        raise LabelError(f"{better!r} is not one of 1, 2, tie (or blank: not labelled yet)", field="better")
    if text == "tie":
        return "tie"
    return "candidate" if (text == "1") == candidate_first(task, case_id, candidate) else "baseline"
