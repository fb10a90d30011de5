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
"""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from llm_connect.ledger import LabelStore, SamplingDesign, SamplingStore
from llm_connect.values import GraderEvidence
from llm_connect.values._decision import PROVEN

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = ["human_evidence", "human_grader_evidence"]


def _arrays(design: SamplingDesign, values: dict[tuple[str, str], float]) -> tuple[Any, Any, Any, Any, int]:
    """``(judge, inclusion, chosen, human, left out)`` of one design: ``human`` NaN where not
    chosen or not labelled yet; labelled cases the sampler did not choose are left out."""
    import numpy as np

    cand = design.candidate
    chosen = np.fromiter(design.chosen, dtype=bool, count=len(design.chosen))
    human = np.full(chosen.size, np.nan)
    chosen_ids = set()
    for i in np.flatnonzero(chosen).tolist():
        case_id = design.case_ids[i]
        chosen_ids.add(case_id)
        value = values.get((cand, case_id))
        if value is not None:
            human[i] = value
    left_out = sum(1 for (c, case_id) in values if c == cand and case_id not in chosen_ids)
    judge = np.fromiter(design.judge, dtype=float, count=chosen.size)
    inclusion = np.fromiter(design.inclusion, dtype=float, count=chosen.size)
    return judge, inclusion, chosen, human, left_out


def human_grader_evidence(
    design: SamplingDesign,
    values: dict[tuple[str, str], float],
    *,
    min_quality: float,
    min_samples: int,
    alpha: float,
) -> GraderEvidence:
    """The evidence one judge's grades and people's labels give about one candidate's mean human
    quality (``values``: ``(candidate, case_id) -> human value`` of every labelled case)."""
    from llm_connect.routing._ppi import human_bound

    judge, inclusion, chosen, human, left_out = _arrays(design, values)
    hb = human_bound(
        judge,
        inclusion,
        chosen,
        human,
        alpha=alpha,
        min_quality=min_quality,
        floor=design.floor,
        min_samples=min_samples,
    )
    gid = design.grader_id
    notes = []
    if left_out:
        notes.append(
            f"{left_out} label{'s' if left_out != 1 else ''} of cases the sampler did not choose "
            "left out (they count for agreement, not here)"
        )
    if design.undecided:
        notes.append(
            f"{design.undecided} graded case{'s' if design.undecided != 1 else ''} not yet sampled "
            "(llm-connect labels queue)"
        )
    why = f"{gid}: {hb.why}" + "".join(f"; {note}" for note in notes)
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
        judge_bias=hb.judge_bias,
        labels_used=hb.labels_used,
        labels_pending=hb.pending,
        labels_left_out=left_out,
        cases_used=hb.cases_used,
        cases_waiting=hb.waiting,
        cases_unsampled=design.undecided,
        more_labels=hb.more_labels,
        more_cases=hb.more_cases,
    )


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
    ``baseline``: one read of the sampled cases, one of the labels.

    ``cache`` (kept by the caller between calls) holds each group's evidence with the design
    and labels it came from, so a group whose sampled cases and labels are unchanged is not
    computed again.
    """
    cands = list(dict.fromkeys(candidates))
    graders = list(dict.fromkeys(grader_ids))
    designs = SamplingStore(ledger.engine).design(task, baseline, cands, graders)
    values = LabelStore(ledger.engine).case_values(task, cands)
    out: dict[tuple[str, str], GraderEvidence] = {}
    settings = (task, baseline, min_quality, min_samples, alpha)
    for cand in cands:
        mine = {k: v for k, v in values.items() if k[0] == cand}
        for gid in graders:
            design = designs[(cand, gid)]
            key = (*settings, cand, gid)
            hit = None if cache is None else cache.get(key)
            if hit is not None and hit[0] == design and hit[1] == mine:
                out[(cand, gid)] = hit[2]
                continue
            ev = human_grader_evidence(
                design, mine, min_quality=min_quality, min_samples=min_samples, alpha=alpha
            )
            out[(cand, gid)] = ev
            if cache is not None:
                if len(cache) > 10_000:
                    cache.clear()
                cache[key] = (design, mine, ev)
    return out
