"""What the report shows about people: each judge's agreement with them, and how far labelling has come.

* :func:`human_rows` reads the ``"human"`` entry of a stored calibration's figures
  (``contracts/calibration.md``, "Against people") into table rows: each figure with
  its 95% interval and the number of cases (or order-verdicts) it counts.
* :func:`labels_status` is ``llm-connect labels status`` for the report's tasks
  (:func:`llm_connect.labels.label_status`): per task and candidate, cases graded,
  labelled, annotators, and their agreement with each other (Cohen's or Fleiss'
  kappa). Empty when no label is stored, so the page shows no section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = ["HUMAN_FIGURES", "human_entry", "human_rows", "labels_status"]

HUMAN_FIGURES: tuple[tuple[str, str, str], ...] = (
    ("agreement", "agreement (3 classes)", "n"),
    ("agreement_non_tie", "agreement without ties", "n_non_tie"),
    ("cohen_kappa", "Cohen's kappa", "n"),
    ("position_consistency", "position consistency", "n_position"),
    ("first_shown_rate", "answer shown first wins", "n_first_shown"),
)
"""(key in the human entry, words on the page, key of its count), in the order shown."""


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _row(name: str, words: str, est: Any, n: Any) -> dict[str, Any] | None:
    if not isinstance(est, Mapping):
        return None
    value, low, high = _num(est.get("value")), _num(est.get("ci_low")), _num(est.get("ci_high"))
    text = "-" if value is None else f"{value:.3f}"
    if value is not None and low is not None and high is not None:
        text += f" [{low:.3f}, {high:.3f}]"
    return {
        "key": name,
        "label": words,
        "value": value,
        "low": low,
        "high": high,
        "text": text,
        "n": n if isinstance(n, int) else None,
        "reason": est.get("reason") if isinstance(est.get("reason"), str) else None,
    }


def human_entry(figures: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The ``"human"`` entry of stored calibration figures, or ``None``."""
    for ref in (figures or {}).get("references") or []:
        if isinstance(ref, Mapping) and ref.get("reference") == "human":
            return ref
    return None


def human_rows(figures: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The page's view of a calibration's agreement with people, or ``None`` without one.

    ``{"status", "reasons", "n", "labelled", "annotators", "rows": [...], "length": {...} | None,
    "scores": [...]}``; each row ``{"key", "label", "value", "low", "high", "text", "n", "reason"}``
    (``text``: the value with its interval, ``"0.625 [0.417, 0.833]"``, or ``"-"``).
    """
    entry = human_entry(figures)
    if entry is None:
        return None
    rows = [
        row
        for key, words, count in HUMAN_FIGURES
        if (row := _row(key, words, entry.get(key), entry.get(count))) is not None
    ]
    length = entry.get("length_preference")
    length_view = None
    if isinstance(length, Mapping):
        parts = [
            _row(
                "judge_rate", "judge picks the longer answer", length.get("judge_rate"), length.get("n_judge")
            ),
            _row(
                "human_rate", "people pick the longer answer", length.get("human_rate"), length.get("n_human")
            ),
            _row("difference", "length preference (judge - people)", length.get("difference"), None),
        ]
        length_view = {
            "rows": [r for r in parts if r is not None],
            "flagged": bool(length.get("flagged")),
            "margin": _num(length.get("margin")),
            "reason": length.get("reason") if isinstance(length.get("reason"), str) else None,
        }
    scores = entry.get("scores")
    score_rows = []
    if isinstance(scores, Mapping) and scores.get("n"):
        for key, words in (
            ("spearman", "Spearman vs people's mean score"),
            ("kendall_tau", "Kendall tau vs people's mean score"),
            ("mean_abs_diff", "mean |grade - people's score|"),
            ("cohen_kappa", "kappa at the threshold"),
        ):
            row = _row(f"score_{key}", words, scores.get(key), scores.get("n"))
            if row is not None:
                score_rows.append(row)
    return {
        "status": str(entry.get("status", "")),
        "reasons": [str(r) for r in entry.get("reasons") or []],
        "n": entry.get("n"),
        "labelled": entry.get("labelled_cases"),
        "annotators": entry.get("annotators"),
        "rows": rows,
        "length": length_view,
        "scores": score_rows,
    }


def labels_status(ledger: QualityLedger, tasks: Sequence[str] | None) -> list[dict[str, Any]]:
    """``labels status`` per task and candidate of ``tasks`` (every task when ``None``); ``[]`` when
    nothing is labelled or sampled for labels there."""
    from dataclasses import asdict

    from llm_connect.labels import label_status

    rows = label_status(ledger, task=list(tasks) if tasks is not None else None)
    if not any(r.cases_labelled or r.sampling for r in rows):
        return []
    return [
        {
            "task": r.task,
            "candidate": r.candidate,
            "graded": r.cases_graded,
            "labelled": r.cases_labelled,
            "annotators": r.annotators,
            "labels": r.labels,
            "shared": r.cases_shared,
            "method": r.kappa_method,
            "kappa": r.kappa,
            "observed": r.observed_agreement,
            "sampling": [asdict(p) for p in r.sampling],
        }
        for r in rows
    ]
