"""The sessions part of the ``llm-connect grade`` report (Alignmenter's overall grade).

When a suite has sessions (cases sharing ``session``, turns in file order) and the run's
judges include a persona judge, :func:`session_report` gives, per side (the baseline and
each candidate), each session's stability; with a safety judge too, each session's
authenticity, safety, stability and overall score, their mean with a bootstrap interval
over sessions, and the letter grade (:func:`~llm_connect.scoring.persona.session_summary`).

Everything comes from the run's grades: the texts are the graded responses, authenticity and
safety the scorers' per-side scores (``details["baseline_score"]`` and
``details["candidate_score"]``), and stability embeds the texts with the persona scorer's own
embedder. Only this process's grades are used: after ``--resume``, sessions graded by an
earlier process are left out (the report says so).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SessionReport", "SideSessions", "session_lines", "session_report"]


@dataclass(frozen=True)
class SideSessions:
    """One side's sessions: stability always, the overall summary when safety ran too."""

    side: str
    """``baseline`` or ``candidate``."""
    spec: str
    """The side's spec (``recorded:candidate``, ``openai:gpt-4o-mini``)."""
    stability: dict[str, Any]
    """Session name -> :class:`~llm_connect.scoring.persona.SessionStability`, in suite order."""
    authenticity: dict[str, float]
    """Session name -> mean persona authenticity of its turns."""
    summary: Any | None
    """The :class:`~llm_connect.scoring.persona.SessionSummary`, when a safety judge ran."""

    @property
    def mean_stability(self) -> float:
        """Mean stability over the sessions."""
        return math.fsum(s.stability for s in self.stability.values()) / len(self.stability)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form."""
        return {
            "side": self.side,
            "spec": self.spec,
            "mean_stability": self.mean_stability,
            "stability": {name: s.to_dict() for name, s in self.stability.items()},
            "authenticity": dict(self.authenticity),
            "summary": None if self.summary is None else self.summary.to_dict(),
        }


@dataclass(frozen=True)
class SessionReport:
    """The sessions section of a grade report."""

    persona_grader_id: str
    safety_grader_id: str | None
    """``None`` when no safety judge ran (then only stability and authenticity are given)."""
    sides: tuple[SideSessions, ...]
    """The baseline first, then each candidate in run order."""
    partial: bool = False
    """Some of the suite's cases were graded by an earlier process (``--resume``) and are left out."""

    def to_dict(self) -> dict[str, Any]:
        """The ``sessions`` object of ``llm-connect grade --json``."""
        from llm_connect.scoring.persona import (
            SESSION_AUTHENTICITY_WEIGHT,
            SESSION_SAFETY_WEIGHT,
            SESSION_STABILITY_WEIGHT,
        )

        return {
            "persona_grader_id": self.persona_grader_id,
            "safety_grader_id": self.safety_grader_id,
            "weights": {
                "authenticity": SESSION_AUTHENTICITY_WEIGHT,
                "safety": SESSION_SAFETY_WEIGHT,
                "stability": SESSION_STABILITY_WEIGHT,
            },
            "partial": self.partial,
            "sides": [s.to_dict() for s in self.sides],
        }


def _first_judge(judges: Sequence[Any], scorer_type: type) -> Any | None:
    for judge in judges:
        if isinstance(getattr(judge, "scorer", None), scorer_type):
            return judge
    return None


_BASELINE = "\x00baseline"  # never a side spec


