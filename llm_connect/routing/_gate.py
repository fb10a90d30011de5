"""The quality gate: one run's verdict for CI, with three outcomes.

``passed`` only when the evidence proves the threshold for every candidate on
every routing judge; ``failed`` when it rules one out (its upper bound is below
``min_quality``); ``not settled`` otherwise. "Passed" never describes evidence
that does not prove the threshold: a small suite whose bounds straddle it is
*not settled*, never *passed*.

The gate reads the statuses that ``routing/_evidence.py`` computed (the same
the router and every table print), so it cannot disagree with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_connect.routing._evidence import threshold_of
from llm_connect.values import PROVEN, RULED_OUT, CandidateEvidence, GraderEvidence

__all__ = [
    "GATE_FAILED",
    "GATE_NOT_SETTLED",
    "GATE_PASSED",
    "GateItem",
    "GateResult",
    "deciding_judge",
    "likely_outcome",
    "more_cases",
    "quality_gate",
]

GATE_PASSED = "passed"
GATE_FAILED = "failed"
GATE_NOT_SETTLED = "not settled"


@dataclass(frozen=True)
class GateItem:
    """One (task, candidate, routing judge) the gate looked at."""

    task: str
    candidate: str
    """The candidate as the run named it (its adapter id)."""
    evidence: GraderEvidence
    """The judge's evidence about the candidate (status, mean, bounds, cases)."""

    def describe(self, min_quality: float) -> str:
        """One short line: candidate, judge, task, the mean against the threshold, and what is missing."""
        ev = self.evidence
        min_quality = min_quality if ev.min_quality is None else ev.min_quality
        if ev.target == "human":
            return self._describe_people(min_quality)
        head = f"{self.candidate} on {ev.grader_id} in {self.task}"
        if ev.mean is None or ev.lower_bound is None or ev.upper_bound is None:
            return f"{head}: no grades"
        where = f"mean {ev.mean:.3f} vs {min_quality:g}, {_bounds(ev)}"
        if ev.status == RULED_OUT:
            return f"{head}: {where}, ruled out (upper bound below {min_quality:g})"
        if ev.status == PROVEN:
            return f"{head}: {where}, proven"
        more = more_cases(ev)
        if more is None:
            settle = "too close to call at any practical number of cases"
        else:
            settle = f"about {more} more case{'s' if more != 1 else ''} would settle it"
        return f"{head}: {where}, {ev.n} case{'s' if ev.n != 1 else ''}; {settle}"

    def _describe_people(self, min_quality: float) -> str:
        ev = self.evidence
        head = f"{self.candidate} on {ev.grader_id} in {self.task}, by what people would say"
        pending = (
            f", {ev.labels_pending} chosen case{'s' if ev.labels_pending != 1 else ''} awaiting labels"
            if ev.labels_pending
            else ""
        )
        if ev.mean is None or ev.lower_bound is None or ev.upper_bound is None:
            return f"{head}: no human labels yet{pending}"
        where = (
            f"estimate {ev.mean:.3f} vs {min_quality:g}, {_bounds(ev)}, "
            f"{ev.labels_used or 0} label{'s' if ev.labels_used != 1 else ''}"
        )
        if ev.status == RULED_OUT:
            return f"{head}: {where}, ruled out (upper bound below {min_quality:g})"
        if ev.status == PROVEN:
            return f"{head}: {where}, proven"
        if ev.more_labels is None:
            return f"{head}: {where}{pending}; too close to call at any practical number of labels"
        more = f"about {ev.more_labels} more label{'s' if ev.more_labels != 1 else ''}"
        if ev.more_cases:
            more += f" (and {ev.more_cases} more case{'s' if ev.more_cases != 1 else ''})"
        return f"{head}: {where}{pending}; {more} would settle it"


def _bounds(evidence: GraderEvidence) -> str:
    """``bounds [0.812, 0.938]``, or, crossed, ``bounds cross (...): the mean moved``."""
    text = evidence.bounds_text()
    return text if evidence.bounds_cross else f"bounds {text}"


def more_cases(evidence: GraderEvidence) -> int | None:
    """How many cases beyond the ``n`` graded would settle an unsettled judge (``None``: settled,
    or too close to call). ``GraderEvidence.cases_needed`` is the total; this is the difference."""
    if evidence.cases_needed is None or evidence.settled:
        return None
    return max(0, evidence.cases_needed - evidence.n)


def likely_outcome(evidence: GraderEvidence, min_quality: float | Mapping[str, float]) -> str | None:
    """What :func:`more_cases` more cases would most likely settle an unsettled judge as:
    ``proven`` when its mean is at or above ``min_quality``, else ``ruled out`` (the direction its
    ``why`` names: "would prove" / "would rule it out"); ``None`` when settled or too close to call.
    Routing on what people would say, it also needs the labels those cases come with."""
    if more_cases(evidence) is None or evidence.mean is None:
        return None
    if evidence.target == "human" and evidence.more_labels is None:
        return None
    threshold = (
        evidence.min_quality
        if evidence.min_quality is not None
        else threshold_of(min_quality, evidence.grader_id)
    )
    return PROVEN if evidence.mean >= threshold else RULED_OUT


