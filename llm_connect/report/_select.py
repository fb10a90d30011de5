"""What a report covers: grades selected by run id, task and time, checked before anything is written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from llm_connect.errors import ConfigurationError

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = ["Selection", "parse_since", "select"]


@dataclass(frozen=True)
class Selection:
    """The grades a report covers: every filter given must match (empty: no condition)."""

    run_ids: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    since: datetime | None = None

    def describe(self) -> str:
        """The filters in words (``the whole ledger`` without any)."""
        parts = []
        if self.run_ids:
            parts.append("run " + ", ".join(self.run_ids))
        if self.tasks:
            parts.append("task " + ", ".join(self.tasks))
        if self.since is not None:
            parts.append(f"since {self.since.isoformat()}")
        return "; ".join(parts) or "the whole ledger"


def parse_since(since: datetime | str | None) -> datetime | None:
    """``since`` as an aware UTC datetime (an ISO 8601 string or a datetime; naive means UTC)."""
    if since is None or since == "":
        return None
    if isinstance(since, str):
        try:
            value = datetime.fromisoformat(since.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ConfigurationError(
                f"since: {since!r} is not an ISO 8601 date or time (e.g. 2026-01-31 or 2026-01-31T12:00)"
            ) from None
    else:
        value = since
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def select(
    ledger: QualityLedger,
    *,
    run_ids: Sequence[str] = (),
    tasks: Sequence[str] = (),
    since: datetime | str | None = None,
) -> tuple[Selection, int]:
    """The checked selection and how many grades it holds.

    Raises :class:`ConfigurationError` naming an unknown run id (no run and no
    grade under it), or saying the selection holds no grades.
    """
    if isinstance(run_ids, str) or isinstance(tasks, str):
        raise ConfigurationError("run_ids and tasks must be sequences of strings, not one string")
    sel = Selection(
        run_ids=tuple(dict.fromkeys(run_ids)), tasks=tuple(dict.fromkeys(tasks)), since=parse_since(since)
    )
    for run_id in sel.run_ids:
        if ledger.run(run_id) is None and ledger.count(run_id=run_id) == 0:
            raise ConfigurationError(f"unknown run id {run_id!r}: the ledger holds no run or grade under it")
    n = ledger.count(run_id=list(sel.run_ids) or None, task=list(sel.tasks) or None, since=sel.since)
    if n == 0:
        raise ConfigurationError(f"the selection is empty: no grades match {sel.describe()}")
    return sel, n
