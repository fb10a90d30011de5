"""The ``"human"`` reference of a calibration: a judge's stored grades against people's labels.

Which grade meets which label
-----------------------------
A label names (task, case id, candidate model); a grade carries the same three
(``grades.task``, ``case_id``, ``candidate_model``). For every labelled case the
judge's grade is its **stored** grade of that case (nothing is re-graded here:
``llm-connect calibrate`` first grades the labelled cases the judge has not graded, and
no other pair: :func:`~llm_connect.calibration._fill.plan_fill`), the latest one (highest
row id) within ``task`` and ``since``. When every label of the case names the same
``run_id`` and the judge graded the case in that run, the latest grade of that run is
taken instead. Grades without a case id never meet a label. A labelled case the judge
never graded is counted in ``unmatched``.

The people's verdict of a case is the annotators' majority
(:attr:`~llm_connect.values.CaseLabels.verdict`: preferences as given, scores split
at 0.5, equally common top verdicts a tie); the people's score is the mean of the
labels' scores (:attr:`~llm_connect.values.CaseLabels.mean_score`), when some hold one.

Lengths (for ``length_preference``) come from a pairwise judge's
``details["answer_chars"]``, else from the stored texts of the grade (``None``
when the ledger holds only digests).

The pass rule (:func:`~llm_connect.calibration._report.judge_human`) is in
``contracts/calibration.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_connect.calibration._human_stats import HumanAgreement, HumanCase
from llm_connect.values import score_verdict

if TYPE_CHECKING:
    from llm_connect.ledger import GradeRow
    from llm_connect.values import CaseLabels

__all__ = ["HUMAN", "HumanReference", "human_cases"]

HUMAN = "human"
"""The reference name that means people's labels (``against=["human"]``, ``--against human``)."""


@dataclass(frozen=True)
class HumanReference:
    """Agreement of the judge under test with people, and whether it passes."""

    agreement: HumanAgreement
    status: str
    """``"pass"``, ``"fail"`` or ``"insufficient data"``."""
    reasons: tuple[str, ...] = ()
    """Why it did not pass."""
    labelled_cases: int = 0
    """Labelled (task, candidate, case) in the calibration's task."""
    unmatched: int = 0
    """Labelled cases the judge has no grade for (left out)."""

    @property
    def reference(self) -> str:
        """Always ``"human"``."""
        return HUMAN

    @property
    def decides(self) -> bool:
        """Whether it reached a verdict (pass or fail): then it alone decides the calibration."""
        return self.status in ("pass", "fail")

    def to_dict(self) -> dict[str, Any]:
        """JSON-strict form: the ``"human"`` entry of the report's ``references``."""
        return {
            "reference": HUMAN,
            "spec": None,
            "status": self.status,
            "reasons": list(self.reasons),
            "labelled_cases": self.labelled_cases,
            "unmatched": self.unmatched,
            **self.agreement.to_dict(),
        }


def _longer(row: GradeRow) -> str | None:
    chars = row.details.get("answer_chars") if isinstance(row.details, Mapping) else None
    if isinstance(chars, Mapping) and all(isinstance(chars.get(k), int) for k in ("baseline", "candidate")):
        base, cand = int(chars["baseline"]), int(chars["candidate"])
    elif row.baseline_text is not None and row.candidate_text is not None:
        base, cand = len(row.baseline_text), len(row.candidate_text)
    else:
        return None
    if base == cand:
        return None
    return "candidate" if cand > base else "baseline"


def _orders(row: GradeRow) -> tuple[tuple[str, ...], tuple[bool, ...], bool | None]:
    details = row.details if isinstance(row.details, Mapping) else {}
    winners = details.get("winners")
    firsts = details.get("first_shown_wins")
    if not (isinstance(winners, list) and isinstance(firsts, list) and len(winners) == len(firsts)):
        return (), (), None
    consistent = details.get("position_consistent")
    return (
        tuple(str(w) for w in winners),
        tuple(bool(f) for f in firsts),
        consistent if isinstance(consistent, bool) else None,
    )


def _pick(rows: list[GradeRow], labels: CaseLabels) -> GradeRow:
    runs = {label.run_id for label in labels.labels}
    if len(runs) == 1 and None not in runs:
        same = [r for r in rows if r.run_id in runs]
        if same:
            rows = same
    return max(rows, key=lambda r: r.id)


def human_cases(
    judge_rows: Iterable[GradeRow], labelled: Iterable[CaseLabels]
) -> tuple[list[HumanCase], int, int]:
    """``(cases, labelled, unmatched)``: each labelled case met with the judge's grade (module docstring)."""
    by_case: dict[tuple[str, str, str], list[GradeRow]] = {}
    for row in judge_rows:
        if row.case_id is not None:
            by_case.setdefault((row.task, row.case_id, row.candidate_model), []).append(row)
    cases: list[HumanCase] = []
    total = unmatched = 0
    for labels in labelled:
        total += 1
        rows = by_case.get((labels.task, labels.case_id, labels.candidate))
        if not rows:
            unmatched += 1
            continue
        row = _pick(rows, labels)
        winners, firsts, consistent = _orders(row)
        cases.append(
            HumanCase(
                task=labels.task,
                case_id=labels.case_id,
                candidate=labels.candidate,
                judge_score=float(row.quality_score),
                judge_verdict=score_verdict(float(row.quality_score)),
                human_verdict=labels.verdict,
                human_score=labels.mean_score,
                annotators=tuple(label.annotator for label in labels.labels),
                longer=_longer(row),
                winners=winners,
                first_shown_wins=firsts,
                position_consistent=consistent,
            )
        )
    return cases, total, unmatched
