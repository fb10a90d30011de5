"""The routing policy's options, declared once, and the one function that builds the policy.

``grade``, ``route``, ``report`` and ``view`` take the same options for every setting of
:class:`~llm_connect.routing.RoutingPolicy` and build it with :func:`build_policy`, so no
command can decide under a setting another one ignores. An option left out is ``None`` here
and takes the policy's own default (the defaults live in ``RoutingPolicy`` and nowhere else).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer

from llm_connect.cli._common import fail
from llm_connect.values import DEFAULT_MIN_QUALITY, DEFAULT_WIN_RATE, PolicyError, RoutingPolicy

__all__ = [
    "OPTIONS",
    "AllowUncalibrated",
    "Confidence",
    "MinQuality",
    "MinSamples",
    "MinStability",
    "Prefer",
    "RouteOn",
    "Target",
    "build_policy",
]

_DEFAULT = RoutingPolicy()
_PANEL = "Routing policy"

OPTIONS: dict[str, str] = {
    "min_quality": "--min-quality",
    "confidence": "--confidence",
    "min_samples": "--min-samples",
    "target": "--target",
    "route_on": "--route-on",
    "allow_uncalibrated": "--allow-uncalibrated",
    "min_stability": "--min-stability",
    "fixed_n": "--fixed-n",
    "prefer": "--prefer",
    "slice_by": "--slice-by",
}
"""RoutingPolicy field -> the option that sets it (named in every refusal)."""

MinQuality = Annotated[
    float | None,
    typer.Option(
        "--min-quality",
        metavar="Q",
        show_default=False,
        help="Quality (0..1) a candidate must be proven to reach (default "
        f"{DEFAULT_MIN_QUALITY:g}; with --target human {DEFAULT_WIN_RATE:g}, on people's scale "
        "where a tie is 0.5).",
        rich_help_panel=_PANEL,
    ),
]
Confidence = Annotated[
    float | None,
    typer.Option(
        "--confidence",
        metavar="LEVEL",
        show_default=False,
        help="Chance that no candidate below --min-quality is routed to, split over the candidates "
        f"(Bonferroni; default {_DEFAULT.confidence:g}).",
        rich_help_panel=_PANEL,
    ),
]
MinSamples = Annotated[
    int | None,
    typer.Option(
        "--min-samples",
        metavar="N",
        show_default=False,
        help=f"Distinct cases needed per candidate and routing judge (default {_DEFAULT.min_samples}).",
        rich_help_panel=_PANEL,
    ),
]
Target = Annotated[
    str | None,
    typer.Option(
        "--target",
        metavar="judge|human",
        show_default=False,
        help="What a decision bounds: judge (the judges' mean grade, the default) or human (what people "
        "would say: the judges' grades corrected by people's labels of the cases the sampler chose).",
        rich_help_panel=_PANEL,
    ),
]
RouteOn = Annotated[
    list[str] | None,
    typer.Option(
        "--route-on",
        metavar="JUDGE",
        show_default=False,
        help="Judge whose grades decide routing (repeatable; default: every judge, the others are "
        "then diagnostics).",
        rich_help_panel=_PANEL,
    ),
]
AllowUncalibrated = Annotated[
    bool | None,
    typer.Option(
        "--allow-uncalibrated",
        show_default=False,
        help="Let LLM judges decide without a passing calibration (--target human needs none).",
        rich_help_panel=_PANEL,
    ),
]
MinStability = Annotated[
    str | None,
    typer.Option(
        "--min-stability",
        metavar="SAFE|RISKY",
        show_default=False,
        help="Also require the newest stored stability analysis (llm-connect stability --task) of a "
        "candidate on the task to be SAFE (or RISKY or better).",
        rich_help_panel=_PANEL,
    ),
]
Prefer = Annotated[
    str | None,
    typer.Option(
        "--prefer",
        metavar="cost|latency",
        show_default=False,
        help="Among proven candidates, route to the lowest mean cost (the default) or latency.",
        rich_help_panel=_PANEL,
    ),
]


def build_policy(
    *,
    min_quality: float | None = None,
    confidence: float | None = None,
    min_samples: int | None = None,
    target: str | None = None,
    route_on: Sequence[str] | None = None,
    allow_uncalibrated: bool | None = None,
    min_stability: str | None = None,
    fixed_n: bool | None = None,
    prefer: str | None = None,
    slice_by: str | None = None,
    base: RoutingPolicy | None = None,
) -> RoutingPolicy:
    """The policy the options ask for (``None``: the default, or ``base``'s value); a value the
    policy refuses exits 2 naming the option, before anything is opened or called."""
    settings: dict[str, Any] = {
        "min_quality": min_quality,
        "confidence": confidence,
        "min_samples": min_samples,
        "target": None if target is None else target.lower(),
        "route_on": None if not route_on else tuple(route_on),
        "allow_uncalibrated": allow_uncalibrated or None,
        "min_stability": None if min_stability is None else min_stability.upper(),
        "fixed_n": fixed_n or None,
        "prefer": None if prefer is None else prefer.lower(),
        "slice_by": slice_by,
    }
    try:
        return RoutingPolicy.of(base, **settings)
    except PolicyError as exc:
        option = OPTIONS.get(exc.field, exc.field)
        fail(f"{option}: {str(exc).removeprefix(f'RoutingPolicy.{exc.field} ')}")