def session_report(
    results: Iterable[Any],
    cases: Sequence[Any],
    judges: Sequence[Any],
    *,
    baseline: str,
    partial: bool = False,
) -> SessionReport | None:
    """The sessions section for a run, or ``None`` when it has none.

    ``results`` are the run's :class:`~llm_connect.grading.BatchResult` s, ``cases`` the
    suite's cases (their ``session`` maps case to session, their order orders the turns),
    ``judges`` the run's judges and ``baseline`` the baseline's spec. ``None`` unless some
    case has a session and a persona judge ran; the first persona judge and the first safety
    judge (if any) are used. A side's session is made of the turns every one of those judges
    graded for that side; a session with none is left out of that side.
    """
    from llm_connect.scoring.persona import PersonaScorer, session_stabilities, session_summary
    from llm_connect.scoring.safety import SafetyScorer

    turns: dict[str, list[str]] = {}
    for case in cases:
        if case.session is not None:
            turns.setdefault(case.session, []).append(case.id)
    persona = _first_judge(judges, PersonaScorer)
    if not turns or persona is None:
        return None
    safety = _first_judge(judges, SafetyScorer)
    grader_ids = [persona.grader_id] + ([safety.grader_id] if safety is not None else [])

    # (side, case id, grader id) -> (text, score); the baseline's side is _BASELINE, a candidate's its spec
    graded: dict[tuple[str, str, str], tuple[str, float]] = {}
    specs: list[str] = []
    for r in results:
        res = r.result
        if res.grader_id not in grader_ids or not isinstance(
            res.details.get("candidate_score"), (int, float)
        ):
            continue
        if r.candidate not in specs:
            specs.append(r.candidate)
        cand = (res.candidate_response.text, float(res.details["candidate_score"]))
        base = (res.baseline_response.text, float(res.details["baseline_score"]))
        graded.setdefault((r.candidate, r.case_id, res.grader_id), cand)
        graded.setdefault((_BASELINE, r.case_id, res.grader_id), base)

    def graded_turns(side: str) -> dict[str, list[str]]:
        kept = {
            name: [cid for cid in ids if all((side, cid, gid) in graded for gid in grader_ids)]
            for name, ids in turns.items()
        }
        return {name: ids for name, ids in kept.items() if ids}

    sides = [(side, graded_turns(side)) for side in [_BASELINE, *specs]]
    sides = [(side, sessions) for side, sessions in sides if sessions]
    if not sides:
        return None
    # One batched encode for every turn of every side, with the persona scorer's embedder.
    texts = {
        (side, name): [graded[(side, cid, persona.grader_id)][0] for cid in ids]
        for side, sessions in sides
        for name, ids in sessions.items()
    }
    stabilities = session_stabilities(texts, embedder=persona.scorer.embedder)

    def mean_score(side: str, ids: list[str], gid: str) -> float:
        return math.fsum(graded[(side, cid, gid)][1] for cid in ids) / len(ids)

    out = []
    for side, sessions in sides:
        authenticity = {name: mean_score(side, ids, persona.grader_id) for name, ids in sessions.items()}
        stability = {name: stabilities[(side, name)] for name in sessions}
        summary = None
        if safety is not None:
            summary = session_summary(
                authenticity,
                {name: mean_score(side, ids, safety.grader_id) for name, ids in sessions.items()},
                {name: s.stability for name, s in stability.items()},
            )
        out.append(
            SideSessions(
                side="baseline" if side == _BASELINE else "candidate",
                spec=baseline if side == _BASELINE else side,
                stability=stability,
                authenticity=authenticity,
                summary=summary,
            )
        )
    return SessionReport(
        persona_grader_id=persona.grader_id,
        safety_grader_id=None if safety is None else safety.grader_id,
        sides=tuple(out),
        partial=partial,
    )


def _fmt(value: float) -> str:
    return f"{value:.3f}"


def session_lines(report: SessionReport) -> list[str]:
    """The report's lines for the terminal: a header, then one line per side."""
    first = report.sides[0]
    judges = report.persona_grader_id + (
        "" if report.safety_grader_id is None else f" + {report.safety_grader_id}"
    )
    if first.summary is not None:
        head = (
            f"sessions ({judges}): overall = 0.5 authenticity + 0.3 safety + 0.2 stability, "
            f"mean over sessions [{first.summary.confidence:.0%} percentile bootstrap], grade A-F"
        )
    else:
        head = (
            f"sessions ({judges}; add a safety judge for the overall grade): "
            "stability over each session's turns"
        )
    lines = [head]
    width = max(len(s.spec) for s in report.sides)
    for s in report.sides:
        n = len(s.stability)
        label = f"  {s.side:<9} {s.spec:<{width}}  "
        count = f"{n} session{'s' if n != 1 else ''}"
        summary = s.summary
        if summary is None:
            lines.append(
                f"{label}stability {_fmt(s.mean_stability)} (lowest "
                f"{_fmt(min(x.stability for x in s.stability.values()))})  authenticity "
                f"{_fmt(math.fsum(s.authenticity.values()) / n)}  ({count})"
            )
            continue
        interval = (
            f"[{_fmt(summary.low)}, {_fmt(summary.high)}]" if summary.low is not None else f"({summary.note})"
        )
        lines.append(
            f"{label}overall {_fmt(summary.mean)} {interval}  grade {summary.grade}  "
            f"authenticity {_fmt(summary.authenticity)}  safety {_fmt(summary.safety)}  "
            f"stability {_fmt(summary.stability)}  ({count})"
        )
    if report.partial:
        lines.append("  (resumed run: sessions graded by an earlier process are not included)")
    return lines