def deciding_judge(
    candidate: CandidateEvidence, min_quality: float | Mapping[str, float]
) -> tuple[GraderEvidence, str] | None:
    """The unproven judge whose projection settles ``candidate`` first, and the outcome.

    One judge ruling a candidate out rules it out, while proving it takes every judge: so the
    judge projected to rule it out in the fewest cases (labels, routing on what people would say)
    when any is, else, when every unproven judge is projected to prove it, the one that needs the
    most. ``None`` when neither can be said (a judge too close to call, and none projected to rule
    it out). Its :func:`more_cases` (and ``more_labels``) are the figures its own row prints."""
    unproven = [g for g in candidate.graders if g.status != PROVEN]
    if not unproven:
        return None
    outcomes = [likely_outcome(g, min_quality) for g in unproven]

    def cost(g: GraderEvidence) -> tuple[int, int]:
        cases = more_cases(g) or 0
        return (g.more_labels or 0, cases) if g.target == "human" else (cases, 0)

    out = [g for g, o in zip(unproven, outcomes, strict=True) if o == RULED_OUT]
    if out:
        return min(out, key=cost), RULED_OUT
    if all(o == PROVEN for o in outcomes):
        return max(unproven, key=cost), PROVEN
    return None


@dataclass(frozen=True)
class GateResult:
    """The gate's outcome and the items behind it."""

    outcome: str
    """``passed``, ``failed`` or ``not settled``."""
    min_quality: float
    ruled_out: tuple[GateItem, ...] = ()
    """The items that fail the gate."""
    unsettled: tuple[GateItem, ...] = ()
    """The items neither proven nor ruled out (what keeps a gate from passing)."""
    proven: tuple[GateItem, ...] = ()
    checked: int = field(default=0)
    """How many (task, candidate, routing judge) items were looked at."""
    ignored: tuple[str, ...] = ()
    """Why routing judges were left out of the decisions the gate reads (an LLM judge with no
    passing calibration), one line each."""

    @property
    def by_people(self) -> bool:
        """Whether the gate judged what people would say (``target="human"`` evidence)."""
        return any(i.evidence.target == "human" for i in (*self.ruled_out, *self.unsettled, *self.proven))

    @property
    def passed(self) -> bool:
        """Whether the outcome is ``passed``."""
        return self.outcome == GATE_PASSED

    def lines(self) -> list[str]:
        """One line per item that keeps the gate from passing (ruled out first)."""
        if self.checked == 0 and self.ignored:
            return [f"no routing judge is usable: {why}" for why in self.ignored]
        if self.checked == 0:
            return ["no routing judge has grades for any candidate: nothing proves the threshold"]
        return [item.describe(self.min_quality) for item in (*self.ruled_out, *self.unsettled)]

    def headline(self) -> str:
        """``quality gate passed (min 0.9)`` and the like, in plain words."""
        word = {GATE_PASSED: "passed", GATE_FAILED: "FAILED", GATE_NOT_SETTLED: "NOT SETTLED"}[self.outcome]
        tail = {
            GATE_PASSED: f": every candidate is proven on every routing judge ({self.checked} checked)",
            GATE_FAILED: f": {len(self.ruled_out)} ruled out",
            GATE_NOT_SETTLED: (
                f": {len(self.unsettled)} not proven yet and none ruled out; "
                f"{'more labels' if self.by_people else 'more cases'} would settle it"
            ),
        }[self.outcome]
        return f"quality gate {word} (min {self.min_quality:g}){tail}"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: the outcome, the threshold and the items that keep it from passing."""

        def item(i: GateItem) -> dict[str, Any]:
            ev = i.evidence
            return {
                "task": i.task,
                "candidate": i.candidate,
                "grader_id": ev.grader_id,
                "status": ev.status,
                "cases": ev.n,
                "mean": ev.mean,
                "lower_bound": ev.lower_bound,
                "upper_bound": ev.upper_bound,
                "more_cases_needed": more_cases(ev),
                **(
                    {"target": "human", "labels_used": ev.labels_used, "more_labels_needed": ev.more_labels}
                    if ev.target == "human"
                    else {}
                ),
            }

        return {
            "outcome": self.outcome,
            "min_quality": self.min_quality,
            "checked": self.checked,
            "ruled_out": [item(i) for i in self.ruled_out],
            "not_settled": [item(i) for i in self.unsettled],
            "lines": self.lines() if self.outcome != GATE_PASSED else [],
        }


def quality_gate(
    items: Iterable[tuple[str, str, GraderEvidence]], *, min_quality: float, ignored: Iterable[str] = ()
) -> GateResult:
    """The gate over ``(task, candidate, evidence)`` of every usable routing judge (``ignored``:
    why the decisions left other routing judges out, shown when nothing else is checked).

    ``failed`` when any item is ruled out; ``passed`` when there is at least one
    item and every one is proven; ``not settled`` otherwise (including when no
    routing judge has evidence at all: nothing proves the threshold).
    """
    found = [GateItem(task, cand, ev) for task, cand, ev in items]
    ruled = tuple(i for i in found if i.evidence.status == RULED_OUT)
    proven = tuple(i for i in found if i.evidence.status == PROVEN)
    unsettled = tuple(i for i in found if i.evidence.status not in (PROVEN, RULED_OUT))
    if ruled:
        outcome = GATE_FAILED
    elif found and not unsettled:
        outcome = GATE_PASSED
    else:
        outcome = GATE_NOT_SETTLED
    return GateResult(
        outcome=outcome,
        min_quality=min_quality,
        ruled_out=ruled,
        unsettled=unsettled,
        proven=proven,
        checked=len(found),
        ignored=tuple(dict.fromkeys(ignored)),
    )
