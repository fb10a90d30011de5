"""Charts as inline SVG: matplotlib's SVG backend, object-oriented API, imported on use.

Text stays text (``svg.fonttype = 'none'``: no embedded glyph paths, no font
files), every chart gets its own ``svg.hashsalt`` so element ids never collide
on one page, and the XML prolog, DOCTYPE and RDF metadata are dropped so the
SVG holds no URL but the SVG namespace. matplotlib escapes every label.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_connect.report._decide import TaskReport

__all__ = [
    "PLOT_HINT",
    "Y_LIMITS_PAD",
    "cost_quality_figure",
    "cost_quality_svg",
    "require_plot",
    "scatter_svg",
]

PLOT_HINT = "pip install 'llm-connect[plot]'"


def require_plot(what: str = "the report") -> None:
    """Raise :class:`~llm_connect.errors.ConfigurationError` when matplotlib (the ``[plot]``
    extra, which draws the report's charts) is not installed: said before anything runs."""
    from llm_connect._extras import importable

    if not importable("matplotlib"):
        from llm_connect.errors import ConfigurationError

        raise ConfigurationError(
            f"{what} draws its charts with matplotlib, which is not installed: {PLOT_HINT}"
        )


Y_LIMITS_PAD = 0.03
"""The quality axis reaches this far beyond the data (at most -0.03..1.03), so a point at 0.0 or
1.0 and its marker stay inside the axes."""

_PROLOG = re.compile(r"<\?xml[^>]*\?>|<!DOCTYPE[^>]*>|<metadata>.*?</metadata>", re.DOTALL)
_ROOT = re.compile(r"<svg\b")
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<")


def _svg(fig: Any, salt: str, label: str) -> str:
    from matplotlib import rc_context
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    FigureCanvasSVG(fig)
    buf = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = _PROLOG.sub("", buf.getvalue()).strip()
    from html import escape

    return _ROOT.sub(f'<svg class="chart" role="img" aria-label="{escape(label)}"', text, count=1)


def cost_quality_svg(report: TaskReport, *, salt: str) -> str:
    """:func:`cost_quality_figure` as inline SVG (``salt`` keeps its element ids unique on the page)."""
    return _svg(cost_quality_figure(report), salt, f"cost against quality for task {report.decision.task}")


def cost_quality_figure(report: TaskReport) -> Any:
    """Cost (x) against mean quality (y) of every candidate x routing judge of a task (a matplotlib
    ``Figure``, not drawn yet).

    Bars span each mean's confidence bounds; the baseline is a black star at
    quality 1 (it is its own reference); a dashed line marks ``min_quality``,
    labelled in the right margin outside the data; the legend sits below the
    axes, never over a point; the quality axis is padded (:data:`Y_LIMITS_PAD`)
    and markers are not clipped, so a mean of 0.0 stays visible;
    the step line is the cheapest-passing frontier (over the candidates proven on
    every routing judge, and the baseline: no cheaper one of them is at least as
    good), and the routed candidate is ringed. Without any recorded
    cost the candidates stand in the order given.
    """
    from matplotlib.figure import Figure

    decision = report.decision
    cands = list(decision.candidates)
    routing = [g for g in report.graders if g in decision.used_grader_ids] or list(report.graders)
    costs = [c.mean_cost_usd for c in cands]
    known = [c for c in costs if c is not None and c > 0]
    base_cost = decision.baseline_mean_cost_usd
    by_cost = bool(known)
    if by_cost:
        xs = [c if c is not None and c > 0 else None for c in costs]
        base_x = base_cost if base_cost is not None and base_cost > 0 else None
    else:
        xs = [float(i + 1) for i in range(len(cands))]
        base_x = 0.0
    fig = Figure(figsize=(7.2, 4.2))
    ax = fig.subplots()
    values = [*(x for x in xs if x is not None), *([base_x] if base_x is not None else [])]
    log = by_cost and len(values) > 1 and max(values) / min(values) > 20
    if log:
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # plain text, no mathtext
        ax.xaxis.set_minor_formatter(NullFormatter())  # no label per minor tick (each costs a layout)
    span = (math.log10(max(values)) - math.log10(min(values))) if log and values else 0.0
    groups = {(g.candidate, g.grader_id): g for g in report.groups}
    for j, gid in enumerate(routing):
        dodge = (j - (len(routing) - 1) / 2) * 0.012
        pts_x, pts_y, lo, hi = [], [], [], []
        for c, x in zip(cands, xs, strict=True):
            group = groups.get((c.model, gid))
            ev = None if group is None else group.evidence
            if x is None or ev is None or ev.mean is None:
                continue
            shifted = x * 10 ** (dodge * max(span, 0.5)) if log else x + dodge * (max(values) or 1.0)
            pts_x.append(shifted)
            pts_y.append(ev.mean)
            # The anytime bounds are running extremes: after a run of good cases the lower bound
            # can sit above today's mean. The bar then reaches from the mean to the far bound.
            lo.append(max(0.0, ev.mean - (ev.lower_bound if ev.lower_bound is not None else ev.mean)))
            hi.append(max(0.0, (ev.upper_bound if ev.upper_bound is not None else ev.mean) - ev.mean))
        if pts_x:
            ax.errorbar(
                pts_x,
                pts_y,
                yerr=[lo, hi],
                fmt=_MARKERS[j % len(_MARKERS)],
                color=_COLORS[j % len(_COLORS)],
                capsize=3,
                markersize=6,
                label=gid,
                clip_on=False,
            )
    for c, x in zip(cands, xs, strict=True):
        if x is not None and c.mean is not None:
            ax.annotate(c.model, (x, c.mean), textcoords="offset points", xytext=(6, 6), fontsize=8)
    if base_x is not None:
        ax.plot([base_x], [1.0], marker="*", markersize=13, color="black", linestyle="none",
                label=f"baseline {decision.baseline}", clip_on=False)  # fmt: skip
    # one dashed line per threshold the routing judges were held to (a preference judge's win
    # rate differs from a quality when no threshold was stated)
    lines = sorted({decision.threshold(g) for g in routing}, reverse=True) or [decision.min_quality]
    for k, q in enumerate(lines):
        ax.axhline(q, color="0.45", linestyle="--", linewidth=1)
        text = f"min_quality\n{q:g}" + (
            ""
            if len(lines) == 1
            else "\n(" + ", ".join(g.split(":", 1)[0] for g in routing if decision.threshold(g) == q) + ")"
        )
        ax.annotate(text, (1.0, q), xycoords=("axes fraction", "data"), xytext=(4, 0),
                    textcoords="offset points", ha="left", va="center", fontsize=7, color="0.35",
                    annotation_clip=False, gid="min-quality-label" + (f"-{k}" if k else ""))  # fmt: skip
    frontier = _frontier(
        [
            (x, c.mean)
            for c, x in zip(cands, xs, strict=True)
            if x is not None and c.mean is not None and c.passed
        ]
        + ([(base_x, 1.0)] if base_x is not None else [])
    )
    if len(frontier) > 1:
        ax.step([p[0] for p in frontier], [p[1] for p in frontier], where="post", color="#ff7f0e",
                linewidth=1.4, alpha=0.8, label="cheapest-passing frontier")  # fmt: skip
    if decision.routed:
        for c, x in zip(cands, xs, strict=True):
            if c.model == decision.model and x is not None and c.mean is not None:
                ax.plot([x], [c.mean], marker="o", markersize=16, markerfacecolor="none",
                        markeredgecolor="#2ca02c", markeredgewidth=2, linestyle="none",
                        label=f"routed: {c.model}", clip_on=False)  # fmt: skip
    ax.set_ylabel("mean quality [bounds]", fontsize=8)
    if by_cost:
        ax.set_xlabel("mean cost per call (USD)" + (", log scale" if log else ""), fontsize=8)
    else:
        ax.set_xlabel("costs unknown: candidates in the order given", fontsize=8)
        ticks = [0.0, *(x for x in xs if x is not None)]
        ax.set_xticks(ticks, ["baseline", *[c.model for c in cands]], fontsize=7)
    lows = [g.evidence.lower_bound for g in report.groups if g.evidence.lower_bound is not None]
    lows += [g.evidence.mean for g in report.groups if g.evidence.mean is not None]
    low = min([*lines, *lows])
    ax.set_ylim(max(-Y_LIMITS_PAD, low - 0.05), 1.0 + Y_LIMITS_PAD)
    ax.tick_params(labelsize=7)
    ax.grid(True, linewidth=0.3, alpha=0.5)
    handles, labels = ax.get_legend_handles_labels()
    if handles:  # below the axes, outside the data: it never covers a point
        fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=min(3, len(handles)),
                   frameon=False, bbox_to_anchor=(0.5, 0.0))  # fmt: skip
    ax.set_title(f"{decision.task}: cost against quality", fontsize=9)
    rows = max(1, math.ceil(len(handles) / 3))
    # fixed margins (tight_layout lays out twice): the right one holds the min_quality label,
    # the bottom one the x label and the legend's rows
    fig.subplots_adjust(left=0.08, right=0.88, bottom=0.15 + 0.04 * rows, top=0.92)
    return fig


def _frontier(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no cheaper-or-equal point beats on quality, cheapest first."""
    out: list[tuple[float, float]] = []
    best = -1.0
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best:
            out.append((x, y))
            best = y
    return out


def scatter_svg(
    points: Sequence[Sequence[float]], *, judge: str, reference: str, threshold: float, salt: str
) -> str:
    """Judge score (y) against reference score (x), with the diagonal and the threshold lines."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3.4, 3.4))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.5", linewidth=1)
    ax.axhline(threshold, color="0.85", linewidth=0.8)
    ax.axvline(threshold, color="0.85", linewidth=0.8)
    ax.scatter([p[1] for p in points], [p[0] for p in points], s=12, alpha=0.6, edgecolors="none")
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(f"reference ({reference})", fontsize=7)
    ax.set_ylabel(f"judge ({judge})", fontsize=7)
    ax.tick_params(labelsize=7)
    fig.subplots_adjust(left=0.17, right=0.97, bottom=0.14, top=0.97)
    return _svg(fig, salt, f"{judge} against {reference}")
