"""Figures of a judge against people: verdict agreement, kappa, position and length, with intervals.

Everything here works on :class:`HumanCase` rows, one per labelled case the
judge graded (:mod:`llm_connect.calibration._human` builds them from the
ledger). A case's *judge verdict* is its grade split at 0.5 (above:
``candidate``, below: ``baseline``, 0.5: ``tie``; :func:`~llm_connect.values.score_verdict`),
its *human verdict* the annotators' majority (:attr:`~llm_connect.values.CaseLabels.verdict`).

One bootstrap per call: ``B`` resamples of the cases drawn with
:func:`~llm_connect.calibration._stats.bootstrap_indices` (``default_rng(seed)``),
every figure computed on the same resamples; the interval is the 2.5th and
97.5th percentile of the replicates where the figure is defined
(:func:`~llm_connect.calibration._stats.estimate_from_replicates`). Figures on
several order-verdicts per case (``first_shown_rate``) resample cases, not
verdicts. The scored figures reuse :func:`~llm_connect.calibration._stats.judge_agreement`; the
kappa is :func:`llm_connect.labels.cohen_kappa_rows` over the three classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from llm_connect.calibration._stats import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_SEED,
    MIN_PAIRS,
    Estimate,
    JudgeAgreement,
    bootstrap_indices,
    estimate_from_replicates,
    judge_agreement,
)
from llm_connect.labels import cohen_kappa, cohen_kappa_rows
from llm_connect.values import PREFERENCES

__all__ = [
    "LENGTH_MARGIN",
    "HumanAgreement",
    "HumanCase",
    "LengthPreference",
    "human_agreement",
]

LENGTH_MARGIN = 0.10
"""``length_preference`` is flagged when the judge picks the longer answer this much more often
than people."""

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class HumanCase:
    """One labelled case the judge graded: what is compared with people."""

    task: str
    case_id: str
    candidate: str
    judge_score: float
    """The judge's grade of the case (its latest)."""
    judge_verdict: str
    """``candidate``, ``baseline`` or ``tie``: the grade split at 0.5."""
    human_verdict: str
    """The annotators' majority verdict (scores split at 0.5; equally common top verdicts: ``tie``)."""
    human_score: float | None = None
    """The mean of the labels' scores, when some label holds a score."""
    annotators: tuple[str, ...] = ()
    """Who labelled the case."""
    longer: str | None = None
    """``candidate`` or ``baseline``: the longer answer (``None``: equal lengths or unknown)."""
    winners: tuple[str, ...] = ()
    """A pairwise judge's winner in each order asked (``candidate``, ``baseline``, ``tie``)."""
    first_shown_wins: tuple[bool, ...] = ()
    """A pairwise judge's ``first_shown_wins`` per order (a tie is ``False``)."""
    position_consistent: bool | None = None
    """A pairwise judge asked in both orders: whether the two winners agree (``None`` otherwise)."""


