"""The sampling store: which graded cases go to people, over the ledger's engine.

:class:`SamplingStore` owns the ``label_sampling`` table (``_models``) and
nothing else; it is handed the ledger's engine (``SamplingStore(ledger.engine)``) and
reads ``case_stats`` (the graded cases, in arrival order) and ``human_labels`` (which
chosen cases still wait for a label). A case is decided once: its row is written when
the sampler first sees the case and never changes, so the inclusion probability is
fixed before any label of the case exists (``docs/decisions.md``, "Routing on what
people would say"). How the probabilities are set and drawn is not this module's
business (``llm_connect.labels.choose_for_labels``): the store writes what it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Table, exists, func, insert, select

from llm_connect.ledger._cases import where
from llm_connect.ledger._engine import Store, reading, write
from llm_connect.ledger._models import CaseStats, HumanLabelRecord, LabelSamplingRecord
from llm_connect.types import utcnow

__all__ = ["GradedCase", "SampledCase", "SamplingStore"]

_S = cast(Table, LabelSamplingRecord.__table__)
_C = cast(Table, CaseStats.__table__)
_HL = cast(Table, HumanLabelRecord.__table__)
_ID = "id:"


def _of(task: str | None, candidate: str | None, grader_id: str | None) -> list[Any]:
    """``label_sampling`` rows of ``task`` when given, and of ``candidate`` and ``grader_id`` when given."""
    return where((_S.c.task, task), (_S.c.candidate, candidate), (_S.c.grader_id, grader_id))


@dataclass(frozen=True, slots=True)
class GradedCase:
    """A graded case of a (task, candidate, grader) the sampler has not decided yet."""

    case_id: str
    grade: float
    """The judge's mean grade of the case (over every baseline and replicate)."""


@dataclass(frozen=True, slots=True)
class SampledCase:
    """One decision to write: a case, its inclusion probability and whether it was chosen."""

    case_id: str
    inclusion: float
    chosen: bool


