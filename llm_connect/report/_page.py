"""The report page: gather the figures, render the Jinja2 template, write one self-contained file.

The page is the same for the static file and the ``view`` server; the static
file also embeds its cases (``<script type="application/json" id="case-data">``),
while the server's page pages them from ``/api/cases``. CSS, JavaScript and
SVG are inline; the page asks for nothing over the network.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_connect.errors import ConfigurationError
from llm_connect.report._cases import (
    BYTE_BUDGET,
    DEFAULT_MAX_CASES,
    case_row,
    embed_json,
    pack_cases,
    truncate,
)
from llm_connect.report._decide import TaskReport, decide_task, task_sides
from llm_connect.report._drift import judge_checks
from llm_connect.report._people import human_rows, labels_status
from llm_connect.report._select import Selection, select
from llm_connect.report._slices import slice_tables
from llm_connect.report._summary import check_gate, decision_sentence, failures, more_cases
from llm_connect.values import RoutingPolicy

if TYPE_CHECKING:
    from jinja2 import Environment

    from llm_connect.ledger import GradeRow, QualityLedger
    from llm_connect.values import RoutingDecision

__all__ = ["ReportInfo", "render_report", "render_view_page", "write_report"]

_CASE_FIELDS = (
    "id", "created_at", "run_id", "case_id", "task", "grader_id", "quality_score", "notes", "prompt",
    "baseline_model", "candidate_model", "baseline_text", "candidate_text", "baseline_served_model",
    "candidate_served_model", "baseline_tool_calls", "candidate_tool_calls", "baseline_cost_usd",
    "candidate_cost_usd", "baseline_latency_ms", "candidate_latency_ms", "metadata",
)  # fmt: skip


@dataclass(frozen=True)
class ReportInfo:
    """What :func:`write_report` wrote."""

    path: Path
    """The HTML file."""
    grades: int
    """Grades in the selection."""
    cases_embedded: int
    """Grades embedded in the case browser (all of them unless ``truncated``)."""
    truncated: bool
    """Whether only the worst and best cases per task x candidate x judge were kept."""
    bytes: int
    """Size of the file."""
    tasks: tuple[str, ...] = ()
    """The tasks the report covers."""
    decisions: tuple[RoutingDecision, ...] = field(default=(), repr=False)
    """Per task, the decision the router would take (not stored)."""


@dataclass(frozen=True)
class _Built:
    html: str
    grades: int
    cases_embedded: int
    truncated: bool
    reports: tuple[TaskReport, ...]


@cache
def _environment() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("llm_connect.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=_num, signed=_signed, ratio=_ratio, money=_money, ms=_ms)
    env.filters.update(sentence=decision_sentence, more=more_cases)
    return env


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _money(value: float | None) -> str:
    return "-" if value is None else (f"${value:.6f}".rstrip("0").rstrip(".") if value else "$0")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _asset(name: str) -> str:
    return resources.files("llm_connect.report").joinpath("templates", name).read_text(encoding="utf-8")


def _thresholds(policy: RoutingPolicy, reports: Sequence[TaskReport]) -> dict[str, float]:
    """Each judge of the report and the threshold its grades are held to (a preference judge's
    win rate differs from a quality's when none was stated)."""
    judges = dict.fromkeys(g.grader_id for r in reports for g in r.groups)
    return {g: policy.threshold(g) for g in judges}


def _row_values(row: GradeRow) -> dict[str, Any]:
    return {name: getattr(row, name) for name in _CASE_FIELDS}


def _reports(
    ledger: QualityLedger, keys: Iterable[tuple[str, str, str, str, int]], policy: RoutingPolicy
) -> list[TaskReport]:
    from llm_connect.routing import Router

    router = Router(ledger)
    return [
        decide_task(
            ledger,
            task,
            baseline=baseline,
            candidates=cands,
            grader_ids=graders,
            policy=policy,
            router=router,
        )
        for task, (baseline, cands, graders) in sorted(task_sides(keys).items())
    ]


def decisions_json(reports: Sequence[TaskReport]) -> str:
    """The decisions the page shows, each as ``route --json`` prints it (``decision_id`` null:
    nothing is stored), for ``<script type="application/json" id="decisions">``."""
    return embed_json([r.decision.to_dict() | {"decision_id": None} for r in reports])


def _figure(data: Mapping[str, Any] | None, key: str) -> float | None:
    if not isinstance(data, Mapping):
        return None
    found = data.get(key)
    value = found.get("value") if isinstance(found, Mapping) else found
    return float(value) if isinstance(value, int | float) else None


def _calibrations(ledger: QualityLedger, tasks: set[str] | None) -> list[dict[str, Any]]:
    from markupsafe import Markup

    from llm_connect.report._charts import scatter_svg

    out = []
    for cal in ledger.calibrations():
        if tasks is not None and cal.task is not None and cal.task not in tasks:
            continue
        figures = cal.figures or {}
        refs = []
        for ref in figures.get("references") or []:
            if ref.get("reference") == "human":  # people: shown beside, by _people.human_rows
                continue
            refs.append(
                {
                    "reference": ref.get("reference", "?"),
                    "n": ref.get("n"),
                    "status": ref.get("status", ""),
                    "pearson": _figure(ref, "pearson"),
                    "spearman": _figure(ref, "spearman"),
                    "kendall": _figure(ref, "kendall_tau"),
                    "mad": _figure(ref, "mean_abs_diff"),
                    "kappa": _figure(ref, "cohen_kappa"),
                }
            )
        probes = []
        for name, probe in (figures.get("probes") or {}).items():
            if isinstance(probe, Mapping):
                text = f"{name.replace('_', ' ')} probe: {probe.get('status', '?')}"
                if probe.get("reason"):
                    text += f" ({probe['reason']})"
                if probe.get("flagged"):
                    text += ", flagged"
                rate = _figure(probe, "consistency_rate")
                if rate is not None:
                    text += f", consistency {rate:.3f}"
                if isinstance(probe.get("excess"), int | float):
                    text += f", length excess {probe['excess']:.3f}"
                probes.append(text)
        scatters = []
        scores = figures.get("scores")
        if isinstance(scores, Mapping):
            threshold = float(figures.get("threshold") or 0.5)
            for ref_id, points in scores.items():
                if points:
                    svg = scatter_svg(
                        points, judge=cal.judge_grader_id, reference=ref_id, threshold=threshold,
                        salt=f"cal{cal.id}-{ref_id}",
                    )  # fmt: skip
                    scatters.append(Markup(svg))
        out.append(
            {
                "id": cal.id,
                "judge": cal.judge_grader_id,
                "task": cal.task,
                "created": cal.created_at.strftime("%Y-%m-%d %H:%M UTC"),
                "verdict": cal.verdict,
                "passed": cal.passed,
                "references": refs,
                "probes": probes,
                "scatters": scatters,
                "human": human_rows(figures),
            }
        )
    return out


def _stability(ledger: QualityLedger, tasks: Sequence[str] | None) -> list[dict[str, Any]]:
    runs = (
        ledger.stability_runs(limit=200)
        if tasks is None
        else [s for t in tasks for s in ledger.stability_runs(task=t, limit=50)]
    )
    out = []
    for s in runs:
        fps = (s.report or {}).get("fingerprints") or []
        out.append(
            {
                "task": s.task,
                "model": s.model,
                "verdict": s.verdict,
                "score": s.overall_score,
                "runs": s.runs,
                "successful": s.successful_runs,
                "fingerprints": [
                    {
                        "name": f.get("name", "?"),
                        "severity": f.get("severity", ""),
                        "evidence": f.get("evidence", ""),
                    }
                    for f in fps
                    if isinstance(f, Mapping)
                ],
                "created": s.created_at.strftime("%Y-%m-%d %H:%M UTC"),
            }
        )
    return out


def _render(
    ledger: QualityLedger,
    reports: Sequence[TaskReport],
    *,
    mode: str,
    selection: str,
    n_grades: int,
    tasks_filter: Sequence[str] | None,
    policy: RoutingPolicy,
    case_json: str | None,
    truncated: bool,
    cases_embedded: int,
    per_side: int,
    run_ids: Sequence[str] = (),
    since: datetime | None = None,
    gate: Mapping[str, Any] | None = None,
    label_link: bool = False,
) -> str:
    from markupsafe import Markup

    from llm_connect._version import __version__
    from llm_connect.report._charts import cost_quality_svg

    charts = {r.task: Markup(cost_quality_svg(r, salt=f"task{i}")) for i, r in enumerate(reports)}
    failed, n_failed = failures(ledger, run_ids=run_ids, tasks=tasks_filter, since=since)
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            version=__version__,
            css=Markup(_asset("report.css")),
            js=Markup(_asset("report.js")),
            tasks=reports,
            charts=charts,
            mode=mode,
            selection=selection,
            n_grades=n_grades,
            generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            ledger_url=ledger.url,
            min_quality=policy.min_quality,
            thresholds=_thresholds(policy, reports),
            min_samples=policy.min_samples,
            confidence_pct=f"{100 * policy.confidence:.4g}%",
            target=policy.target,
            decisions_json=Markup(decisions_json(reports)),
            calibrations=_calibrations(ledger, None if tasks_filter is None else set(tasks_filter)),
            judge_checks=judge_checks(ledger, None if tasks_filter is None else set(tasks_filter)),
            slices=slice_tables(ledger, [r.task for r in reports]),
            stability=_stability(ledger, tasks_filter),
            labels=labels_status(ledger, tasks_filter),
            options={
                "tasks": [r.task for r in reports],
                "candidates": list(dict.fromkeys(g.candidate for r in reports for g in r.groups)),
                "judges": list(dict.fromkeys(g.grader_id for r in reports for g in r.groups)),
            },
            case_json=None if case_json is None else Markup(case_json),
            truncated=truncated,
            cases_embedded=cases_embedded,
            per_side=per_side,
            gate=check_gate(gate),
            failures=failed,
            n_failures=n_failed,
            label_link=label_link,
        )
    )


