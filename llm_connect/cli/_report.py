"""What ``llm-connect grade`` prints: per-candidate statistics, verdicts, routing.

The figures about each candidate come from the evidence module
(``routing/_evidence.py``) over every case of the task in the ledger, exactly
what the router decides on, so the table, the routing lines and ``ledger
summary`` agree; costs and latencies are this run's (a resumed run reports
every case, not only those graded by the last process).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_connect.values import RoutingPolicy

__all__ = ["CASES_NOTE", "RunStats", "run_stats", "task_sides"]

CASES_NOTE = (
    "cases: distinct cases of the task in the ledger (every run, not only this one), the unit of "
    "evidence; (N grades) when a case has several (replicates, re-runs, --samples)"
)
"""What the ``cases`` figures mean, printed under the statistics."""


@dataclass(frozen=True)
class RunStats:
    """What the ledger's evidence says about one (task, candidate side, grader) of a run.

    The statistics are :class:`~llm_connect.routing.GraderEvidence` from
    ``routing/_evidence.py`` (the same the router decides on: every case of the
    task in the ledger, averaged per case); the costs and latencies are this
    run's.
    """

    task: str
    candidate: str
    """The candidate's adapter id (``openai:gpt-4o-mini``, ``recorded:cheap``)."""
    candidate_model: str
    """The model name its grades are stored under (the name asked for)."""
    baseline_model: str
    grader_id: str
    run_grades: int
    """Grades of this run."""
    evidence: Any
    """The :class:`~llm_connect.routing.GraderEvidence` (all cases of the task in the ledger)."""
    routes: bool
    """Whether this grader decides routing and the quality gate (``--route-on``)."""
    baseline_mean_cost_usd: float | None
    candidate_mean_cost_usd: float | None
    baseline_mean_latency_ms: float | None
    candidate_mean_latency_ms: float | None

    @property
    def verdict(self) -> str:
        """``proven``, ``ruled out``, ``undecided``, ``insufficient`` or ``no grades``."""
        return str(self.evidence.status)

    @property
    def cost_ratio(self) -> float | None:
        """Candidate mean cost / baseline mean cost."""
        return _ratio(self.candidate_mean_cost_usd, self.baseline_mean_cost_usd)

    @property
    def latency_ratio(self) -> float | None:
        """Candidate mean latency / baseline mean latency."""
        return _ratio(self.candidate_mean_latency_ms, self.baseline_mean_latency_ms)

    def to_dict(self) -> dict[str, Any]:
        ev = self.evidence
        return {
            "task": self.task,
            "candidate": self.candidate,
            "candidate_model": self.candidate_model,
            "baseline_model": self.baseline_model,
            "grader_id": self.grader_id,
            "routes": self.routes,
            "run_grades": self.run_grades,
            **ev.to_dict(),
            "verdict": self.verdict,
            "baseline_mean_cost_usd": self.baseline_mean_cost_usd,
            "candidate_mean_cost_usd": self.candidate_mean_cost_usd,
            "baseline_mean_latency_ms": self.baseline_mean_latency_ms,
            "candidate_mean_latency_ms": self.candidate_mean_latency_ms,
            "cost_ratio": self.cost_ratio,
            "latency_ratio": self.latency_ratio,
        }


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def task_sides(rows: Iterable[Any]) -> dict[str, tuple[str, list[str]]]:
    """Per task of a run: its baseline model (the most common) and its candidate models in order.

    The router, the report and the gate all decide on exactly these (the number of
    candidates sets each bound's Bonferroni share).
    """
    by_task: dict[str, list[Any]] = {}
    for row in rows:
        by_task.setdefault(row.task, []).append(row)
    out = {}
    for task, rs in by_task.items():
        baseline = Counter(r.baseline_model for r in rs).most_common(1)[0][0]
        models = [r.candidate_model for r in rs if r.baseline_model == baseline]
        out[task] = (baseline, list(dict.fromkeys(models)))
    return out


