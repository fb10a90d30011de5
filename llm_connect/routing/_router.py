"""Router: pick the cheapest candidate whose quality is proven, else the baseline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError
from llm_connect.routing._calibration_gate import HUMAN, gating_calibration
from llm_connect.routing._choice import STABILITY_ORDER, cheapest_proven, explain_decision
from llm_connect.routing._decision import CandidateEvidence, GraderEvidence, IgnoredGrader, RoutingDecision
from llm_connect.routing._evidence import candidate_alpha, gather
from llm_connect.routing._rollback import WatchPlan, plan_watch, restricted_evidence
from llm_connect.routing._series import CachedSeries
from llm_connect.types import utcnow
from llm_connect.values import IdentityChange, RoutingPolicy, SliceDecisions

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = ["Router"]

_SETTINGS = frozenset(
    {"min_quality", "confidence", "min_samples", "allow_uncalibrated", "fixed_n", "min_stability", "target",
     "prefer", "route_on"}
)  # fmt: skip
"""The keyword settings ``decide``/``evaluate`` accept as a shim over :class:`RoutingPolicy`."""


def _ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base <= 0:
        return None
    return value / base


def _asks_llm(totals: Sequence[Any]) -> dict[str, bool]:
    """Per grader id: whether any of its grades came from a judge that asks an LLM."""
    out: dict[str, bool] = {}
    for t in totals:
        out[t.grader_id] = out.get(t.grader_id, False) or t.asks_llm
    return out


def _version(totals: Any) -> tuple[int, float, float]:
    """Changes whenever a group's grades change (every ledger write updates the running totals)."""
    return (totals.n, totals.sum_quality, totals.sum_quality_sq)


def _weighted(pairs: list[tuple[Any, Any]]) -> float | None:
    """Mean of per-group means weighted by their counts of known values."""
    total = sum(float(c) for m, c in pairs if m is not None and c)
    if total == 0:
        return None
    return sum(float(m) * float(c) for m, c in pairs if m is not None and c) / total


