"""What a decision carries about the watch after the switch (issue 38): since when a candidate
serves, and a rollback of one whose quality fell (``routing/_rollback.py`` decides both)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

__all__ = ["Rollback", "RoutedSince"]


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class RoutedSince:
    """The candidate a task is routed to and since when: the first decision of the streak that
    routed it (``decision_id``; ``None`` on that decision itself) and the ledger's newest grade
    id then (``after_id``): the watch reads the candidate's cases graded after it."""

    model: str
    at: datetime
    after_id: int
    decision_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (kept in the stored decision)."""
        return asdict(self) | {"at": self.at.isoformat()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoutedSince:
        """Rebuild from :meth:`to_dict`."""
        return cls(
            model=data["model"],
            at=datetime.fromisoformat(data["at"]),
            after_id=int(data["after_id"]),
            decision_id=data.get("decision_id"),
        )


@dataclass(frozen=True)
class Rollback:
    """A routed candidate sent back to the baseline because the watch's e-detector found its mean
    fallen below the judge's threshold: which judge, when, after how many cases since it was
    routed, the recent cases' mean and upper bound, the detector's value and threshold. A
    candidate stays rolled back until it is proven again on cases graded after ``after_id``;
    every decision until then carries the rollback (``new`` only on the one that made it)."""

    model: str
    grader_id: str
    at: datetime
    after_id: int
    routed_at: datetime
    cases: int
    """Cases of the candidate graded since it was routed, when the detector fired."""
    recent_cases: int
    """Cases since the most likely change point (the detector's best bet's last restart)."""
    recent_mean: float | None
    recent_upper: float | None
    """An upper confidence bound of the recent cases' mean (descriptive: the window was chosen
    from the data; the detector is the test)."""
    detector: float
    arl: float
    threshold: float
    new: bool = True

    @property
    def why(self) -> str:
        """One sentence for the decision's reason and the CLI."""
        recent = (
            f"the last {self.recent_cases} case(s) averaged {self.recent_mean:.3f}"
            + (f" (upper bound {self.recent_upper:.3f})" if self.recent_upper is not None else "")
            if self.recent_mean is not None
            else "no recent cases"
        )
        return (
            f"{self.model} was rolled back at {_when(self.at)}: on {self.grader_id}, after {self.cases} "
            f"case(s) graded since it was routed ({_when(self.routed_at)}), the watch's detector reached "
            f"{min(self.detector, 1e12):,.0f} >= {self.arl:,.0f} "
            f"(its mean has fallen below {self.threshold:g}); "
            f"{recent}. It routes again once proven on cases graded after the rollback"
        )

    def carried(self) -> Rollback:
        """The same rollback on a later decision (``new`` False)."""
        return Rollback(**{**asdict(self), "new": False})

    def to_dict(self) -> dict[str, Any]:
        """JSON form (kept in the stored decision); the detector capped to a finite number."""
        return asdict(self) | {
            "at": self.at.isoformat(),
            "routed_at": self.routed_at.isoformat(),
            "detector": min(float(self.detector), 1e300),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rollback:
        """Rebuild from :meth:`to_dict`."""
        return cls(
            **{
                **dict(data),
                "at": datetime.fromisoformat(data["at"]),
                "routed_at": datetime.fromisoformat(data["routed_at"]),
            }
        )
