"""What ``llm-connect grade`` prints: per-candidate statistics, verdicts, routing.

Statistics of a run are computed from the ledger's grades of that run (so a
resumed run reports every case, not only those graded by the last process).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["RunStats", "run_stats", "verdict"]


@dataclass(frozen=True)
class RunStats:
    """Grades of one (candidate side, grader) within a run."""

    candidate: str
    """The candidate's adapter id (``openai:gpt-4o-mini``, ``recorded:cheap``)."""
    candidate_model: str
    """The model its responses reported (the most frequent one)."""
    baseline_model: str
    grader_id: str
    n: int
    mean: float
    ci_low: float | None
    ci_high: float | None
    baseline_mean_cost_usd: float | None
    candidate_mean_cost_usd: float | None
    baseline_mean_latency_ms: float | None
    candidate_mean_latency_ms: float | None
    verdict: str
    """``pass`` / ``fail`` / ``unsure`` against the quality threshold (see :func:`verdict`)."""

    @property
    def cost_ratio(self) -> float | None:
        """Candidate mean cost / baseline mean cost."""
        return _ratio(self.candidate_mean_cost_usd, self.baseline_mean_cost_usd)

    @property
    def latency_ratio(self) -> float | None:
        """Candidate mean latency / baseline mean latency."""
        return _ratio(self.candidate_mean_latency_ms, self.baseline_mean_latency_ms)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cost_ratio"] = self.cost_ratio
        out["latency_ratio"] = self.latency_ratio
        return out


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def verdict(mean: float, ci_low: float | None, ci_high: float | None, threshold: float) -> str:
    """``pass`` when the interval's lower end (or, for one grade, the mean) reaches
    ``threshold``; ``fail`` when its upper end (or the single mean) is below it;
    ``unsure`` when the interval straddles it."""
    if ci_low is None or ci_high is None:
        return "pass" if mean >= threshold else "fail"
    if ci_low >= threshold:
        return "pass"
    if ci_high < threshold:
        return "fail"
    return "unsure"


def run_stats(rows: Iterable[Any], *, threshold: float, confidence: float = 0.95) -> list[RunStats]:
    """Group grade rows by (candidate adapter id, grader id) into :class:`RunStats`."""
    from llm_connect.ledger._stats import mean_std, t_interval

    groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
    order: list[tuple[str, str]] = []
    for row in rows:
        key = (row.candidate_adapter_id, row.grader_id)
        if key not in groups:
            order.append(key)
        groups[key].append(row)
    out = []
    for key in order:
        rs = groups[key]
        scores = [r.quality_score for r in rs]
        n = len(scores)
        mean, std = mean_std(n, math.fsum(scores), math.fsum(s * s for s in scores))
        low, high = t_interval(n, mean, std, confidence)
        m = float(mean or 0.0)
        out.append(
            RunStats(
                candidate=key[0],
                candidate_model=Counter(r.candidate_model for r in rs).most_common(1)[0][0],
                baseline_model=Counter(r.baseline_model for r in rs).most_common(1)[0][0],
                grader_id=key[1],
                n=n,
                mean=m,
                ci_low=low,
                ci_high=high,
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
                verdict=verdict(m, low, high, threshold),
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


def stats_table(stats: Sequence[RunStats], *, title: str, confidence: float) -> Any:
    """A rich table: one row per candidate and judge."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title), title_justify="left")
    for col, justify in (
        ("candidate", "left"),
        ("judge", "left"),
        ("n", "right"),
        (f"mean quality [{confidence:.0%} CI]", "right"),
        ("cost vs baseline", "right"),
        ("latency vs baseline", "right"),
        ("verdict", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    styles = {"pass": "bold green", "fail": "bold red", "unsure": "yellow"}
    for s in stats:
        ci = "" if s.ci_low is None or s.ci_high is None else f" [{s.ci_low:.3f}, {s.ci_high:.3f}]"
        cost = _fmt_ratio(s.cost_ratio)
        if s.cost_ratio is not None:
            cost += f" ({_fmt_money(s.candidate_mean_cost_usd)})"
        latency = _fmt_ratio(s.latency_ratio)
        if s.latency_ratio is not None:
            latency += f" ({_fmt_ms(s.candidate_mean_latency_ms)})"
        table.add_row(
            escape(s.candidate),
            escape(s.grader_id),
            str(s.n),
            f"{s.mean:.3f}{ci}",
            cost,
            latency,
            f"[{styles.get(s.verdict, '')}]{s.verdict}[/]",
        )
    return table


def stats_lines(stats: Sequence[RunStats], *, confidence: float) -> list[str]:
    """Plain-text rows (for non-terminal output)."""
    lines = []
    for s in stats:
        ci = "" if s.ci_low is None or s.ci_high is None else f" [{s.ci_low:.3f}, {s.ci_high:.3f}]"
        lines.append(
            f"{s.candidate}  judge={s.grader_id}  n={s.n}  mean={s.mean:.3f}{ci}  "
            f"cost={_fmt_ratio(s.cost_ratio)}  latency={_fmt_ratio(s.latency_ratio)}  verdict={s.verdict}"
        )
    return lines


def decision_to_json(decision: Any) -> dict[str, Any]:
    """The JSON form of a routing decision (its own ``to_dict``)."""
    data: dict[str, Any] = decision.to_dict()
    return data
