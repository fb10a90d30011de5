"""RoutingPolicy: every setting that changes a routing decision, in one validated value.

``Router.decide``, ``grade`` (its printed lines, ``--json``, the ``--min-quality`` gate,
``--until-decided``, JUnit), ``route``, the report file, ``llm-connect view`` and the
Label page all decide with one policy, so a figure cannot differ between them because
one surface forgot a setting. The defaults live here and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from llm_connect.errors import ConfigurationError
from llm_connect.values._slice_key import SLICE_KINDS, SliceError, parse_slice_key

__all__ = [
    "DEFAULT_MIN_QUALITY",
    "DEFAULT_WIN_RATE",
    "PREFER",
    "PREFERENCE_JUDGES",
    "STABILITY_VERDICTS",
    "TARGETS",
    "PolicyError",
    "RoutingPolicy",
    "is_preference_judge",
]

DEFAULT_MIN_QUALITY = 0.9
"""The threshold on the judges' scale (1.0: as good as the baseline) when none is stated."""
DEFAULT_WIN_RATE = 0.45
"""The threshold on people's scale (``target="human"``: 1 the candidate's answer is better,
0.5 a tie, 0 the baseline's) when none is stated: not worse than the baseline by more than a
little. 0.9 there would ask people to prefer the candidate nine times in ten."""

STABILITY_VERDICTS = ("SAFE", "RISKY", "DO_NOT_SHIP")
"""Stability verdicts, best first: what the ledger accepts and ``min_stability`` compares."""
TARGETS = ("judge", "human")
"""What a decision bounds: the judge's mean grade, or the mean of what people would say."""
PREFER = ("cost", "latency")
"""Among proven candidates, the one with the lowest mean cost or the lowest mean latency."""
PREFERENCE_JUDGES = ("pairwise:",)
"""Grader-id prefixes of judges whose grade is a preference on people's scale (1 the
candidate's answer is better, 0.5 a tie, 0 the baseline's): a win rate, not a quality."""


def is_preference_judge(grader_id: str) -> bool:
    """Whether ``grader_id``'s grades are win rates on people's scale (a ``pairwise:`` judge's)."""
    return grader_id.startswith(PREFERENCE_JUDGES)


