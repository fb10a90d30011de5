"""Per-slice routing decisions (:class:`SliceDecisions`), what ``Router.decide_slices`` returns.

A *slice* is the part of a task's cases that share one value of a key (``RoutingPolicy.slice_by``,
:mod:`llm_connect.values._slice_key`). ``Router.decide_slices`` decides each slice with e-BH
across the slices (``docs/decisions.md``, "Slices"); routing code asks
:meth:`SliceDecisions.model_for` which model serves a case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from llm_connect.values._case import Case
from llm_connect.values._decision import PROVEN, RoutingDecision
from llm_connect.values._slice_key import SliceError, SliceKey, parse_slice_key, slice_of
from llm_connect.values._watch import Rollback, RoutedSince

__all__ = ["SliceCandidate", "SliceDecision", "SliceDecisions"]


@dataclass(frozen=True)
class SliceCandidate:
    """What one candidate's grades on one slice say (the weakest over the routing judges)."""

    model: str
    status: str
    """``proven`` (e-BH rejected "below the threshold" for the slice), ``ruled out``, ``undecided``,
    ``insufficient`` (fewer than ``min_samples`` cases on a judge) or ``no grades``."""
    n: int
    """The fewest cases the slice has on any routing judge."""
    mean: float | None
    """The lowest mean over the routing judges."""
    lower_bound: float | None
    """The lowest lower bound over the judges, at ``level``: at least the threshold exactly when proven."""
    upper_bound: float | None
    e_value: float
    """The e-value of "the mean is at most the threshold": the betting capital at the threshold
    now, the least over the judges; 0 below ``min_samples`` cases (``docs/decisions.md``)."""
    level: float
    """The error rate the bounds are shown at: e-BH's ``alpha * R / K`` (``R`` slices proven of ``K``)."""


@dataclass(frozen=True)
class SliceDecision:
    """Which model serves one slice, and each candidate's evidence there."""

    name: str
    cases: int
    """Distinct cases of the task in the slice (graded for any candidate)."""
    model: str
    """The cheapest candidate proven on the slice (by the whole task's cost or latency), else the baseline."""
    candidates: tuple[SliceCandidate, ...]
    routed_since: RoutedSince | None = None
    """When a candidate serves the slice: since when (the watch reads its slice cases after it)."""
    rollback: Rollback | None = None
    """A candidate the watch rolled back on this slice (``new`` on the decision that made it);
    carried until it is proven again on the slice's cases graded after it."""

    @property
    def routed(self) -> bool:
        """Whether a candidate serves the slice."""
        return any(c.model == self.model and c.status == PROVEN for c in self.candidates)

    @property
    def shown(self) -> SliceCandidate | None:
        """The candidate a one-line table shows: the chosen one, else the highest lower bound."""
        for c in self.candidates:
            if c.model == self.model:
                return c
        known = [c for c in self.candidates if c.lower_bound is not None]
        return max(known, key=lambda c: c.lower_bound or 0.0) if known else None