class Router:
    """Decides which model serves a task, from the grades in a :class:`QualityLedger`.

    A candidate qualifies (is *proven*) when, for every usable grader, at least
    ``min_samples`` distinct cases of the task are graded against the baseline
    (grades of one case are averaged first) and the lower confidence bound of
    its mean per-case quality is at least ``min_quality``. Each bound is
    one-sided at ``(1 - confidence) / k`` for ``k`` candidates, so the chance of
    routing to any candidate whose true mean is below ``min_quality`` is at most
    ``1 - confidence``; the bounds are anytime-valid (the guarantee holds however
    often ``decide`` is asked as grades accrue) unless ``fixed_n=True``
    (``docs/decisions.md``). The cheapest qualifying candidate by recorded mean
    cost is chosen (candidates with unknown cost come after, in the order
    given); without one, the baseline. Each candidate's evidence says whether
    it is proven, ruled out, undecided (with roughly how many more cases would
    settle it) or has too few cases. Grades of an LLM judge count only once the
    ledger holds a passing calibration for it (unless ``allow_uncalibrated``).

    Example::

        decision = Router(ledger).decide(
            "support", baseline="gpt-4o", candidates=["gpt-4o-mini"], grader_id="embedding"
        )
        print(decision.model, decision.reason)
    """

    def __init__(self, ledger: QualityLedger) -> None:
        self.ledger = ledger
        # Evidence per group, reused while the group's running totals (count and sums, which
        # every write to the ledger changes, from any process) stay the same.
        self._evidence: dict[Any, Any] = {}
        # Case series per group as last read (routing/_series.py): a group with new grades reads
        # only its new cases, and its bounds continue from their running sums.
        self._series: dict[Any, CachedSeries] = {}
        # (task, baseline) whose last decision found changed groups: grades are arriving, so the
        # next decision reads the new cases together with the totals.
        self._active: set[tuple[str, str]] = set()
        # target="human": each group's evidence with the sampled cases and labels it came from.
        self._human: dict[Any, Any] = {}
        # The watch (routing/_rollback.py): each routed candidate's detector state per judge.
        self._watch: dict[Any, Any] = {}

    def __repr__(self) -> str:
        return f"Router({self.ledger!r})"

    def usable_graders(
        self, task: str, grader_ids: Sequence[str], *, allow_uncalibrated: bool = False
    ) -> tuple[list[str], list[IgnoredGrader]]:
        """The grader ids whose grades :meth:`decide` would use for ``task``, and those it would
        ignore with the reason (an LLM judge without a passing calibration)."""
        totals = self.ledger.grade_totals(task=task, grader_id=list(grader_ids))
        return self._usable_graders(task, tuple(grader_ids), allow_uncalibrated, _asks_llm(totals))

    def _usable_graders(
        self,
        task: str,
        grader_ids: tuple[str, ...],
        allow_uncalibrated: bool,
        asks_llm: dict[str, bool],
        judges_target: bool = True,
    ) -> tuple[list[str], list[IgnoredGrader]]:
        """The graders whose grades may decide; an LLM judge's only after a passing calibration,
        and on the judges' target no judge whose drift check says ``drifted`` (:meth:`_drifted`).

        Whether a grader asks an LLM is what its grades say (``asks_llm``, stored by the
        judge that made them), never a guess from its name. A grader without grades here
        is used (it contributes n=0).
        """
        used: list[str] = []
        ignored: list[IgnoredGrader] = []
        drifted = self._drifted(grader_ids, task) if judges_target else {}
        for gid in grader_ids:
            if gid in drifted:
                ignored.append(drifted[gid])
                continue
            if allow_uncalibrated or not asks_llm.get(gid, False):
                used.append(gid)
                continue
            cal = gating_calibration(self.ledger, gid, task=task)  # people's verdict first
            if cal is not None and cal.passed:
                used.append(gid)
            elif cal is None:
                ignored.append(
                    IgnoredGrader(
                        gid,
                        f"{gid} is an LLM judge with no stored calibration; run "
                        f"`llm-connect calibrate --judge {gid} --against <non-LLM judge>` "
                        "or pass allow_uncalibrated=True",
                    )
                )
            else:
                scope = f"task {cal.task!r}" if cal.task else "all tasks"
                ignored.append(
                    IgnoredGrader(
                        gid,
                        f"{gid} is an LLM judge whose latest calibration (#{cal.id}, {scope}) "
                        f"failed: {cal.verdict}",
                    )
                )
        return used, ignored

    def _drifted(self, grader_ids: Sequence[str], task: str) -> dict[str, IgnoredGrader]:
        """The judges of ``grader_ids`` that do not count on ``task``, and why: each one's newest
        drift check (``llm-connect judges check``) says ``drifted`` and no calibration against
        people has passed since. People's target keeps such a judge: its bound is valid whatever
        the judge does (``docs/decisions.md``)."""
        from llm_connect.ledger import AnchorStore

        out: dict[str, IgnoredGrader] = {}
        for grader_id, first in AnchorStore(self.ledger.engine).drifted(grader_ids, task).items():
            cal = gating_calibration(self.ledger, grader_id, task=task)
            if (
                cal is not None
                and cal.passed
                and HUMAN in cal.references
                and cal.created_at > first.created_at
            ):
                continue  # people re-calibrated the judge after it drifted
            when = first.created_at.strftime("%Y-%m-%d %H:%M UTC")
            out[grader_id] = IgnoredGrader(
                grader_id,
                f"{grader_id} drifted since {when} (check {first.id} of anchor set {first.anchor_id}): "
                "its grades do not count until "
                f"`llm-connect judges accept --judge {grader_id} --task {task}` or a passing calibration "
                "against people",
            )
        return out

    def _identity_changes(self, judges: Sequence[str], task: str) -> tuple[IdentityChange, ...]:
        """The routing judges (those that ask a model) whose newest grade on ``task`` names another
        served model or fingerprint than their evidence was last vouched for under: flagged in the
        decision, still counted (``judges check`` decides whether they may)."""
        if not judges:
            return ()
        from llm_connect.ledger import AnchorStore

        return tuple(AnchorStore(self.ledger.engine).identity_changes(judges, task).values())

    def decide(
        self,
        task: str,
        *,
        baseline: str,
        candidates: Sequence[str],
        policy: RoutingPolicy | None = None,
        grader_id: str | Sequence[str] | None = None,
        **settings: Any,
    ) -> RoutingDecision:
        """Choose the model for ``task`` under ``policy`` and store the decision in the ledger.

        ``baseline`` and ``candidates`` are model names as they were asked for
        (``openai:gpt-4o-mini`` graded against a server that reports
        ``gpt-4o-mini-2024-07-18`` is ``"gpt-4o-mini"``). The judges that decide are
        ``grader_id`` (one grader id or several) when given, else ``policy.route_on``, else
        every judge graded on the task against ``baseline``; a candidate must qualify on
        each usable one. The keyword settings (``min_quality=``, ``confidence=``,
        ``min_samples=``, ``allow_uncalibrated=``, ``fixed_n=``, ``min_stability=``,
        ``target=``, ``prefer=``) are a shim: they replace those fields of ``policy`` (or of
        the default :class:`RoutingPolicy`), validated the same way.

        ``min_samples`` counts distinct cases. ``fixed_n=True`` replaces the anytime-valid
        bounds by single-look intervals, valid only when the decision is asked once at a
        sample size fixed in advance. ``min_stability`` (``"SAFE"`` or ``"RISKY"``) also
        requires the newest stability analysis stored for the candidate on ``task``
        (``llm-connect stability --task``) to have at least that verdict; a candidate
        without one is not routed to, and the reason says so. ``target="human"`` bounds the
        mean of what *people* would say instead of the judge's mean grade: from each
        routing judge's grades on the cases the label sampler decided
        (``llm_connect.labels.choose_for_labels``) and people's labels of the chosen ones,
        prediction-powered and anytime-valid, with the same Bonferroni split and
        ``min_samples`` (``routing/_human.py``); without a usable label a candidate's status
        is ``"no human labels yet"``. An LLM judge needs no calibration there (people's
        labels correct its bias). Returns the stored :class:`RoutingDecision` (with
        ``decision_id`` set); :meth:`evaluate` makes the same decision without storing it.
        """
        decision = self._decide(task, baseline, candidates, policy, grader_id, settings)
        return decision.with_id(self.ledger.record_decision(decision))

    def evaluate(
        self,
        task: str,
        *,
        baseline: str,
        candidates: Sequence[str],
        policy: RoutingPolicy | None = None,
        grader_id: str | Sequence[str] | None = None,
        **settings: Any,
    ) -> RoutingDecision:
        """The decision :meth:`decide` would take, without storing it (``decision_id`` is
        ``None``): what the report, ``view`` and ``grade --until-decided`` read."""
        return self._decide(task, baseline, candidates, policy, grader_id, settings)

    def decide_slices(
        self,
        task: str,
        *,
        baseline: str,
        candidates: Sequence[str],
        policy: RoutingPolicy | None = None,
        grader_id: str | Sequence[str] | None = None,
        slice_by: str | None = None,
        **settings: Any,
    ) -> SliceDecisions:
        """One decision per slice of ``task`` plus the whole-task decision, stored together.

        The slices are those of ``slice_by`` (else ``policy.slice_by``): ``tag:PREFIX``,
        ``meta:KEY``, ``tools`` or ``length``. Each candidate's slices are decided with e-BH at
        its share of ``1 - confidence``, so the expected share of wrongly routed slices among
        the routed ones is at most ``1 - confidence`` (``routing/_slices.py``); the other
        arguments are :meth:`decide`'s. An unknown key, or one no case carries, raises
        :class:`~llm_connect.values.SliceError` naming it before anything is stored.
        ``result.model_for(case)`` is the model that serves a case.
        """
        sliced = self.evaluate_slices(
            task, baseline=baseline, candidates=candidates, policy=policy, grader_id=grader_id,
            slice_by=slice_by, **settings,
        )  # fmt: skip
        return sliced.with_id(self.ledger.record_decision(sliced.whole, slices=sliced.slices_dict()))

    def evaluate_slices(
        self,
        task: str,
        *,
        baseline: str,
        candidates: Sequence[str],
        policy: RoutingPolicy | None = None,
        grader_id: str | Sequence[str] | None = None,
        slice_by: str | None = None,
        **settings: Any,
    ) -> SliceDecisions:
        """The decisions :meth:`decide_slices` would take, without storing them."""
        from llm_connect.routing._slices import check_slicing, decide_slices

        shim = {k: v for k, v in settings.items() if k in _SETTINGS and k != "route_on"}
        asked = RoutingPolicy.of(policy, **shim)
        key = check_slicing(asked, slice_by)
        whole = self._decide(task, baseline, candidates, policy, grader_id, settings)
        # the decision's own policy does not carry the watch's setting: the caller's does
        return decide_slices(self.ledger, whole, whole.policy.replace(rollback_arl=asked.rollback_arl), key)

    def _decide(
        self,
        task: str,
        baseline: str,
        candidates: Sequence[str],
        policy: RoutingPolicy | None,
        grader_id: str | Sequence[str] | None,
        settings: dict[str, Any],
    ) -> RoutingDecision:
        unknown = sorted(set(settings) - _SETTINGS)
        if unknown:
            raise TypeError(f"Router.decide() got an unexpected keyword argument {unknown[0]!r}")
        if isinstance(candidates, str):
            raise ConfigurationError("candidates must be a sequence of model names, not one string")
        cands = list(dict.fromkeys(candidates))
        if grader_id is not None:
            given = (grader_id,) if isinstance(grader_id, str) else tuple(grader_id)
            if not given or not all(isinstance(g, str) and g for g in given):
                raise ConfigurationError(f"grader_id must name at least one grader, not {grader_id!r}")
            settings = {**settings, "route_on": given}
        policy = RoutingPolicy.of(policy, **settings)
        grader_ids = policy.route_on or self._graded(task, baseline, cands)
        if not grader_ids:
            raise ConfigurationError(
                f"no judge has graded task {task!r} against {baseline!r}: name the judges "
                "(RoutingPolicy.route_on or grader_id=)"
            )
        min_quality, confidence, min_samples = policy.min_quality, policy.confidence, policy.min_samples
        allow_uncalibrated, fixed_n, target = policy.allow_uncalibrated, policy.fixed_n, policy.target
        min_stability = policy.min_stability

        # While grades arrive for this task, the new cases of the groups this Router read before
        # are read together with the totals (one round trip on PostgreSQL), so a changed group
        # needs no read of its own; a quiet task reads the totals alone.
        after = (
            {
                (m, g): cached.series.first_ids[-1]
                for m in cands
                for g in grader_ids
                if (cached := self._series.get((task, baseline, m, g))) is not None
                and cached.series.first_ids
            }
            if (task, baseline) in self._active
            else {}
        )
        totals, arrived = self.ledger.routing_read(
            task=task,
            baseline_model=baseline,
            grader_id=list(grader_ids),
            candidate_model=cands,
            after=after or None,
        )
        new_cases: dict[tuple[str, str], Any] = dict.fromkeys(after)
        new_cases.update({(s.candidate_model, s.grader_id): s for s in arrived})
        # Routing on what people would say needs no calibration: people's labels of the sampled
        # cases correct whatever bias the judge has (one that disagrees with people costs labels,
        # not validity; docs/decisions.md). The judge's own grades route only once calibrated.
        uncalibrated_ok = allow_uncalibrated or target == "human"
        asks_llm = _asks_llm(totals)
        used, ignored = self._usable_graders(
            task, grader_ids, uncalibrated_ok, asks_llm, judges_target=target != "human"
        )
        changes = self._identity_changes([g for g in used if asks_llm.get(g)], task)
        usable = set(used)
        records = [t for t in totals if t.grader_id in usable]
        by_key = {(r.candidate_model, r.grader_id): r for r in records}
        base_cost = _weighted([(r.baseline_mean_cost_usd, r.baseline_cost_n) for r in records])
        base_latency = _weighted([(r.baseline_mean_latency_ms, r.baseline_latency_n) for r in records])

        alpha = candidate_alpha(confidence, len(cands))
        # each judge's own threshold: a stated one for all, else its scale's (a win rate for a
        # preference judge, where a tie is 0.5)
        thresholds = {g: policy.threshold(g) for g in used}
        now = utcnow()
        plan = WatchPlan()
        if target != "human":  # people's target: the watch reads judges' grades; not watched
            plan = plan_watch(
                self.ledger, self._watch, task, baseline, cands, thresholds,
                arl=policy.rollback_arl, alpha=alpha, now=now,
            )  # fmt: skip
        versions = {(r.candidate_model, r.grader_id): _version(r) for r in records}
        computed: list[tuple[str, str]] = []
        if target == "human":
            # people's labels (numpy and the label design, imported only for them)
            from llm_connect.routing._human_cache import human_evidence

            found = human_evidence(
                self.ledger,
                task,
                baseline=baseline,
                candidates=cands,
                grader_ids=used,
                min_quality=min_quality,
                min_samples=min_samples,
                alpha=alpha,
                cache=self._human,
            )
        else:
            found = gather(
                self.ledger,
                task,
                baseline=baseline,
                candidates=cands,
                grader_ids=used,
                min_quality=thresholds,
                confidence=confidence,
                min_samples=min_samples,
                fixed_n=fixed_n,
                versions=versions,
                cache=self._evidence,
                computed=computed,
                totals={(r.candidate_model, r.grader_id): (r.n, r.sum_quality) for r in records},
                series_cache=self._series,
                new_cases=new_cases,
            )
        if computed:
            self._active.add((task, baseline))
        else:
            self._active.discard((task, baseline))
        if len(self._evidence) > 10_000:
            self._evidence.clear()
            self._active.clear()
        if len(self._watch) > 10_000:
            self._watch.clear()
        if plan.restrict:  # a rolled-back candidate proves itself again on later cases only
            found = dict(found) | restricted_evidence(
                self.ledger, task, baseline, plan.restrict, used, thresholds,
                min_samples=min_samples, alpha=alpha, confidence=confidence, fixed_n=fixed_n,
            )  # fmt: skip
        evidence: list[CandidateEvidence] = []
        for model in cands:
            graders: list[GraderEvidence] = [found[(model, gid)] for gid in used]
            mine = [by_key[(model, g)] for g in used if (model, g) in by_key]
            cost = _weighted([(r.candidate_mean_cost_usd, r.candidate_cost_n) for r in mine])
            latency = _weighted([(r.candidate_mean_latency_ms, r.candidate_latency_n) for r in mine])
            verdict, stable = self._stability(task, model, min_stability)
            evidence.append(
                CandidateEvidence(
                    model=model,
                    graders=tuple(graders),
                    passed=bool(graders) and all(g.passed for g in graders) and stable,
                    stability=verdict,
                    stability_ok=stable,
                    mean_cost_usd=cost,
                    mean_latency_ms=latency,
                    cost_ratio=_ratio(cost, base_cost),
                    latency_ratio=_ratio(latency, base_latency),
                )
            )

        chosen = cheapest_proven(evidence, cands, prefer=policy.prefer)
        model = baseline if chosen is None else chosen.model
        routed_since, rollback = plan.outcome(
            model, baseline, now, self.ledger.decision_store.grade_watermark
        )
        reason = explain_decision(
            chosen,
            task,
            baseline,
            evidence,
            used,
            ignored,
            min_quality=thresholds,
            min_samples=min_samples,
            alpha=alpha,
            fixed_n=fixed_n,
            min_stability=min_stability,
            target=target,
            prefer=policy.prefer,
        ) + "".join(f" Note: {change.why}." for change in changes)
        if rollback is not None:
            reason = f"{rollback.why}. {reason}" if rollback.new else f"{reason} Note: {rollback.why}."
        decision = RoutingDecision(
            model=model,
            reason=reason,
            task=task,
            baseline=baseline,
            candidates=tuple(evidence),
            grader_ids=grader_ids,
            used_grader_ids=tuple(used),
            ignored_graders=tuple(ignored),
            identity_changes=changes,
            min_quality=float(min_quality),
            confidence=float(confidence),
            min_samples=min_samples,
            allow_uncalibrated=bool(allow_uncalibrated),
            fixed_n=bool(fixed_n),
            min_stability=min_stability,
            target=target,
            prefer=policy.prefer,
            min_quality_stated=policy.stated,
            baseline_mean_cost_usd=base_cost,
            baseline_mean_latency_ms=base_latency,
            created_at=now,
            routed_since=routed_since,
            rollback=rollback,
        )
        return decision

    def _graded(self, task: str, baseline: str, candidates: Sequence[str]) -> tuple[str, ...]:
        """Every judge graded on ``task`` against ``baseline`` (for ``candidates``), in id order."""
        totals = self.ledger.grade_totals(
            task=task, baseline_model=baseline, candidate_model=list(candidates)
        )
        return tuple(sorted({t.grader_id for t in totals}))

    def _stability(self, task: str, model: str, min_stability: str | None) -> tuple[str | None, bool]:
        """``(verdict of the newest stored analysis, whether it meets min_stability)``."""
        if min_stability is None:
            return None, True
        found = self.ledger.latest_stability(task, model)
        if found is None:
            return None, False
        return found.verdict, STABILITY_ORDER.index(found.verdict) <= STABILITY_ORDER.index(min_stability)