class PolicyError(ConfigurationError):
    """A :class:`RoutingPolicy` field holds a value the router cannot decide with.

    ``field`` names the field (``min_quality``), so a caller can point at its own input
    (the CLI names the option that set it).
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"RoutingPolicy.{field} {message}")
        self.field = field


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PolicyError(name, f"must be a finite number, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class RoutingPolicy:
    """How a routing decision is made: the threshold, the confidence, the evidence it needs.

    A candidate is *proven* when, on every routing judge, at least ``min_samples`` distinct
    cases are graded and the anytime-valid lower bound of its mean per-case quality at
    ``confidence`` (split evenly over the candidates) is at least ``min_quality``; among the
    proven candidates the one preferred by ``prefer`` serves the task, else the baseline.
    Every field is checked when the policy is built (:class:`PolicyError` names the field),
    before any call or write.

    Example::

        policy = RoutingPolicy(min_quality=0.85, route_on=("embedding:all-MiniLM-L6-v2",))
        decision = Router(ledger).decide("support", policy=policy, baseline="gpt-4o",
                                         candidates=["gpt-4o-mini"])
    """

    min_quality: float = None  # type: ignore[assignment]  # resolved in __post_init__
    """The least mean per-case quality (0..1) a candidate must be shown to reach. Not stated
    (``None``): :data:`DEFAULT_MIN_QUALITY` on the judges' target, :data:`DEFAULT_WIN_RATE`
    on people's (a tie is 0.5 there); :attr:`stated` says which. A stated threshold holds
    for every judge; an unstated one is each judge's own scale's (:meth:`threshold`)."""
    confidence: float = 0.95
    """The chance (strictly between 0 and 1) that no candidate below ``min_quality`` is routed to."""
    min_samples: int = 30
    """The least number of distinct graded cases, per routing judge, before a candidate can pass."""
    target: str = "judge"
    """``judge``: bound the judges' mean grade; ``human``: bound what people would say (the
    judges' grades corrected by people's labels of sampled cases)."""
    route_on: tuple[str, ...] = ()
    """The grader ids that decide (every other judge is a diagnostic); empty: every judge asked."""
    allow_uncalibrated: bool = False
    """Let an LLM judge decide without a passing calibration (``target="human"`` never needs one)."""
    min_stability: str | None = None
    """The least stability verdict (``SAFE`` or ``RISKY``) a candidate needs; ``None``: not asked."""
    fixed_n: bool = False
    """Single-look intervals instead of anytime-valid bounds: valid only when the decision is
    asked once, at a number of cases fixed in advance."""
    prefer: str = "cost"
    """Among proven candidates: ``cost`` (lowest mean cost) or ``latency`` (lowest mean latency);
    unknown figures come last, then the order the candidates were given."""
    slice_by: str | None = None
    """Also decide per slice of the task (``Router.decide_slices``, e-BH across the slices): a tag
    prefix ``tag:PREFIX``, a metadata key ``meta:KEY``, ``tools`` or ``length``; ``None``: the
    whole task only. ``Router.decide`` itself always decides the whole task."""
    rollback_arl: float | None = 20_000
    """The watch after the switch (issue 38): a routed candidate is rolled back when the
    e-detector over its cases graded since it was routed reaches this value (a candidate whose
    mean stays at or above the threshold is falsely rolled back after ``rollback_arl`` cases on
    average at the soonest, and within ``N`` cases with chance at most ``N / rollback_arl``);
    ``None``: no watch."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_stated", self.min_quality is not None)
        if self.min_quality is None:
            default = DEFAULT_WIN_RATE if self.target == "human" else DEFAULT_MIN_QUALITY
            object.__setattr__(self, "min_quality", default)
        quality = _number("min_quality", self.min_quality)
        if not 0.0 <= quality <= 1.0:
            raise PolicyError("min_quality", f"must lie in 0..1, not {self.min_quality!r}")
        confidence = _number("confidence", self.confidence)
        if not 0.0 < confidence < 1.0:
            raise PolicyError("confidence", f"must lie strictly between 0 and 1, not {self.confidence!r}")
        n = self.min_samples
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise PolicyError("min_samples", f"must be an int >= 2, not {n!r}")
        if self.target not in TARGETS:
            raise PolicyError("target", f"must be one of {', '.join(TARGETS)}, not {self.target!r}")
        if isinstance(self.route_on, str):
            raise PolicyError(
                "route_on", f"must be a sequence of grader ids, not one string {self.route_on!r}"
            )
        route_on = tuple(dict.fromkeys(self.route_on))
        if not all(isinstance(g, str) and g for g in route_on):
            raise PolicyError("route_on", f"must hold non-empty grader ids, not {self.route_on!r}")
        for name in ("allow_uncalibrated", "fixed_n"):
            if not isinstance(getattr(self, name), bool):
                raise PolicyError(name, f"must be True or False, not {getattr(self, name)!r}")
        if self.min_stability is not None and self.min_stability not in STABILITY_VERDICTS[:2]:
            raise PolicyError("min_stability", f"must be SAFE, RISKY or None, not {self.min_stability!r}")
        if self.prefer not in PREFER:
            raise PolicyError("prefer", f"must be one of {', '.join(PREFER)}, not {self.prefer!r}")
        if self.rollback_arl is not None and (
            isinstance(self.rollback_arl, bool)
            or not isinstance(self.rollback_arl, int | float)
            or not self.rollback_arl > 1
        ):
            raise PolicyError("rollback_arl", f"must be a number above 1 or None, not {self.rollback_arl!r}")
        if self.target == "human" and self.fixed_n:
            raise PolicyError(
                "fixed_n", "must be False with target='human' (its bounds are anytime-valid only)"
            )
        if self.slice_by is not None:
            try:
                parse_slice_key(self.slice_by)
            except SliceError:
                raise PolicyError(
                    "slice_by", f"must be one of {', '.join(SLICE_KINDS)}, not {self.slice_by!r}"
                ) from None
        object.__setattr__(self, "min_quality", quality)
        object.__setattr__(self, "confidence", confidence)
        object.__setattr__(self, "route_on", route_on)

    @property
    def stated(self) -> bool:
        """Whether ``min_quality`` was given, not taken from the target's default."""
        return bool(getattr(self, "_stated", True))

    def threshold(self, grader_id: str) -> float:
        """The threshold ``grader_id``'s bounds are held to: ``min_quality`` when stated or on
        people's target; otherwise, for a preference judge (:func:`is_preference_judge`, whose
        grades are win rates where a tie is 0.5), :data:`DEFAULT_WIN_RATE` ("not worse than the
        baseline by more than a little"), and :data:`DEFAULT_MIN_QUALITY` for every other judge."""
        if self.stated or self.target == "human" or not is_preference_judge(grader_id):
            return self.min_quality
        return DEFAULT_WIN_RATE

    def replace(self, **changes: Any) -> RoutingPolicy:
        """A copy with ``changes`` (validated again); a threshold that was not stated follows a
        changed ``target`` to that target's default."""
        if not self.stated and "min_quality" not in changes:
            changes["min_quality"] = None
        return replace(self, **changes)

    def for_judges(self, graded: Iterable[str]) -> RoutingPolicy:
        """This policy for a task whose judges are ``graded``: ``route_on`` narrowed to the judges
        graded there (kept whole when it names none of them, so each says "no grades"), or every
        graded judge, in id order, when ``route_on`` is empty. The report and ``grade`` decide
        each task of a run under it; ``Router.decide`` takes ``route_on`` as given."""
        names = set(graded)
        if not self.route_on:
            return self.replace(route_on=tuple(sorted(names)))
        narrowed = tuple(g for g in self.route_on if g in names)
        return self.replace(route_on=narrowed or self.route_on)

    def alpha(self, n_candidates: int) -> float:
        """Each candidate's share of ``1 - confidence`` (Bonferroni over ``n_candidates``)."""
        return (1.0 - self.confidence) / max(1, n_candidates)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (what a run and a stored decision keep); :meth:`from_dict` reverses it."""
        data = asdict(self)
        data["route_on"] = list(self.route_on)
        if not self.stated:
            data["min_quality"] = None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoutingPolicy:
        """The policy in ``data`` (keys it does not know are refused, missing ones take defaults)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise PolicyError(unknown[0], "is not a routing policy setting")
        values = dict(data)
        if "route_on" in values and isinstance(values["route_on"], list):
            values["route_on"] = tuple(values["route_on"])
        return cls(**values)

    def differences(self, other: RoutingPolicy) -> list[str]:
        """The fields whose values differ from ``other``'s, in field order."""
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]

    @classmethod
    def of(cls, policy: RoutingPolicy | None = None, /, **settings: Any) -> RoutingPolicy:
        """``policy`` with the keyword settings that are not ``None`` applied (a fresh default
        policy when ``policy`` is ``None``): how the keyword forms build their policy."""
        given = {k: v for k, v in settings.items() if v is not None}
        if "route_on" in given and not isinstance(given["route_on"], str):
            given["route_on"] = tuple(given["route_on"])
        base = cls() if policy is None else policy
        return base.replace(**given) if given else base
