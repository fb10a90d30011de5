"""The routing rule once the evidence is in: which candidate, and the reason in words.

:class:`~llm_connect.routing.Router` (which stores its decision) and the HTML
report (which never writes) both choose and explain with these two functions,
so a report cannot say something the router would not.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from llm_connect.routing._decision import CandidateEvidence, GraderEvidence, IgnoredGrader, RoutingDecision
from llm_connect.routing._evidence import method_name, threshold_of
from llm_connect.routing._gate import deciding_judge, more_cases
from llm_connect.values import NO_HUMAN_LABELS, RULED_OUT, STABILITY_VERDICTS

__all__ = [
    "STABILITY_ORDER",
    "cheapest_proven",
    "decision_sentence",
    "explain_decision",
    "judge_and_people",
    "scale_note",
    "threshold_phrase",
]

STABILITY_ORDER = STABILITY_VERDICTS
"""Stability verdicts, best first (``min_stability="RISKY"`` accepts SAFE and RISKY)."""


def plural(n: int, noun: str) -> str:
    """``1 more label``, ``2 more labels``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def cheapest_proven(
    evidence: Sequence[CandidateEvidence], order: Sequence[str], *, prefer: str = "cost"
) -> CandidateEvidence | None:
    """The passing candidate with the lowest mean cost (``prefer="latency"``: mean latency);
    unknown figures last, then the order given."""
    passing = [c for c in evidence if c.passed]
    if not passing:
        return None

    def figure(c: CandidateEvidence) -> float | None:
        return c.mean_latency_ms if prefer == "latency" else c.mean_cost_usd

    return min(
        passing,
        key=lambda c: (figure(c) is None, figure(c) or 0.0, list(order).index(c.model)),
    )


def threshold_phrase(thresholds: Mapping[str, float]) -> str:
    """The thresholds of a decision's judges in words: ``0.9`` when they agree, else the most
    common one with the others named, ``0.9 (0.45 on pairwise:openai:m:pairwise-v1)``."""
    values = list(thresholds.values())
    if not values:
        return ""
    counts = {v: values.count(v) for v in values}
    main = max(counts, key=lambda v: (counts[v], v))
    others = [f"{v:g} on {g}" for g, v in thresholds.items() if v != main]
    return f"{main:g}" + (f" ({', '.join(others)})" if others else "")


def _pct(level: float) -> str:
    return f"{100.0 * level:.4g}%"


def _unstable(candidate: CandidateEvidence, task: str) -> list[str]:
    """Why ``candidate`` misses ``min_stability`` (empty when it meets it)."""
    if candidate.stability_ok:
        return []
    if candidate.stability is None:
        return [f"no stability analysis stored on {task} (run llm-connect stability --task {task})"]
    return [f"stability {candidate.stability} on {task}, below the minimum"]


