"""Bridging a replaced judge (issue 37, item 5): may the new judge's grades stand for the old one's?

``judges bridge --from OLD --to NEW --task T`` grades, with the new judge, the old judge's
anchor set on the task and a seeded random sample of the other cases the old judge graded
there (the stored prompt, answers and run settings), and compares the two judges case by
case. The verdict reuses the drift check's rule (``calibration._drift``): the new judge is
``interchangeable`` when a one-sided ``1 - alpha`` upper bound of the expected absolute
difference per case is below the tolerance (0.05 by default: what a stable judge may move
between two checks), else ``not interchangeable``, and then the new judge's evidence starts
from its own grades. Nothing is written: the old judge's grades stay its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from llm_connect.calibration._drift import DEFAULT_TOLERANCE, change_upper
from llm_connect.errors import CalibrationError, LLMConnectError

if TYPE_CHECKING:
    from llm_connect.grading import Judge
    from llm_connect.ledger import GradeRow, QualityLedger

__all__ = ["INTERCHANGEABLE", "NOT_INTERCHANGEABLE", "BridgeReport", "bridge_judges"]

INTERCHANGEABLE, NOT_INTERCHANGEABLE = "interchangeable", "not interchangeable"
_BOOTSTRAP = 1000


@dataclass(frozen=True)
class BridgeReport:
    """What the bridge found: the cases compared (anchored and sampled), the new judge's calls,
    the mean absolute difference and its upper bound, the mean shift, Spearman's rho (and, for
    verdicts, Cohen's kappa) with a bootstrap interval, the agreement of each judge with people
    on labelled cases, the verdict."""

    old: str
    new: str
    task: str
    cases: int
    anchored: int
    failed: int
    calls: int
    mean_abs_diff: float
    diff_upper: float
    shift: float
    spearman: float | None
    spearman_low: float | None
    spearman_high: float | None
    kappa: float | None
    """Cohen's kappa of the two judges' verdicts when both grade on 0 / 0.5 / 1 (pairwise
    judges: the baseline's, a tie, the candidate's), with a bootstrap interval; else ``None``."""
    kappa_low: float | None
    kappa_high: float | None
    people: Mapping[str, Any]
    tolerance: float
    verdict: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        data = asdict(self)
        data["people"] = dict(self.people)
        return data


def _spearman(a: Any, b: Any, seed: int) -> tuple[float | None, float | None, float | None]:
    """Spearman's rho and a 95% percentile bootstrap interval (None where a side is constant)."""
    from scipy.stats import spearmanr

    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None, None, None
    rho = float(spearmanr(a, b).statistic)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(_BOOTSTRAP):
        i = rng.integers(0, a.size, a.size)
        if np.ptp(a[i]) > 0 and np.ptp(b[i]) > 0:
            draws.append(float(spearmanr(a[i], b[i]).statistic))
    low, high = np.percentile(draws, [2.5, 97.5]) if draws else (rho, rho)
    return rho, float(low), float(high)


def _kappa(a: Any, b: Any, seed: int) -> tuple[float | None, float | None, float | None]:
    """Cohen's kappa of two judges' three-way verdicts (0, 0.5, 1) with a 95% percentile
    bootstrap interval (``labels.cohen_kappa_rows``, the project's one kappa); ``None`` unless
    every grade of both is a verdict."""
    from llm_connect.labels import cohen_kappa_rows

    verdicts = (0.0, 0.5, 1.0)
    if a.size < 3 or not (np.isin(a, verdicts).all() and np.isin(b, verdicts).all()):
        return None, None, None
    ca, cb = np.rint(2 * a).astype(int), np.rint(2 * b).astype(int)
    whole = float(cohen_kappa_rows(ca, cb, classes=3)[0])
    if np.isnan(whole):
        return None, None, None
    idx = np.random.default_rng(seed).integers(0, a.size, (_BOOTSTRAP, a.size))
    draws = cohen_kappa_rows(ca[idx], cb[idx], classes=3)
    draws = draws[~np.isnan(draws)]
    low, high = np.percentile(draws, [2.5, 97.5]) if draws.size else (whole, whole)
    return whole, float(low), float(high)


def bridge_judges(
    ledger: QualityLedger,
    old: str,
    new: Judge,
    task: str,
    *,
    sample: int = 200,
    seed: int = 0,
    alpha: float = 0.05,
    tolerance: float = DEFAULT_TOLERANCE,
    concurrency: int = 4,
) -> BridgeReport:
    """Grade the old judge's anchor set and up to ``sample`` more of its graded cases of
    ``task`` (drawn with ``seed``) with ``new`` and compare, case by case. Raises
    :class:`CalibrationError` when the old judge has no grade with stored texts on the task,
    or when every call of the new judge failed."""
    from llm_connect.calibration._judge_checks import (
        anchor_store,
        judge_calls,
        latest_with_text,
        people_distance,
        regrade,
    )

    latest = latest_with_text(ledger, old, task)[0]
    if not latest:
        raise CalibrationError(f"no grades by {old!r} with stored texts on task {task!r} to bridge from")
    anchor = anchor_store(ledger).active_anchor(old, task)
    anchored_ids = {c.grade_id for c in anchor.cases} if anchor is not None else set()
    rows = [r for r in latest.values() if r.id in anchored_ids]
    rest = sorted((r for r in latest.values() if r.id not in anchored_ids), key=lambda r: r.id)
    rng = np.random.default_rng(seed)
    rows += [rest[i] for i in rng.permutation(len(rest))[:sample]]

    pairs: list[tuple[GradeRow, Any]] = []
    failed = 0
    for row, result in zip(rows, regrade(new, rows, concurrency=concurrency), strict=True):
        if isinstance(result, LLMConnectError):
            failed += 1
        else:
            pairs.append((row, result))
    if not pairs:
        raise CalibrationError(
            f"every one of the {len(rows)} calls of {new.grader_id} failed; nothing to compare"
        )
    calls = sum(judge_calls(result) for _, result in pairs)
    a = np.array([row.quality_score for row, _ in pairs])
    b = np.array([float(result.quality_score) for _, result in pairs])
    diff = np.abs(b - a)
    upper = change_upper(diff, alpha)
    rho, low, high = _spearman(a, b, seed)
    kappa, kappa_low, kappa_high = _kappa(a, b, seed)
    people = people_distance(ledger, task, [row for row, _ in pairs], {"old": a, "new": b})
    ok = upper < tolerance and failed == 0
    verdict = INTERCHANGEABLE if ok else NOT_INTERCHANGEABLE
    if ok:
        why = (
            f"interchangeable: the expected difference per case is at most {upper:.3f} < tolerance "
            f"{tolerance:g} on {len(pairs)} cases; {new.grader_id}'s grades may stand for {old}'s"
        )
    else:
        cause = (
            f"{failed} call(s) failed"
            if failed
            else f"the expected difference per case may reach {upper:.3f}"
        )
        why = (
            f"not interchangeable: {cause} (tolerance {tolerance:g}); {new.grader_id}'s evidence starts from "
            "its own grades, none of the old judge's is reused"
        )
    return BridgeReport(
        old=old, new=new.grader_id, task=task, cases=len(pairs), anchored=len(anchored_ids), failed=failed,
        calls=calls, mean_abs_diff=float(diff.mean()), diff_upper=upper, shift=float((b - a).mean()),
        spearman=rho, spearman_low=low, spearman_high=high, kappa=kappa, kappa_low=kappa_low,
        kappa_high=kappa_high, people=people, tolerance=tolerance,
        verdict=verdict, why=why,
    )  # fmt: skip
