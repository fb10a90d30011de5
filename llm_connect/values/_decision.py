"""RoutingDecision and its per-candidate evidence (plain frozen values, JSON round-trip)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from llm_connect.types import utcnow
from llm_connect.values._identity import IdentityChange
from llm_connect.values._policy import STABILITY_VERDICTS, TARGETS, RoutingPolicy
from llm_connect.values._watch import Rollback, RoutedSince

__all__ = [
    "HUMAN_FIELDS",
    "INSUFFICIENT",
    "NO_GRADES",
    "NO_HUMAN_LABELS",
    "PROVEN",
    "RULED_OUT",
    "SETTLED",
    "STABILITY_VERDICTS",
    "TARGETS",
    "UNDECIDED",
    "CandidateEvidence",
    "GraderEvidence",
    "IgnoredGrader",
    "RoutingDecision",
    "combined_status",
]

PROVEN = "proven"
RULED_OUT = "ruled out"
UNDECIDED = "undecided"
INSUFFICIENT = "insufficient"
NO_GRADES = "no grades"
NO_HUMAN_LABELS = "no human labels yet"
"""The status of a candidate routed on what people would say before any usable label."""
HUMAN_FIELDS = (
    "target",
    "judge_mean",
    "human_estimate",
    "judge_bias",
    "judge_agreement",
    "labels_used",
    "labels_pending",
    "labels_left_out",
    "cases_used",
    "cases_waiting",
    "cases_unsampled",
    "more_labels",
    "more_cases",
)
"""The :class:`GraderEvidence` fields of ``target="human"`` (left out of a judge's ``to_dict``)."""
SETTLED = (PROVEN, RULED_OUT)
"""The statuses more cases cannot change."""


def combined_status(statuses: Sequence[str]) -> str:
    """A candidate's status from its graders' (every grader must prove it; one may rule it out):
    ``proven`` on all, else ``ruled out`` on any, else the first unproven grader's status
    (``no graders`` without any)."""
    if not statuses:
        return "no graders"
    if all(s == PROVEN for s in statuses):
        return PROVEN
    if RULED_OUT in statuses:
        return RULED_OUT
    return next(s for s in statuses if s != PROVEN)


def crossed_bounds(low: float, high: float) -> str:
    """How bounds that cross are named (``bounds cross (lower 0.850 above upper 0.375)``): the one
    wording of the reason and of :meth:`GraderEvidence.bounds_text`."""
    return f"bounds cross (lower {low:.3f} above upper {high:.3f})"


@dataclass(frozen=True)
class GraderEvidence:
    """What one grader's grades say about one candidate (computed by ``routing/_evidence.py``).

    The case is the unit: grades of one case (same case id, else same prompt)
    are averaged into one value first, and ``n`` counts distinct cases.
    """

    grader_id: str
    """The grader (judge) whose grades these are."""
    n: int
    """Distinct cases graded (for the task and baseline)."""
    mean: float | None
    """Mean of the per-case mean quality scores (``None`` without grades)."""
    lower_bound: float | None
    """Lower confidence bound of the mean, one-sided at ``1 - alpha`` (``None`` without grades)."""
    passed: bool
    """``status == "proven"``: at least ``min_samples`` cases and ``lower_bound >= min_quality``."""
    why: str
    """Why it passed or failed, in words."""
    n_grades: int | None = None
    """Grades behind the ``n`` cases (``None`` in decisions stored before case-level evidence)."""
    upper_bound: float | None = None
    """Upper confidence bound of the mean, one-sided at ``1 - alpha``."""
    std: float | None = None
    """Standard deviation of the per-case values (``None`` below two cases)."""
    status: str = ""
    """``proven``, ``ruled out`` (upper bound below ``min_quality``), ``undecided``,
    ``insufficient`` (fewer than ``min_samples`` cases) or ``no grades``."""
    cases_needed: int | None = None
    """For an undecided or insufficient candidate: roughly how many cases in all would settle it,
    if future cases look like these (``None`` when settled or too close to call)."""
    alpha: float | None = None
    """Each bound's one-sided error rate: ``(1 - confidence) / number of candidates``."""
    method: str = ""
    """``anytime-valid`` (default) or ``single-look (fixed n)``."""
    min_quality: float | None = None
    """The threshold this judge's bounds were held to (:meth:`RoutingPolicy.threshold`: a
    preference judge's win rate differs from a quality when none was stated); ``None`` in
    decisions stored before judges had their own: the decision's ``min_quality``."""
    delta_mean: float | None = None
    """Mean paired difference candidate − baseline score per case (single-response scorers only)."""
    delta_low: float | None = None
    """Lower end of the two-sided ``confidence`` interval of ``delta_mean``."""
    delta_high: float | None = None
    """Upper end of that interval."""
    delta_cases: int = 0
    """Cases with a paired difference."""
    # -- target="human" only (routing on what people would say; None for a judge's evidence) --
    target: str = "judge"
    """``judge``: the bounds are of the judge's mean grade; ``human``: of the mean of what people
    would say, from the judge's grades and the labels of the cases the sampler chose
    (``mean`` is then the prediction-powered estimate and ``n`` the cases in the bound)."""
    judge_mean: float | None = None
    """The judge's mean grade over the sampled cases (what routing on the judge would see)."""
    human_estimate: float | None = None
    """The prediction-powered estimate of the mean human value (``None`` before any label)."""
    judge_bias: float | None = None
    """Mean of judge grade minus human value over the labelled chosen cases (``None`` where the
    judge's scale is not people's: see :attr:`judge_agreement`)."""
    judge_agreement: float | None = None
    """Where the judge's scale is not people's: the Spearman rank correlation of its grades with
    people's values on the labelled chosen cases (``None`` with fewer than 5, or no spread)."""
    labels_used: int | None = None
    """Labels of chosen cases in the bound."""
    labels_pending: int | None = None
    """Chosen cases still without a label; the bound stops before the earliest."""
    labels_left_out: int | None = None
    """Labelled cases the sampler did not choose: they count for agreement, never here."""
    cases_used: int | None = None
    """Cases in the bound (those before the earliest pending label)."""
    cases_waiting: int | None = None
    """Sampled cases after the earliest pending label, waiting for it."""
    cases_unsampled: int | None = None
    """Graded cases the sampler has not decided yet (``labels queue``, ``grade --label-rate``)."""
    more_labels: int | None = None
    """About how many more labels would settle an undecided candidate."""
    more_cases: int | None = None
    """About how many more graded cases those labels come with."""

    @property
    def settled(self) -> bool:
        """Proven or ruled out: more cases cannot change the verdict."""
        return self.status in SETTLED

    @property
    def bounds_cross(self) -> bool:
        """The lower bound is above the upper bound: no one mean fits every case so far (the
        grades' mean moved within the stream; under a constant mean this happens with chance at
        most ``2 alpha``). The anytime bounds only tighten, so they stay crossed."""
        low, high = self.lower_bound, self.upper_bound
        return low is not None and high is not None and low > high

    def bounds_text(self) -> str:
        """The bounds as people read them: ``[0.812, 0.938]``, or, crossed, ``bounds cross
        (lower 0.850 above upper 0.375): the mean moved``; ``""`` without grades."""
        low, high = self.lower_bound, self.upper_bound
        if low is None or high is None:
            return ""
        if low > high:
            return f"{crossed_bounds(low, high)}: the mean moved"
        return f"[{low:.3f}, {high:.3f}]"

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON (what decisions, snapshots and ``--json`` carry); a judge's
        evidence leaves out the ``target="human"`` fields (:data:`HUMAN_FIELDS`)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if self.target == "human" or f.name not in HUMAN_FIELDS
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GraderEvidence:
        """The inverse of :meth:`to_dict`; keys of newer releases are ignored, missing ones default."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class CandidateEvidence:
    """Everything the router knew about one candidate."""

    model: str
    """The candidate model (as recorded in ``LLMResponse.model``)."""
    graders: tuple[GraderEvidence, ...]
    """One entry per usable grader, in the order the grader ids were given."""
    passed: bool
    """Whether it qualified on every usable grader."""
    mean_cost_usd: float | None
    """Mean recorded cost of the candidate's responses (``None`` when never recorded)."""
    mean_latency_ms: float | None
    """Mean recorded latency of the candidate's responses."""
    cost_ratio: float | None
    """``mean_cost_usd`` relative to the baseline's mean cost on the same grades."""
    latency_ratio: float | None
    """``mean_latency_ms`` relative to the baseline's mean latency on the same grades."""
    stability: str | None = None
    """The verdict of the newest stored stability analysis of the candidate on the task
    (``SAFE``, ``RISKY``, ``DO_NOT_SHIP``), when ``min_stability`` was asked for."""
    stability_ok: bool = True
    """Whether that verdict meets ``min_stability`` (always true without it); ``passed``
    already includes it."""

    def _deciding(self) -> tuple[GraderEvidence, ...]:
        """The graders a ruled-out candidate is ruled out on, else every usable grader: the
        figures shown beside the candidate's status are those of the graders behind it (a
        candidate ruled out on one judge is never shown with another judge's 0 cases)."""
        ruled = tuple(g for g in self.graders if g.status == RULED_OUT)
        return ruled or self.graders

    @property
    def n(self) -> int:
        """The smallest number of distinct cases over the graders behind the status (0 without any)."""
        return min((g.n for g in self._deciding()), default=0)

    @property
    def mean(self) -> float | None:
        """The lowest mean quality over the graders behind the status."""
        graders = self._deciding()
        means = [g.mean for g in graders if g.mean is not None]
        return min(means) if len(means) == len(graders) and means else None

    @property
    def lower_bound(self) -> float | None:
        """The lowest lower confidence bound over the graders behind the status."""
        graders = self._deciding()
        bounds = [g.lower_bound for g in graders if g.lower_bound is not None]
        return min(bounds) if len(bounds) == len(graders) and bounds else None

    @property
    def status(self) -> str:
        """``proven`` on every usable grader; ``ruled out`` when one grader rules it out;
        else the first grader's ``insufficient``/``undecided``/``no grades`` (``no graders``
        without a usable grader)."""
        return combined_status([g.status for g in self.graders])

    @property
    def settled(self) -> bool:
        """Proven on every usable grader, or ruled out on one: more cases cannot change it."""
        return self.status in SETTLED


@dataclass(frozen=True)
class IgnoredGrader:
    """A grader whose grades the router did not use, and why."""

    grader_id: str
    why: str


@dataclass(frozen=True)
class RoutingDecision:
    """Which model should serve a task, and the evidence behind it.

    ``model`` is either one of the candidates or the baseline; ``reason``
    explains the choice in a sentence a person can read. Every decision made
    by :meth:`Router.decide` is stored; ``decision_id`` is its row id.
    """

    model: str
    """The chosen model: the cheapest qualifying candidate, or the baseline."""
    reason: str
    """Why, in words (including graders that were ignored)."""
    task: str
    baseline: str
    candidates: tuple[CandidateEvidence, ...]
    """Evidence per candidate, in the order the candidates were given."""
    grader_ids: tuple[str, ...]
    """The grader ids asked for."""
    used_grader_ids: tuple[str, ...]
    """The grader ids whose grades were used as evidence."""
    ignored_graders: tuple[IgnoredGrader, ...]
    """Grader ids left out (an LLM judge without a passing calibration)."""
    min_quality: float
    confidence: float
    min_samples: int
    allow_uncalibrated: bool
    baseline_mean_cost_usd: float | None
    baseline_mean_latency_ms: float | None
    created_at: datetime = field(default_factory=utcnow)
    decision_id: int | None = None
    """Row id in the ledger's ``routing_decisions`` table, once stored."""
    fixed_n: bool = False
    """Whether the bounds were single-look intervals (``fixed_n=True``) instead of anytime-valid."""
    min_stability: str | None = None
    """The least stability verdict a candidate needed (``None``: stability not asked)."""
    target: str = "judge"
    """``judge`` (the judges' mean grades) or ``human`` (what people would say: the judges'
    grades corrected by people's labels of sampled cases)."""
    prefer: str = "cost"
    """Among proven candidates, the lowest mean ``cost`` or ``latency`` was chosen."""
    identity_changes: tuple[IdentityChange, ...] = ()
    """Routing judges whose newest grade names another served model or fingerprint than the
    identity their evidence was last vouched for under (issue 37): said in ``reason``; the
    grades still count (a drift check decides whether they may)."""
    routed_since: RoutedSince | None = None
    """When ``model`` is a candidate: since when it serves (the first decision of the streak) and
    the grade id after which the watch reads its cases (issue 38)."""
    rollback: Rollback | None = None
    """A candidate the watch rolled back (``new`` on the decision that made it); carried until the
    candidate is proven again on cases graded after it."""
    min_quality_stated: bool = True
    """Whether ``min_quality`` was stated; when not, a preference judge was held to its own
    scale's default (:meth:`threshold`)."""

    def threshold(self, grader_id: str) -> float:
        """The threshold ``grader_id``'s evidence was held to (what its evidence says, else
        what the policy gives)."""
        for cand in self.candidates:
            for g in cand.graders:
                if g.grader_id == grader_id and g.min_quality is not None:
                    return g.min_quality
        return self.policy.threshold(grader_id)

    def thresholds(self) -> dict[str, float]:
        """The threshold of each routing judge (``used_grader_ids``), in order."""
        return {g: self.threshold(g) for g in self.used_grader_ids}

    @property
    def policy(self) -> RoutingPolicy:
        """The :class:`RoutingPolicy` this decision was made under (``route_on``: the judges asked)."""
        stated: dict[str, Any] = {"min_quality": self.min_quality} if self.min_quality_stated else {}
        return RoutingPolicy(
            **stated,
            confidence=self.confidence,
            min_samples=self.min_samples,
            target=self.target,
            route_on=self.grader_ids,
            allow_uncalibrated=self.allow_uncalibrated,
            min_stability=self.min_stability,
            fixed_n=self.fixed_n,
            prefer=self.prefer,
        )

    @property
    def routed(self) -> bool:
        """Whether a candidate was chosen instead of the baseline."""
        return self.model != self.baseline

    def evidence_for(self, model: str) -> CandidateEvidence:
        """The evidence of candidate ``model`` (``KeyError`` if it was not a candidate)."""
        for cand in self.candidates:
            if cand.model == model:
                return cand
        raise KeyError(model)

    def with_id(self, decision_id: int) -> RoutingDecision:
        """A copy carrying its stored row id."""
        return replace(self, decision_id=decision_id)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (what the ledger stores); :meth:`from_dict` reverses it."""
        changes = [c.to_dict() for c in self.identity_changes]
        watch = ({"routed_since": self.routed_since.to_dict()} if self.routed_since else {}) | (
            {"rollback": self.rollback.to_dict()} if self.rollback else {}
        )
        return (
            {
                "model": self.model,
                "reason": self.reason,
                "task": self.task,
                "baseline": self.baseline,
                "candidates": [
                    {
                        "model": c.model,
                        "passed": c.passed,
                        "mean_cost_usd": c.mean_cost_usd,
                        "mean_latency_ms": c.mean_latency_ms,
                        "cost_ratio": c.cost_ratio,
                        "latency_ratio": c.latency_ratio,
                        "stability": c.stability,
                        "stability_ok": c.stability_ok,
                        "graders": [g.to_dict() for g in c.graders],
                    }
                    for c in self.candidates
                ],
                "grader_ids": list(self.grader_ids),
                "used_grader_ids": list(self.used_grader_ids),
                "ignored_graders": [{"grader_id": g.grader_id, "why": g.why} for g in self.ignored_graders],
                "parameters": {
                    "min_quality": self.min_quality,
                    "confidence": self.confidence,
                    "min_samples": self.min_samples,
                    "allow_uncalibrated": self.allow_uncalibrated,
                    "fixed_n": self.fixed_n,
                    "min_stability": self.min_stability,
                }
                | ({"target": self.target} if self.target != "judge" else {})
                | ({"prefer": self.prefer} if self.prefer != "cost" else {})
                | ({} if self.min_quality_stated else {"min_quality_stated": False}),
                "baseline_mean_cost_usd": self.baseline_mean_cost_usd,
                "baseline_mean_latency_ms": self.baseline_mean_latency_ms,
                "created_at": self.created_at.isoformat(),
            }
            | ({"identity_changes": changes} if changes else {})
            | watch
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, decision_id: int | None = None) -> RoutingDecision:
        """Rebuild a decision from :meth:`to_dict` output."""
        params = data["parameters"]
        return cls(
            model=data["model"],
            reason=data["reason"],
            task=data["task"],
            baseline=data["baseline"],
            candidates=tuple(
                CandidateEvidence(
                    model=c["model"],
                    graders=tuple(GraderEvidence.from_dict(g) for g in c["graders"]),
                    passed=c["passed"],
                    mean_cost_usd=c["mean_cost_usd"],
                    mean_latency_ms=c["mean_latency_ms"],
                    cost_ratio=c["cost_ratio"],
                    latency_ratio=c["latency_ratio"],
                    stability=c.get("stability"),
                    stability_ok=bool(c.get("stability_ok", True)),
                )
                for c in data["candidates"]
            ),
            grader_ids=tuple(data["grader_ids"]),
            used_grader_ids=tuple(data["used_grader_ids"]),
            ignored_graders=tuple(IgnoredGrader(**g) for g in data["ignored_graders"]),
            identity_changes=tuple(IdentityChange.from_dict(c) for c in data.get("identity_changes", ())),
            routed_since=RoutedSince.from_dict(data["routed_since"]) if data.get("routed_since") else None,
            rollback=Rollback.from_dict(data["rollback"]) if data.get("rollback") else None,
            min_quality=params["min_quality"],
            confidence=params["confidence"],
            min_samples=params["min_samples"],
            allow_uncalibrated=params["allow_uncalibrated"],
            fixed_n=bool(params.get("fixed_n", False)),
            min_stability=params.get("min_stability"),
            target=params.get("target", "judge"),
            prefer=params.get("prefer", "cost"),
            min_quality_stated=bool(params.get("min_quality_stated", True)),
            baseline_mean_cost_usd=data["baseline_mean_cost_usd"],
            baseline_mean_latency_ms=data["baseline_mean_latency_ms"],
            created_at=datetime.fromisoformat(data["created_at"]),
            decision_id=decision_id,
        )
