"""Evidence about what people would say: ``Router.decide(target="human")``.

Per (candidate, routing judge) of a task and baseline, the sampled cases in the order the
sampler decided them (``label_sampling`` joined to ``case_stats``: the judge's mean grade per
case, the inclusion probability, whether the case was chosen) and people's value of each
chosen case (``human_labels``: the majority preference as 1 / 0.5 / 0, else the mean score;
NaN while its label is pending) go to :func:`~llm_connect.routing._ppi.human_bound`, whose
anytime-valid bounds on the mean human value decide as the judge's bounds do
(``docs/decisions.md``, "Routing on what people would say"). The Bonferroni split and
``min_samples`` are the judge's. A label of a case the sampler did not choose never enters
the bound (it cannot be unbiased); the evidence counts such labels as left out. Graded cases
the sampler has not decided yet have no inclusion probability and wait for it.

A Router keeps each group's arrays, its labels and the bound's running sums between decisions
(``routing/_human_cache.py``): a decision reads only the sampling rows, cases and labels that
arrived since and continues the bound from the first pending label, with the figures of a full
read and a fresh computation (``docs/decisions.md``, "why asking often is cheap and still exact").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm_connect.values import PREFERENCE_JUDGES, PROVEN, GraderEvidence, is_preference_judge

if TYPE_CHECKING:
    from llm_connect.routing._ppi import HumanBound

__all__ = ["PREFERENCE_JUDGES", "bound_evidence", "on_peoples_scale", "rank_agreement"]


def on_peoples_scale(grader_id: str) -> bool:
    """Whether ``grader_id``'s grades are on people's scale (a preference judge's, whose grades
    are win rates): only their mean can be set against people's preferences."""
    return is_preference_judge(grader_id)


def rank_agreement(judge: Any, human: Any) -> float | None:
    """The Spearman rank correlation of the judge's grades with people's values on the cases
    people labelled (``human`` NaN elsewhere); ``None`` with fewer than 5 such cases or no spread
    on either side."""
    import numpy as np

    j, h = np.asarray(judge, dtype=float), np.asarray(human, dtype=float)
    labelled = ~np.isnan(h)
    if int(labelled.sum()) < 5 or np.ptp(j[labelled]) == 0 or np.ptp(h[labelled]) == 0:
        return None
    from scipy.stats import spearmanr

    rho = float(spearmanr(j[labelled], h[labelled]).statistic)
    return None if rho != rho else rho  # NaN: no rank order to compare


def bound_evidence(
    hb: HumanBound,
    grader_id: str,
    *,
    left_out: int,
    undecided: int,
    alpha: float,
    preferences: bool = False,
    agreement: float | None = None,
    min_quality: float | None = None,
) -> GraderEvidence:
    """The evidence a :class:`~llm_connect.routing._ppi.HumanBound` gives, with the labels left
    out (of cases the sampler did not choose) and the graded cases not yet sampled.

    ``preferences``: people's labels are preferences (1, tie 0.5, 0), not scores. The judge's
    bias (its mean minus people's) is given only where the two scales are the same: a preference
    judge against preferences, a scoring judge against scores; otherwise the evidence says so and
    gives ``agreement`` (the Spearman correlation of the judge's grades with people's values on
    the labelled cases, :func:`rank_agreement`) instead."""
    gid = grader_id
    notes = []
    if left_out:
        notes.append(
            f"{left_out} label{'s' if left_out != 1 else ''} of cases the sampler did not choose "
            "left out (they count for agreement, not here)"
        )
    if undecided:
        notes.append(
            f"{undecided} graded case{'s' if undecided != 1 else ''} not yet sampled "
            "(llm-connect labels queue)"
        )
    text, bias = hb.why, hb.judge_bias
    if bias is not None and on_peoples_scale(gid) != preferences:
        # A judge that grades each answer against the baseline (1.0: as good) is on another scale
        # than people's preference (0.5: a tie), and a preference judge than people's scores:
        # the difference of their means is no bias of the judge.
        shown = "" if agreement is None else f"; agreement with people: Spearman {agreement:.2f}"
        text = text.replace(f", judge bias {bias:+.3f})", f", on another scale than people's{shown})")
        bias = None
        notes.append(f"more on its agreement: llm-connect calibrate --judge {gid} --against human")
    why = f"{gid}: {text}" + "".join(f"; {note}" for note in notes)
    return GraderEvidence(
        grader_id=gid,
        n=hb.cases_used,
        mean=hb.estimate,
        lower_bound=hb.lower,
        passed=hb.status == PROVEN,
        why=why,
        n_grades=None,
        upper_bound=hb.upper,
        status=hb.status,
        cases_needed=None if hb.more_cases is None else hb.cases_used + hb.more_cases,
        alpha=alpha,
        method="anytime-valid, prediction-powered",
        target="human",
        judge_mean=hb.judge_mean,
        human_estimate=hb.estimate,
        judge_bias=bias,
        judge_agreement=None if bias is not None else agreement,
        labels_used=hb.labels_used,
        labels_pending=hb.pending,
        labels_left_out=left_out,
        cases_used=hb.cases_used,
        cases_waiting=hb.waiting,
        cases_unsampled=undecided,
        more_labels=hb.more_labels,
        more_cases=hb.more_cases,
        min_quality=min_quality,
    )