@dataclass(frozen=True)
class SliceDecisions:
    """One decision per slice of a task plus the whole-task decision (``Router.decide_slices``).

    Across the ``K`` slices, each candidate's slices are decided with e-BH at its share of
    ``1 - confidence`` (``alpha``), so the expected share of wrongly routed slices among the
    routed ones is at most ``1 - confidence`` (``docs/decisions.md``, "Slices").
    """

    whole: RoutingDecision
    """The whole-task decision, as ``Router.decide`` makes it."""
    slice_by: str
    slices: tuple[SliceDecision, ...]
    alpha: float
    """Each candidate's e-BH level: ``(1 - confidence) / k`` for ``k`` candidates."""
    length_cuts: tuple[float, ...] | None = None
    """``slice_by="length"``: the quartile cut points, fixed by the first stored slice decision."""
    method: str = "e-BH"

    @property
    def key(self) -> SliceKey:
        """The parsed :attr:`slice_by`."""
        return parse_slice_key(self.slice_by)

    @property
    def decision_id(self) -> int | None:
        """The stored row's id (the whole-task decision and its slices are one row)."""
        return self.whole.decision_id

    def with_id(self, decision_id: int) -> SliceDecisions:
        """A copy carrying its stored row id."""
        return replace(self, whole=self.whole.with_id(decision_id))

    def slice(self, name: str) -> SliceDecision:
        """The slice called ``name`` (:class:`SliceError` naming it when there is none)."""
        for s in self.slices:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.slices)
        raise SliceError(name, f"no slice {name!r} under {self.slice_by} (slices: {known})")

    def slice_for(self, case: Case | Mapping[str, Any]) -> str:
        """The slice ``case`` falls in: a :class:`Case`, or a mapping with any of ``tags``,
        ``metadata``, ``tools`` (a bool or the tools offered) and ``prompt``."""
        if isinstance(case, Case):
            tags: Sequence[str] = case.tags
            metadata: Mapping[str, Any] | None = case.metadata
            tools = case.conversation is not None and bool(case.conversation.tools)
            prompt: str | None = case.prompt
        else:
            tags, metadata = case.get("tags") or (), case.get("metadata") or {}
            tools, prompt = bool(case.get("tools")), case.get("prompt")
        return slice_of(
            self.key,
            tags=tags,
            metadata=metadata,
            tools=tools,
            prompt_chars=None if prompt is None else len(prompt),
            cuts=self.length_cuts,
        )

    def model_for(self, case: Case | Mapping[str, Any]) -> str:
        """The model that serves ``case``: its slice's; for a slice no decision covers, the
        whole-task decision's model (a candidate only when it was proven on the whole task,
        else the baseline)."""
        name = self.slice_for(case)
        for s in self.slices:
            if s.name == name:
                return s.model
        return self.whole.model

    def slices_dict(self) -> dict[str, Any]:
        """The slice part of :meth:`to_dict` (what the ledger stores beside the whole decision)."""
        out: dict[str, Any] = {
            "slice_by": self.slice_by,
            "method": self.method,
            "alpha": self.alpha,
            "slices": [
                {
                    "name": s.name,
                    "cases": s.cases,
                    "model": s.model,
                    "routed": s.routed,
                    **({"routed_since": s.routed_since.to_dict()} if s.routed_since else {}),
                    **({"rollback": s.rollback.to_dict()} if s.rollback else {}),
                    "candidates": [
                        {
                            "model": c.model,
                            "status": c.status,
                            "n": c.n,
                            "mean": c.mean,
                            "lower_bound": c.lower_bound,
                            "upper_bound": c.upper_bound,
                            "e_value": c.e_value,
                            "level": c.level,
                        }
                        for c in s.candidates
                    ],
                }
                for s in self.slices
            ],
        }
        if self.length_cuts is not None:
            out["length_cuts"] = list(self.length_cuts)
        return out

    def new_rollbacks(self) -> list[tuple[str | None, Rollback]]:
        """The rollbacks this decision made (``new``): the whole task's (slice ``None``) and each
        slice's, in table order."""
        out: list[tuple[str | None, Rollback]] = []
        if self.whole.rollback is not None and self.whole.rollback.new:
            out.append((None, self.whole.rollback))
        out += [(s.name, s.rollback) for s in self.slices if s.rollback is not None and s.rollback.new]
        return out

    def to_dict(self) -> dict[str, Any]:
        """The whole decision as ``route --json`` prints it, with ``decision_id`` and ``slices``."""
        return self.whole.to_dict() | {"decision_id": self.decision_id, "slices": self.slices_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SliceDecisions:
        """Rebuild from :meth:`to_dict` output (or a stored row's evidence)."""
        part = data["slices"]
        cuts = part.get("length_cuts")
        return cls(
            whole=RoutingDecision.from_dict(data, decision_id=data.get("decision_id")),
            slice_by=part["slice_by"],
            alpha=float(part["alpha"]),
            method=part.get("method", "e-BH"),
            length_cuts=None if cuts is None else tuple(float(c) for c in cuts),
            slices=tuple(
                SliceDecision(
                    name=s["name"],
                    cases=int(s["cases"]),
                    model=s["model"],
                    candidates=tuple(
                        SliceCandidate(**{k: v for k, v in c.items() if k != "routed"})
                        for c in s["candidates"]
                    ),
                    routed_since=RoutedSince.from_dict(s["routed_since"]) if s.get("routed_since") else None,
                    rollback=Rollback.from_dict(s["rollback"]) if s.get("rollback") else None,
                )
                for s in part["slices"]
            ),
        )