def run_stats(
    rows: Sequence[Any],
    ledger: Any,
    *,
    policy: RoutingPolicy,
    routing_ids: Sequence[str],
) -> list[RunStats]:
    """One :class:`RunStats` per (task, candidate adapter id, grader id) of the run's grade ``rows``,
    with the evidence module's figures under ``policy`` (its threshold, cases and confidence)."""
    from llm_connect.routing import gather

    groups: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for row in rows:
        groups[(row.task, row.candidate_adapter_id, row.grader_id)].append(row)
    evidence: dict[tuple[str, str, str], Any] = {}
    for task, (baseline, candidates) in task_sides(rows).items():
        graders = list(dict.fromkeys(g for (t, _, g) in groups if t == task))
        found = gather(
            ledger,
            task,
            baseline=baseline,
            candidates=candidates,
            grader_ids=graders,
            min_quality={g: policy.threshold(g) for g in graders},
            confidence=policy.confidence,
            min_samples=policy.min_samples,
            fixed_n=policy.fixed_n,
        )
        for (model, gid), found_ev in found.items():
            evidence[(task, model, gid)] = found_ev
    out = []
    for (task, candidate, gid), rs in groups.items():
        model = Counter(r.candidate_model for r in rs).most_common(1)[0][0]
        ev = evidence.get((task, model, gid))
        if ev is None:  # graded against another baseline than the task's usual one
            continue
        out.append(
            RunStats(
                task=task,
                candidate=candidate,
                candidate_model=model,
                baseline_model=Counter(r.baseline_model for r in rs).most_common(1)[0][0],
                grader_id=gid,
                run_grades=len(rs),
                evidence=ev,
                routes=gid in routing_ids,
                baseline_mean_cost_usd=_mean(
                    [r.baseline_cost_usd for r in rs if r.baseline_cost_usd is not None]
                ),
                candidate_mean_cost_usd=_mean(
                    [r.candidate_cost_usd for r in rs if r.candidate_cost_usd is not None]
                ),
                baseline_mean_latency_ms=_mean(
                    [r.baseline_latency_ms for r in rs if r.baseline_latency_ms is not None]
                ),
                candidate_mean_latency_ms=_mean(
                    [r.candidate_latency_ms for r in rs if r.candidate_latency_ms is not None]
                ),
            )
        )
    return out


# -- rendering -------------------------------------------------------------------


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _fmt_money(value: float | None) -> str:
    return "-" if value is None else f"${value:.6f}".rstrip("0").rstrip(".")


def _fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _bounds(s: RunStats) -> str:
    ev = s.evidence
    text = ev.bounds_text()
    return f" {text}" if text else ""


def _cases(s: RunStats) -> str:
    ev = s.evidence
    text = str(ev.n)
    if ev.n_grades is not None and ev.n_grades != ev.n:
        text += f" ({ev.n_grades} grades)"
    return text


def _delta(s: RunStats) -> str:
    ev = s.evidence
    if ev.delta_mean is None:
        return "-"
    return f"{ev.delta_mean:+.3f} [{ev.delta_low:+.3f}, {ev.delta_high:+.3f}]"


def _verdict_text(s: RunStats) -> str:
    ev = s.evidence
    text = s.verdict
    from llm_connect.routing import more_cases

    more = more_cases(ev)
    if more is not None:
        text += f" (~{more} more cases)"
    if not s.routes:
        text += " (diagnostic)"
    return text


def stats_table(stats: Sequence[RunStats], *, title: str, confidence: float) -> Any:
    """A rich table: one row per task, candidate and judge."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title), title_justify="left")
    for col, justify in (
        ("task", "left"),
        ("candidate", "left"),
        ("judge", "left"),
        ("cases", "right"),
        ("mean [bounds]", "right"),
        ("Δ vs baseline", "right"),
        ("cost vs baseline", "right"),
        ("latency vs baseline", "right"),
        ("verdict", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    styles = {
        "proven": "bold green",
        "ruled out": "bold red",
        "undecided": "yellow",
        "insufficient": "yellow",
    }
    for s in stats:
        mean = "-" if s.evidence.mean is None else f"{s.evidence.mean:.3f}{_bounds(s)}"
        cost = _fmt_ratio(s.cost_ratio)
        if s.cost_ratio is not None:
            cost += f" ({_fmt_money(s.candidate_mean_cost_usd)})"
        latency = _fmt_ratio(s.latency_ratio)
        if s.latency_ratio is not None:
            latency += f" ({_fmt_ms(s.candidate_mean_latency_ms)})"
        table.add_row(
            escape(s.task),
            escape(s.candidate),
            escape(s.grader_id),
            _cases(s),
            mean,
            _delta(s),
            cost,
            latency,
            f"[{styles.get(s.verdict, '')}]{escape(_verdict_text(s))}[/]",
        )
    return table


def stats_lines(stats: Sequence[RunStats], *, confidence: float) -> list[str]:
    """Plain-text rows (for non-terminal output)."""
    lines = []
    for s in stats:
        mean = "-" if s.evidence.mean is None else f"{s.evidence.mean:.3f}{_bounds(s)}"
        lines.append(
            f"{s.task}  {s.candidate}  judge={s.grader_id}  cases={_cases(s)}  mean={mean}  "
            f"delta={_delta(s)}  cost={_fmt_ratio(s.cost_ratio)}  latency={_fmt_ratio(s.latency_ratio)}  "
            f"verdict={_verdict_text(s)}"
        )
    return lines