def explain_decision(
    chosen: CandidateEvidence | None,
    task: str,
    baseline: str,
    evidence: Sequence[CandidateEvidence],
    used: Sequence[str],
    ignored: Sequence[IgnoredGrader],
    *,
    min_quality: float | Mapping[str, float],
    min_samples: int,
    alpha: float,
    fixed_n: bool = False,
    min_stability: str | None = None,
    target: str = "judge",
    prefer: str = "cost",
) -> str:
    """The decision in a sentence: the rule, each candidate's evidence (its own ``why``), the cost.

    ``target="human"``: the rule bounds the mean of what people would say (prediction-powered,
    from the judges' grades and people's labels of the sampled cases)."""
    notes = "".join(f" Ignored {g.why}." for g in ignored)
    if not evidence:
        return f"Kept the baseline {baseline}: no candidates were given.{notes}"
    if not used:
        return f"Kept the baseline {baseline}: no usable grader remains, so no candidate has evidence.{notes}"
    k = len(evidence)
    what = (
        "mean per-case quality"
        if target != "human"
        else "mean per-case human quality (prediction-powered: judge grades plus people's labels "
        "of sampled cases)"
    )
    rule = (
        f"{method_name(fixed_n)} {_pct(1.0 - alpha)} lower bound of {what} >= "
        f"{threshold_phrase({g: threshold_of(min_quality, g) for g in used})} "
        f"with >= {min_samples} cases on {' and '.join(used)}"
        + (f"; {_pct(1.0 - alpha * k)} over {k} candidates (Bonferroni)" if k > 1 else "")
        + (f"; stability {min_stability} or better" if min_stability is not None else "")
    )
    if chosen is None:
        failures = "; ".join(
            f"{c.model}: " + ", ".join([g.why for g in c.graders if not g.passed] + _unstable(c, task))
            for c in evidence
        )
        return f"Kept the baseline {baseline}: no candidate is proven ({rule}). {failures}.{notes}"
    fast = prefer == "latency"
    ratio = chosen.latency_ratio if fast else chosen.cost_ratio
    figure = "latency" if fast else "cost"
    cost = (
        f"mean {figure} {ratio:.2f}x the baseline's"
        if ratio is not None
        else f"{figure} unknown, first qualifying candidate in the order given"
    )
    others = [c.model for c in evidence if c.passed and c is not chosen]
    also = f" Also qualified: {', '.join(others)}." if others else ""
    proof = "; ".join(g.why for g in chosen.graders)
    if min_stability is not None:
        proof += f"; stability {chosen.stability} on {task}"
    return (
        f"Routed to {chosen.model} instead of {baseline}: the {'fastest' if fast else 'cheapest'} "
        f"proven candidate ({rule}): "
        f"{proof}; {cost}.{also}{notes}"
    )


def _needs(candidate: CandidateEvidence, min_quality: float | Mapping[str, float]) -> str:
    """``needs about N more cases`` for an unsettled ``candidate``: the figure the row of the judge
    that decides prints (:func:`~llm_connect.routing._gate.deciding_judge`), naming a likely
    rule-out; ``is too close to call`` when no judge decides."""
    found = deciding_judge(candidate, min_quality)
    if found is None:
        return f"{candidate.model} is too close to call"
    g, outcome = found
    labels = plural(int(g.more_labels or 0), "more label")
    more = (
        f"{labels} (and {plural(int(more_cases(g) or 0), 'more case')})"
        if g.target == "human"
        else f"{more_cases(g)} more cases"
    )
    likely = " (likely to be ruled out)" if outcome == RULED_OUT else ""
    return f"{candidate.model} needs about {more}{likely}"