def _build(
    ledger: QualityLedger,
    *,
    run_ids: Sequence[str],
    tasks: Sequence[str],
    since: datetime | str | None,
    policy: RoutingPolicy,
    max_cases: int | None,
    gate: Mapping[str, Any] | None = None,
) -> _Built:
    check_gate(gate)
    from llm_connect.report._charts import require_plot

    require_plot()
    limit = DEFAULT_MAX_CASES if max_cases is None else max_cases
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigurationError(f"max_cases must be a positive int, not {max_cases!r}")
    sel, _ = select(ledger, run_ids=run_ids, tasks=tasks, since=since)
    rows = [
        case_row(_row_values(r), min_quality=policy.threshold, diff=False)
        for r in ledger.results(
            run_id=list(sel.run_ids) or None, task=list(sel.tasks) or None, since=sel.since
        )
    ]
    if not rows:  # removed between the count and the read
        raise ConfigurationError(f"the selection is empty: no grades match {sel.describe()}")
    weights: dict[tuple[str, str, str, str], int] = {}
    for row in rows:
        key = (row["task"], row["base"], row["cand"], row["judge"])
        weights[key] = weights.get(key, 0) + 1
    reports = _reports(ledger, [(*k, n) for k, n in weights.items()], policy)
    kept, truncated = truncate(rows, limit)
    packed = embed_json(pack_cases(kept))
    while (size := len(packed.encode("utf-8"))) > BYTE_BUDGET and len(kept) > 1:
        limit = max(1, min(len(kept) - 1, int(len(kept) * 0.95 * BYTE_BUDGET / size)))
        kept, _ = truncate(rows, limit)
        truncated = True
        packed = embed_json(pack_cases(kept))
    groups = max(1, len({(r["task"], r["cand"], r["judge"]) for r in rows}))
    html = _render(
        ledger,
        reports,
        mode="static",
        selection=_describe(sel),
        n_grades=len(rows),
        tasks_filter=[r.task for r in reports],
        policy=policy,
        case_json=packed,
        truncated=truncated,
        cases_embedded=len(kept),
        per_side=max(1, limit // (2 * groups)),
        run_ids=sel.run_ids,
        since=sel.since,
        gate=gate,
    )
    return _Built(html, len(rows), len(kept), truncated, tuple(reports))


def _describe(sel: Selection) -> str:
    return sel.describe()


def render_report(
    ledger: QualityLedger,
    *,
    run_ids: Sequence[str] = (),
    tasks: Sequence[str] = (),
    since: datetime | str | None = None,
    policy: RoutingPolicy | None = None,
    max_cases: int | None = None,
    gate: Mapping[str, Any] | None = None,
    **settings: Any,
) -> str:
    """The self-contained HTML report of the selected grades, as a string (see :func:`write_report`)."""
    return _build(
        ledger,
        run_ids=run_ids,
        tasks=tasks,
        since=since,
        policy=RoutingPolicy.of(policy, **settings),
        max_cases=max_cases,
        gate=gate,
    ).html


def write_report(
    ledger: QualityLedger,
    path: str | os.PathLike[str],
    *,
    run_ids: Sequence[str] = (),
    tasks: Sequence[str] = (),
    since: datetime | str | None = None,
    policy: RoutingPolicy | None = None,
    max_cases: int | None = None,
    gate: Mapping[str, Any] | None = None,
    **settings: Any,
) -> ReportInfo:
    """Write one self-contained HTML report of the selected grades to ``path``.

    The selection is the grades matching every filter given (run ids, tasks,
    ``since`` as a datetime or ISO 8601 string); the figures about each of its
    tasks count every case of the task in the ledger, as ``Router.decide``
    does. ``route_on`` narrows the judges that decide routing (default: all);
    ``target="human"`` decides on what people would say (``Router.decide(target="human")``).
    At most ``max_cases`` grades (default 5,000) are embedded in the case
    browser: above it, the worst and best per task x candidate x judge.
    The cases of the selection that could not be graded (``ledger.failures``)
    are listed whole in ``#failures``. ``gate`` (optional) is the run's quality
    gate as the caller computed it, ``{"outcome": "passed" | "failed" |
    "not settled", "min_quality": Q, "lines": [str, ...]}``: shown as the
    banner ``#gate`` at the top with exactly that outcome (nothing recomputed).

    Raises :class:`~llm_connect.errors.ConfigurationError` for an unknown run id,
    an empty selection or bad settings, before anything is written; the file is
    written to a temporary file beside ``path`` and renamed, so no partial file
    is ever left behind. Never writes to the ledger.
    """
    out = Path(path)
    built = _build(
        ledger,
        run_ids=run_ids,
        tasks=tasks,
        since=since,
        policy=RoutingPolicy.of(policy, **settings),
        max_cases=max_cases,
        gate=gate,
    )
    data = built.html.encode("utf-8")
    directory = out.parent if str(out.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise ConfigurationError(f"cannot write the report to {out}: {exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ConfigurationError(f"cannot write the report to {out}: {exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return ReportInfo(
        path=out,
        grades=built.grades,
        cases_embedded=built.cases_embedded,
        truncated=built.truncated,
        bytes=len(data),
        tasks=tuple(r.task for r in built.reports),
        decisions=tuple(r.decision for r in built.reports),
    )


def render_view_page(
    ledger: QualityLedger,
    *,
    policy: RoutingPolicy | None = None,
    label_link: bool = False,
    **settings: Any,
) -> str:
    """The ``view`` server's page over the whole ledger: figures from the running totals, no
    embedded cases (the page's case browser pages them from ``/api/cases``); ``label_link``
    adds the nav link to the labelling page (``view`` with labelling on)."""
    policy = RoutingPolicy.of(policy, **settings)
    totals = ledger.grade_totals()
    reports = _reports(
        ledger, [(t.task, t.baseline_model, t.candidate_model, t.grader_id, t.n) for t in totals], policy
    )
    return _render(
        ledger,
        reports,
        mode="view",
        selection="the whole ledger",
        n_grades=sum(t.n for t in totals),
        tasks_filter=None,
        policy=policy,
        case_json=None,
        truncated=False,
        cases_embedded=0,
        per_side=0,
        label_link=label_link,
    )
