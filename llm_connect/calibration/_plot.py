"""Scatter plots of a calibration: the judge's score against each reference's, with the diagonal.

matplotlib is imported only here, and only the object-oriented API (``Figure``
plus the Agg canvas) is used, so writing a plot never changes the caller's
pyplot backend. ``.png`` writes the image; ``.html`` writes a self-contained
page with the image embedded as base64 next to the verdict and the figures.
"""

from __future__ import annotations

import base64
import html
import io
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from llm_connect.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_connect.calibration._report import CalibrationReport

__all__ = ["PLOT_SUFFIXES", "render_png", "write_plot"]

PLOT_SUFFIXES = (".png", ".html")


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def render_png(report: CalibrationReport, *, dpi: int = 110) -> bytes:
    """The scatter plot as PNG bytes: one panel per reference, judge score on the y axis."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    refs = list(report.references) or []
    panels = max(1, len(refs))
    fig = Figure(figsize=(4.6 * panels, 4.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, panels, squeeze=False)[0]
    for ax, ref in zip(axes, refs, strict=False):
        points = report.scores.get(ref.reference, ())
        xs = [p[1] for p in points]
        ys = [p[0] for p in points]
        ax.plot([0, 1], [0, 1], linestyle="--", color="0.5", linewidth=1, label="agreement (y = x)")
        ax.axhline(report.threshold, color="0.85", linewidth=0.8)
        ax.axvline(report.threshold, color="0.85", linewidth=0.8)
        ax.scatter(xs, ys, s=18, alpha=0.6, color="tab:blue", edgecolors="none")
        agr = ref.agreement
        rho, kappa = _fmt(agr.spearman.value), _fmt(agr.cohen_kappa.value)
        ax.set_title(f"{ref.reference}\nn={agr.n}  Spearman {rho}  kappa {kappa}", fontsize=9)
        ax.set_xlabel(f"reference score ({ref.reference})", fontsize=8)
        ax.set_ylabel(f"judge score ({report.judge})", fontsize=8)
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
        ax.set_aspect("equal")
        ax.legend(loc="lower right", fontsize=7)
    if not refs:
        axes[0].text(0.5, 0.5, "no reference", ha="center", va="center")
    title = textwrap.fill(f"{report.judge}: {report.verdict}", width=60 * panels)
    lines = title.count("\n") + 1
    fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 1.0 - 0.045 * lines))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _html(report: CalibrationReport, png: bytes) -> str:
    esc = html.escape
    rows = []
    for ref in report.references:
        a = ref.agreement
        cells = [
            ref.reference,
            str(a.n),
            _fmt(a.pearson.value),
            _fmt(a.spearman.value),
            _fmt(a.kendall_tau.value),
            _fmt(a.mean_abs_diff.value),
            _fmt(a.cohen_kappa.value),
            ref.status,
        ]
        rows.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    head = "".join(
        f"<th>{h}</th>"
        for h in ("reference", "n", "Pearson", "Spearman", "Kendall", "MAD", "kappa", "status")
    )
    image = base64.b64encode(png).decode("ascii")
    return (
        "<!doctype html>\n<html><head><meta charset='utf-8'>"
        f"<title>Calibration of {esc(report.judge)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:4px 10px;border-bottom:1px solid #ddd}"
        "</style></head><body>"
        f"<h1>Calibration of {esc(report.judge)}</h1>"
        f"<p>Task: {esc(report.task or 'all tasks')}. Verdict: <strong>{esc(report.verdict)}</strong></p>"
        f"<table><tr>{head}</tr>{''.join(rows)}</table>"
        f"<p><img alt='judge score against reference score' src='data:image/png;base64,{image}'></p>"
        "</body></html>\n"
    )


def write_plot(report: CalibrationReport, path: str | Path) -> Path:
    """Write the scatter plot to ``path`` (``.png`` or ``.html``); returns the path.

    Raises :class:`ConfigurationError` for another suffix, before importing matplotlib.
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise ConfigurationError(
            f"--plot {path}: the file must end in .png or .html, not {suffix or 'nothing'}"
        )
    png = render_png(report)
    try:
        if suffix == ".png":
            target.write_bytes(png)
        else:
            target.write_text(_html(report, png), encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"--plot {path}: cannot write the plot: {exc}") from None
    return target