class SamplingStore(Store):
    """The sampler's decisions in the ledger's database (table ``label_sampling``).

    One row per (task, candidate model, grader id, case id), written once with its arrival
    position. Example::

        store = SamplingStore(ledger.engine)
        fresh = store.undecided("qa", "small", "pairwise:openai:m:pairwise-v1")
        store.record("qa", "small", "pairwise:...", [SampledCase(c.case_id, 0.2, False) for c in fresh],
                     strategy="uniform", rate=0.2, floor=0.2, seed=7)
        print(store.queue("qa", "small", "pairwise:..."))
    """

    def undecided(self, task: str, candidate: str, grader_id: str) -> list[GradedCase]:
        """The graded cases (with a case id) of ``candidate`` by ``grader_id`` on ``task`` that the
        sampler has not decided, in the order their first grades arrived."""
        c = _C.c
        stmt = (
            select(c.case_key, func.min(c.first_id), func.sum(c.sum_quality), func.sum(c.n))
            .where(
                c.task == task,
                c.grader_id == grader_id,
                c.candidate_model == candidate,
                c.case_key.like(_ID + "%"),
            )
            .group_by(c.case_key)
        )
        done = select(_S.c.case_id).where(*_of(task, candidate, grader_id))
        with reading(self.engine, "reading cases to sample") as conn:
            decided = set(conn.execute(done).scalars())
            rows = [r for r in conn.execute(stmt) if r[0][len(_ID) :] not in decided]
        rows.sort(key=lambda r: r[1])
        return [GradedCase(key[len(_ID) :], min(1.0, max(0.0, total / n))) for key, _, total, n in rows]

    def graders(self, task: str, candidate: str) -> list[str]:
        """The grader ids that graded ``candidate`` (the model name as graded) on ``task``, sorted."""
        c = _C.c
        stmt = select(c.grader_id).where(c.task == task, c.candidate_model == candidate).distinct()
        with reading(self.engine, "reading graders") as conn:
            return sorted(conn.execute(stmt).scalars())

    def seed(self, task: str, candidate: str) -> int | None:
        """The seed of the earliest stored decision about ``candidate`` on ``task`` that has one
        (any judge; ``None``: none yet), which :func:`~llm_connect.labels.choose_for_labels`
        draws with again when it is given no seed."""
        s = _S.c
        mine = (s.task == task, s.candidate == candidate, s.seed.is_not(None))
        first = select(s.seed).where(*mine, s.position == 0).order_by(s.id).limit(1)  # by index
        with reading(self.engine, "reading label sampling") as conn:
            found = conn.execute(first).scalar()
            if found is None:  # every judge's first decisions imported (no seed): look further
                found = conn.execute(select(s.seed).where(*mine).order_by(s.id).limit(1)).scalar()
        return None if found is None else int(found)

    def decided(
        self, task: str, candidate: str | None = None, grader_id: str | None = None
    ) -> dict[tuple[str, str, str], tuple[int, float, bool]]:
        """``(candidate, grader_id, case_id) -> (position, inclusion, chosen)`` of every decision on
        ``task`` (optionally one candidate and one grader)."""
        s = _S.c
        stmt = select(s.candidate, s.grader_id, s.case_id, s.position, s.inclusion, s.chosen)
        stmt = stmt.where(*_of(task, candidate, grader_id))
        with reading(self.engine, "reading label sampling") as conn:
            return {(r[0], r[1], r[2]): (int(r[3]), float(r[4]), bool(r[5])) for r in conn.execute(stmt)}

    def designs(
        self, task: str, candidate: str | None = None, grader_id: str | None = None
    ) -> dict[tuple[str, float], int]:
        """``(strategy, rate) -> distinct cases`` the sampler decided on ``task`` (optionally one
        candidate and one grader) with that strategy and rate: what ``labels queue`` tells a user
        who asks for another rate (cases decided earlier keep theirs)."""
        s = _S.c
        stmt = select(s.strategy, s.rate, func.count(s.case_id.distinct())).where(
            *_of(task, candidate, grader_id)
        )
        with reading(self.engine, "reading label sampling") as conn:
            rows = conn.execute(stmt.group_by(s.strategy, s.rate))
            return {(str(r[0]), float(r[1])): int(r[2]) for r in rows}

    def record(
        self,
        task: str,
        candidate: str,
        grader_id: str,
        cases: Sequence[SampledCase],
        *,
        strategy: str,
        rate: float,
        floor: float,
        seed: int | None,
    ) -> int:
        """Store the decisions about ``cases`` (in arrival order) after those already stored, in
        one transaction; returns how many. A case decided before is refused by the table's
        unique key (:class:`~llm_connect.errors.LedgerError`), so a decision is never redrawn."""
        if not cases:
            return 0

        def insert_cases(conn: Connection) -> int:
            last = conn.execute(
                select(func.max(_S.c.position)).where(*_of(task, candidate, grader_id))
            ).scalar()
            start = 0 if last is None else int(last) + 1
            shared: dict[str, Any] = dict(task=task, candidate=candidate, grader_id=grader_id, seed=seed)
            shared.update(strategy=strategy, rate=float(rate), floor=float(floor), created_at=utcnow())
            rows = [
                dict(shared, case_id=case.case_id, inclusion=float(case.inclusion), chosen=bool(case.chosen))
                for case in cases
            ]
            conn.execute(insert(_S), [dict(row, position=start + i) for i, row in enumerate(rows)])
            return len(cases)

        return write(self.engine, "recording label sampling", insert_cases)

    def queue(self, task: str, candidate: str, grader_id: str | None = None) -> list[str]:
        """The chosen case ids of ``candidate`` on ``task`` (for one grader, or any) that have no
        label yet, in the order the sampler decided them (the bound waits for the earliest)."""
        return [case_id for _, _, case_id in self.waiting(task, candidate, grader_id)]

    def waiting(
        self,
        task: str | None = None,
        candidate: str | None = None,
        grader_id: str | None = None,
        *,
        limit: int | None = None,
    ) -> list[tuple[str, str, str]]:
        """``(task, candidate, case id)`` of the chosen cases nobody has labelled yet, within the
        filters given, by the sampler's first position of each (then task, candidate, case id);
        at most ``limit``."""
        stmt = self._waiting(task, candidate, grader_id)
        stmt = stmt.order_by(func.min(_S.c.position), _S.c.task, _S.c.candidate, _S.c.case_id)
        with reading(self.engine, "reading the labelling queue") as conn:
            return [(r[0], r[1], r[2]) for r in conn.execute(stmt.limit(limit))]

    def count_waiting(self, task: str | None = None, candidate: str | None = None) -> int:
        """How many cases :meth:`waiting` would list (no limit)."""
        stmt = select(func.count()).select_from(self._waiting(task, candidate, None).subquery())
        with reading(self.engine, "reading the labelling queue") as conn:
            return int(conn.execute(stmt).scalar_one())

    def version(self) -> int:
        """The number of decisions stored (a decision never changes once written): for caches of
        figures read from the sampling."""
        with reading(self.engine, "reading label sampling") as conn:
            return int(conn.execute(select(func.count()).select_from(_S)).scalar_one())

    @staticmethod
    def _waiting(task: str | None, candidate: str | None, grader_id: str | None) -> Any:
        s, h = _S.c, _HL.c
        labelled = exists().where(h.task == s.task, h.case_id == s.case_id, h.candidate == s.candidate)
        return (
            select(s.task, s.candidate, s.case_id)
            .where(*_of(task, candidate, grader_id), s.chosen.is_(True), ~labelled)
            .group_by(s.task, s.candidate, s.case_id)
        )