def _join(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def decision_sentence(decision: RoutingDecision) -> str:
    """The decision in one plain sentence, e.g. ``Keep gpt-4o: no candidate is proven at 0.9 yet;
    gpt-4o-mini needs about 60 more cases.`` (the full reason is ``decision.reason``; the CLI and
    the report both print this sentence). "About N more cases" is the figure the row of the judge
    that settles the candidate first prints, with "(likely to be ruled out)" when that judge is
    projected to rule it out."""
    d = decision
    human = d.target == "human"
    q = (threshold_phrase(d.thresholds()) or f"{d.min_quality:g}") + (
        " by what people would say" if human else ""
    )
    if d.routed:
        chosen = d.evidence_for(d.model)
        n = len(d.used_grader_ids)
        on = "its routing judge" if n == 1 else "both routing judges" if n == 2 else f"all {n} routing judges"
        if human:
            on += (
                "'s grades corrected by people's labels"
                if n == 1
                else "' grades corrected by people's labels"
            )
        cost = "" if chosen.cost_ratio is None else f", at {chosen.cost_ratio:.2f}x the baseline's cost"
        return f"Route to {d.model} instead of {d.baseline}: proven at {q} on {on}{cost}."
    if not d.candidates:
        return f"Keep {d.baseline}: there is no candidate to compare with it."
    if not d.used_grader_ids:
        return f"Keep {d.baseline}: no routing judge is usable (an LLM judge needs a passing calibration)."
    ruled = [c.model for c in d.candidates if c.status == "ruled out"]
    parts = []
    unsettled = False
    for c in d.candidates:
        if c.status == "ruled out":
            continue
        if c.status == "proven":
            parts.append(f"{c.model} is proven but fails its stability check")
            continue
        unsettled = True
        if c.status in ("no grades", "no graders"):
            parts.append(f"{c.model} has no grades on a routing judge")
            continue
        if c.status == NO_HUMAN_LABELS:
            command = shlex.join(["llm-connect", "labels", "queue", "-t", d.task, "-c", c.model])
            parts.append(f"{c.model} has no human labels yet ({command})")
            continue
        parts.append(_needs(c, d.thresholds()))
    if ruled:
        parts.append(f"{_join(ruled)} {'is' if len(ruled) == 1 else 'are'} ruled out")
    head = f"no candidate is proven at {q}" + (" yet" if unsettled else "")
    return f"Keep {d.baseline}: {head}; {', '.join(parts)}."


def _num(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def scale_note(decision: RoutingDecision) -> str | None:
    """A line for a decision routed on a preference judge's own grades, which are win rates (a
    tie is 0.5): the threshold it was held to, in words. ``None`` when nothing needs saying
    (people's target, no preference judge, or a stated threshold at or below a tie)."""
    from llm_connect.routing._human import on_peoples_scale
    from llm_connect.values import DEFAULT_WIN_RATE

    d = decision
    pairwise = [g for g in d.used_grader_ids if on_peoples_scale(g)]
    if d.target == "human" or not pairwise:
        return None
    grades = f"note: {_join(pairwise)} grade{'s' if len(pairwise) == 1 else ''} win rates (a tie is 0.5)"
    if not d.min_quality_stated:
        others = len(pairwise) < len(d.used_grader_ids)
        return (
            f"{grades}: held to {DEFAULT_WIN_RATE:g}, no worse than the baseline by more than a little"
            + (f" (the other judges to {d.min_quality:g})" if others else "")
            + "; --min-quality sets one threshold for every judge"
        )
    if d.min_quality <= 0.5:
        return None
    return (
        f"{grades}: --min-quality {d.min_quality:g} asks the candidate to be preferred "
        f"{d.min_quality:.0%} of the time; --min-quality {DEFAULT_WIN_RATE:g} asks it to be no "
        "worse than the baseline by more than a little"
    )


def judge_and_people(evidence: GraderEvidence) -> str | None:
    """The judge's and the people's estimate side by side, for one judge's evidence routed on what
    people would say (``None`` for a judge's own evidence): ``judge alone 0.945 | people 0.851
    [0.802, 0.897] (judge bias +0.094), 30 labels used, 2 pending, 1 left out``; with "about N
    more labels (and M more cases)" while unsettled. What ``route`` and ``grade`` print."""
    g = evidence
    if g.target != "human":
        return None
    people = (
        "no human labels yet"
        if g.human_estimate is None
        else f"people {_num(g.human_estimate)} "
        + (g.bounds_text() or f"[{_num(g.lower_bound)}, {_num(g.upper_bound)}]")
        + ("" if g.judge_bias is None else f" (judge bias {_num(g.judge_bias, '+.3f')})")
        + (
            ""
            if g.judge_bias is not None or g.human_estimate is None
            else " (judge on another scale"
            + ("" if g.judge_agreement is None else f"; agreement Spearman {g.judge_agreement:.2f}")
            + ")"
        )
    )
    counts = [f"{g.labels_used or 0} labels used"]
    if g.labels_pending:
        counts.append(f"{g.labels_pending} pending")
    if g.labels_left_out:
        counts.append(f"{g.labels_left_out} left out (not chosen by the sampler)")
    if g.cases_unsampled:
        counts.append(f"{g.cases_unsampled} cases not yet sampled")
    more = ""
    if not g.settled and g.more_labels is not None:
        more = (
            f"; about {plural(int(g.more_labels), 'more label')} (and "
            f"{plural(int(g.more_cases or 0), 'more case')}) would settle it"
        )
    return f"judge alone {_num(g.judge_mean)} | {people}, {', '.join(counts)}{more}"