@dataclass(frozen=True)
class LengthPreference:
    """How much more often the judge than people picks the longer answer, among non-tie verdicts.

    ``judge_rate``: of the cases where the judge says candidate or baseline and the answers differ
    in length, the share where it picks the longer one; ``human_rate`` the same for the people's
    verdict; ``difference = judge_rate - human_rate`` (paired bootstrap over cases). Flagged when
    ``difference > margin``.
    """

    status: str
    """``"ok"`` or ``"insufficient data"``."""
    reason: str | None
    unit: str
    """``"characters"``: the pairwise judge's ``answer_chars``, else the stored texts."""
    n_judge: int
    """Cases counted for the judge's rate."""
    n_human: int
    """Cases counted for the people's rate."""
    judge_rate: Estimate
    human_rate: Estimate
    difference: Estimate
    margin: float
    flagged: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-strict form."""
        return {
            "status": self.status,
            "reason": self.reason,
            "unit": self.unit,
            "n_judge": self.n_judge,
            "n_human": self.n_human,
            "judge_rate": self.judge_rate.to_dict(),
            "human_rate": self.human_rate.to_dict(),
            "difference": self.difference.to_dict(),
            "margin": self.margin,
            "flagged": self.flagged,
        }


@dataclass(frozen=True)
class HumanAgreement:
    """The judge's verdicts against the people's on the labelled cases it graded.

    With fewer than ``min_pairs`` cases every figure is undefined and ``status`` is
    ``"insufficient data"``; the counts are kept.
    """

    n: int
    """Labelled cases the judge graded (the cases every figure is computed on)."""
    status: str
    reason: str | None
    annotators: int
    """Distinct annotators of those cases."""
    agreement: Estimate
    """Share of cases where the judge's verdict is the people's (three classes)."""
    agreement_non_tie: Estimate
    """The same over the cases where neither says tie (MT-Bench's figure)."""
    n_non_tie: int
    cohen_kappa: Estimate
    """Cohen's kappa of the two verdicts over the three classes."""
    confusion: tuple[tuple[int, ...], ...]
    """Counts, rows the judge's verdict, columns the people's, both in ``PREFERENCES`` order."""
    position_consistency: Estimate | None
    """Share of the cases asked in both orders whose two verdicts agree (``None``: none was)."""
    n_position: int
    first_shown_rate: Estimate | None
    """Of a pairwise judge's order-verdicts that are not ties, the share the answer shown first won."""
    n_first_shown: int
    length_preference: LengthPreference
    scores: JudgeAgreement | None
    """Judge grade against the labels' mean score (cases with scored labels); ``None`` without any."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-strict form (every figure under its own key)."""
        return {
            "n": self.n,
            "annotators": self.annotators,
            "agreement": self.agreement.to_dict(),
            "agreement_non_tie": self.agreement_non_tie.to_dict(),
            "n_non_tie": self.n_non_tie,
            "cohen_kappa": self.cohen_kappa.to_dict(),
            "confusion": {"classes": list(PREFERENCES), "matrix": [list(r) for r in self.confusion]},
            "position_consistency": None
            if self.position_consistency is None
            else self.position_consistency.to_dict(),
            "n_position": self.n_position,
            "first_shown_rate": None if self.first_shown_rate is None else self.first_shown_rate.to_dict(),
            "n_first_shown": self.n_first_shown,
            "length_preference": self.length_preference.to_dict(),
            "scores": None if self.scores is None else self.scores.to_dict(),
        }


def _ratio_rows(num: FloatArray, den: FloatArray, idx: NDArray[np.intp]) -> FloatArray:
    top, bottom = num[idx].sum(axis=1), den[idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)


def _ratio(num: FloatArray, den: FloatArray, idx: NDArray[np.intp], why: str) -> Estimate:
    if den.sum() == 0:
        return Estimate.undefined(why)
    return estimate_from_replicates(float(num.sum() / den.sum()), _ratio_rows(num, den, idx))


def _length(cases: Sequence[HumanCase], idx: NDArray[np.intp], margin: float) -> LengthPreference:
    longer = [c.longer for c in cases]
    judge_in = np.array(
        [lg is not None and c.judge_verdict != "tie" for c, lg in zip(cases, longer, strict=True)]
    )
    human_in = np.array(
        [lg is not None and c.human_verdict != "tie" for c, lg in zip(cases, longer, strict=True)]
    )
    judge_long = np.array([c.judge_verdict == c.longer for c in cases]) & judge_in
    human_long = np.array([c.human_verdict == c.longer for c in cases]) & human_in
    n_judge, n_human = int(judge_in.sum()), int(human_in.sum())
    if n_judge == 0 or n_human == 0:
        why = (
            "insufficient data: no case with answers of known, different lengths where "
            + ("the judge" if n_judge == 0 else "people")
            + " prefer one answer"
        )
        none = Estimate.undefined(why)
        return LengthPreference(
            "insufficient data", why, "characters", n_judge, n_human, none, none, none, margin, False
        )
    jn, jd = judge_long.astype(np.float64), judge_in.astype(np.float64)
    hn, hd = human_long.astype(np.float64), human_in.astype(np.float64)
    j_rate, h_rate = float(jn.sum() / jd.sum()), float(hn.sum() / hd.sum())
    j_rows, h_rows = _ratio_rows(jn, jd, idx), _ratio_rows(hn, hd, idx)
    diff = estimate_from_replicates(j_rate - h_rate, j_rows - h_rows)
    return LengthPreference(
        status="ok",
        reason=None,
        unit="characters",
        n_judge=n_judge,
        n_human=n_human,
        judge_rate=estimate_from_replicates(j_rate, j_rows),
        human_rate=estimate_from_replicates(h_rate, h_rows),
        difference=diff,
        margin=margin,
        flagged=diff.value is not None and diff.value > margin,
    )


def human_agreement(
    cases: Sequence[HumanCase],
    *,
    threshold: float = 0.5,
    margin: float = LENGTH_MARGIN,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    min_pairs: int = MIN_PAIRS,
) -> HumanAgreement:
    """Every figure of the judge against people on ``cases`` (order does not matter: sorted first).

    ``threshold`` is the pass mark of the scored figures' kappa; ``margin`` the length flag's.
    Fewer than ``min_pairs`` cases: ``"insufficient data"`` and no numbers.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, not {n_boot}")
    rows = sorted(cases, key=lambda c: (c.task, c.candidate, c.case_id))
    n = len(rows)
    code = {v: i for i, v in enumerate(PREFERENCES)}
    j = np.array([code[c.judge_verdict] for c in rows], dtype=np.intp)
    h = np.array([code[c.human_verdict] for c in rows], dtype=np.intp)
    confusion = tuple(
        tuple(int(np.sum((j == a) & (h == b))) for b in range(len(PREFERENCES)))
        for a in range(len(PREFERENCES))
    )
    tie = code["tie"]
    non_tie = (j != tie) & (h != tie)
    consistent = [c.position_consistent for c in rows]
    n_position = sum(v is not None for v in consistent)
    n_first = sum(sum(w != "tie" for w in c.winners) for c in rows)
    annotators = len({name for c in rows for name in c.annotators})
    if n < max(min_pairs, 1):
        why = f"insufficient data: {n} labelled cases graded by the judge < minimum {min_pairs}"
        none = Estimate.undefined(why)
        length = LengthPreference(
            "insufficient data", why, "characters", 0, 0, none, none, none, margin, False
        )
        return HumanAgreement(
            n, "insufficient data", why, annotators, none, none, int(non_tie.sum()), none, confusion,
            None if n_position == 0 else none, n_position, None if n_first == 0 else none, n_first, length,
            None,
        )  # fmt: skip

    idx = bootstrap_indices(n, n_boot=n_boot, seed=seed)
    equal = (j == h).astype(np.float64)
    kappa = cohen_kappa([c.judge_verdict for c in rows], [c.human_verdict for c in rows])
    kappa_est = (
        Estimate.undefined("Cohen's kappa undefined: the judge and people give every case one same verdict")
        if kappa is None
        else estimate_from_replicates(kappa, cohen_kappa_rows(j[idx], h[idx], len(PREFERENCES)))
    )
    position: Estimate | None = None
    if n_position:
        defined = np.array([v is not None for v in consistent], dtype=np.float64)
        agree = np.array([bool(v) for v in consistent], dtype=np.float64)
        position = _ratio(agree, defined, idx, "no case was asked in both orders")
    first: Estimate | None = None
    if any(c.winners for c in rows):
        wins = np.array([sum(c.first_shown_wins) for c in rows], dtype=np.float64)
        decided = np.array([sum(w != "tie" for w in c.winners) for c in rows], dtype=np.float64)
        first = _ratio(wins, decided, idx, "every order-verdict is a tie")
    scored = [c for c in rows if c.human_score is not None]
    scores = (
        judge_agreement(
            [c.judge_score for c in scored],
            [c.human_score for c in scored if c.human_score is not None],
            threshold=threshold,
            n_boot=n_boot,
            seed=seed,
            min_pairs=min_pairs,
        )
        if scored
        else None
    )
    return HumanAgreement(
        n=n,
        status="ok",
        reason=None,
        annotators=annotators,
        agreement=estimate_from_replicates(float(equal.mean()), equal[idx].mean(axis=1)),
        agreement_non_tie=_ratio(
            equal * non_tie,
            non_tie.astype(np.float64),
            idx,
            "no case where neither the judge nor people say tie",
        ),
        n_non_tie=int(non_tie.sum()),
        cohen_kappa=kappa_est,
        confusion=confusion,
        position_consistency=position,
        n_position=n_position,
        first_shown_rate=first,
        n_first_shown=n_first,
        length_preference=_length(rows, idx, margin),
        scores=scores,
    )
