"""The labels store: what people said about candidates' answers (``human_labels``).

It reads ``grades`` only to check that a label names a graded case and candidate (spelled as the
model name or the adapter id; the model name is stored). Labels never change a grade.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, distinct, func, insert, select, text, update

from llm_connect.errors import LabelConflictError, LabelError
from llm_connect.ledger._cases import chunks, where
from llm_connect.ledger._engine import Store, reading, write
from llm_connect.ledger._models import PREFERENCE_CODE, Grade, HumanLabelRecord
from llm_connect.types import utcnow
from llm_connect.values import CaseLabels, HumanLabel, human_value

__all__ = ["LabelCounts", "LabelStore", "LabelWrite"]

_HL = cast(Table, HumanLabelRecord.__table__)
_G = cast(Table, Grade.__table__)
_KEY = ("task", "case_id", "candidate", "annotator")
_CONTENT = ("preference", "score", "note", "run_id")

Filter = str | Sequence[str] | None
Key = tuple[str, str, str, str]
Content = tuple[Any, ...]


@dataclass(frozen=True)
class LabelWrite:
    """What :meth:`LabelStore.record` did with a batch."""

    written: int
    """New labels stored."""
    unchanged: int
    """Labels identical to one already stored (or given earlier in the batch): nothing done."""
    replaced: int
    """Stored labels overwritten by a different one (``replace=True`` only)."""


@dataclass(frozen=True)
class LabelCounts:
    """How far the labelling of one graded (task, candidate model) has come."""

    task: str
    candidate: str
    """The candidate model as graded (``grades.candidate_model``)."""
    cases_graded: int
    """Distinct case ids with at least one grade (any judge, any baseline)."""
    cases_labelled: int
    """Distinct case ids with at least one label."""
    annotators: int
    """Distinct annotators."""
    labels: int
    """Labels stored."""


def _place(names: Sequence[str] | None, index: int) -> str:
    return names[index] if names is not None and index < len(names) else f"label {index + 1}"


def _key_text(key: Key) -> str:
    task, case_id, candidate, annotator = key
    return f"task {task!r}, case {case_id!r}, candidate {candidate!r}, annotator {annotator!r}"


def _by_task(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, list[str]]]:
    """``(task, case ids)`` of ``pairs``, a few hundred case ids at a time (:func:`chunks`)."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for task, case_id in dict.fromkeys(pairs):
        grouped[task].append(case_id)
    for task, case_ids in grouped.items():
        for part in chunks(case_ids):
            yield task, part


class LabelStore(Store):
    """Human labels in the ledger's database (table ``human_labels``).

    One label per (task, case id, candidate model, annotator), holding a preference
    (``candidate``, ``baseline``, ``tie``) or a 0..1 score. Writes are all or nothing and
    never touch ``grades``; reads return :class:`~llm_connect.values.HumanLabel` (with the
    model name as ``candidate`` and ``created_at`` set) or, per case,
    :class:`~llm_connect.values.CaseLabels` with the annotators' majority.

    Example::

        store = LabelStore(ledger.engine)
        store.record([HumanLabel("qa", "c1", "openai:small", "ana", preference="tie")])
        for case in store.case_labels(task="qa"):
            print(case.case_id, case.preference, case.annotators)
    """

    # -- writing ---------------------------------------------------------------

    def record(
        self, labels: Iterable[HumanLabel], *, replace: bool = False, names: Sequence[str] | None = None
    ) -> LabelWrite:
        """Store a batch of labels in one transaction; returns what was written, unchanged, replaced.

        Every label must name a (task, case id, candidate) the ledger holds a grade for (the
        candidate as model name or adapter id). The identical label again (same preference or
        score, note and run id) is a no-op. A different label under a stored key is refused
        with :class:`~llm_connect.errors.LabelConflictError` naming both, unless ``replace``,
        which overwrites it. ``names`` says how errors name each label (``labels.csv line 4``;
        default ``label N``, counted from 1).

        Raises:
            LabelError: a label that is not a :class:`HumanLabel` or names no graded case or
                candidate (``index`` and ``field`` say which); nothing of the batch is written.
            LabelConflictError: different labels under one key, stored or within the batch.
            LedgerError: the database failed; nothing is written.
        """
        batch = list(labels)
        for index, label in enumerate(batch):
            if not isinstance(label, HumanLabel):
                raise LabelError(f"is a {type(label).__name__}, not a HumanLabel", index=index)
        if not batch:
            return LabelWrite(0, 0, 0)

        return write(
            self.engine, "recording labels", lambda conn: self._record_in(conn, batch, replace, names)
        )

    def _record_in(
        self, conn: Connection, batch: list[HumanLabel], replace: bool, names: Sequence[str] | None
    ) -> LabelWrite:
        keys = self._canonical_keys(conn, batch)
        first: dict[Key, int] = {}
        fresh: list[int] = []
        unchanged = 0
        for index, key in enumerate(keys):
            seen = first.get(key)
            if seen is None:
                first[key] = index
                fresh.append(index)
            elif batch[seen].same_content(batch[index]):
                unchanged += 1
            else:
                raise LabelConflictError(
                    f"a different label for ({_key_text(key)}) is given earlier, at "
                    f"{_place(names, seen)}: {batch[seen].describe()} there, {batch[index].describe()} here",
                    stored=batch[seen].describe(),
                    given=batch[index].describe(),
                    index=index,
                )
        stored = self._stored(conn, [keys[i] for i in fresh])
        new: list[int] = []
        changed: list[int] = []
        for index in fresh:
            old = stored.get(keys[index])
            if old is None:
                new.append(index)
            elif old == _content(batch[index]):
                unchanged += 1
            else:
                changed.append(index)
        if changed and not replace:
            index = changed[0]
            old_label = HumanLabel(*keys[index], **dict(zip(_CONTENT, stored[keys[index]], strict=True)))
            old_text, new_text = old_label.describe(), batch[index].describe()
            more = f" ({len(changed)} labels of the batch conflict)" if len(changed) > 1 else ""
            raise LabelConflictError(
                f"a different label is stored for ({_key_text(keys[index])}): stored {old_text}, "
                f"new {new_text}{more}; replace=True (labels import --replace) overwrites",
                stored=old_text,
                given=new_text,
                count=len(changed),
                index=index,
            )
        now = utcnow()
        if new:
            conn.execute(insert(_HL), [_values(keys[i], batch[i], now, "") for i in new])
        if changed:
            stmt = update(_HL).where(*(_HL.c[name] == bindparam(f"k_{name}") for name in _KEY))
            conn.execute(stmt, [_values(keys[i], batch[i], now, "k_") for i in changed])
        return LabelWrite(written=len(new), unchanged=unchanged, replaced=len(changed))

    def _canonical_keys(self, conn: Connection, batch: list[HumanLabel]) -> list[Key]:
        """Each label's key with the candidate as the graded model name; LabelError for a label
        whose (task, case) or candidate has no grade."""
        graded: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        c = _G.c
        for task, case_ids in _by_task((label.task, label.case_id) for label in batch):
            stmt = select(c.case_id, c.candidate_model, c.candidate_adapter_id).where(
                c.task == task, c.case_id.in_(case_ids)
            )
            for case_id, model, adapter in conn.execute(stmt.distinct()):
                graded[(task, case_id)].append((model, adapter))
        resolved: dict[tuple[str, str, str], str] = {}
        keys: list[Key] = []
        for index, label in enumerate(batch):
            spelled = (label.task, label.case_id, label.candidate)
            model = resolved.get(spelled)
            if model is None:
                model = resolved[spelled] = self._resolve(label, graded.get(spelled[:2], []), index)
            keys.append((label.task, label.case_id, model, label.annotator))
        return keys

    @staticmethod
    def _resolve(label: HumanLabel, graded: list[tuple[str, str]], index: int) -> str:
        if not graded:
            raise LabelError(
                f"the ledger has no grade for case {label.case_id!r} of task {label.task!r}",
                field="case_id",
                index=index,
            )
        models = {model for model, _ in graded}
        if label.candidate in models:
            return label.candidate
        by_adapter = sorted({model for model, adapter in graded if adapter == label.candidate})
        if len(by_adapter) == 1:
            return by_adapter[0]
        if by_adapter:
            raise LabelError(
                f"{label.candidate!r} was asked as several models in case {label.case_id!r} of task "
                f"{label.task!r} ({', '.join(by_adapter)}): name the model",
                field="candidate",
                index=index,
            )
        known = ", ".join(sorted(models | {adapter for _, adapter in graded}))
        raise LabelError(
            f"case {label.case_id!r} of task {label.task!r} has no grade for candidate "
            f"{label.candidate!r} (graded there: {known})",
            field="candidate",
            index=index,
        )

    def _stored(self, conn: Connection, keys: list[Key]) -> dict[Key, Content]:
        """The content (:data:`_CONTENT`) of the labels stored under ``keys``."""
        wanted = set(keys)
        found: dict[Key, Content] = {}
        h = _HL.c
        for task, case_ids in _by_task((key[0], key[1]) for key in keys):
            stmt = select(h.case_id, h.candidate, h.annotator, *(h[name] for name in _CONTENT)).where(
                h.task == task, h.case_id.in_(case_ids)
            )
            for case_id, candidate, annotator, *content in conn.execute(stmt):
                key = (task, case_id, candidate, annotator)
                if key in wanted:
                    found[key] = tuple(content)
        return found

    # -- reading ---------------------------------------------------------------

    def labels(
        self, *, task: Filter = None, candidate: Filter = None, annotator: Filter = None
    ) -> list[HumanLabel]:
        """Stored labels matching every filter given, ordered by task, candidate, case id, annotator.

        Each filter takes one value or a sequence; ``candidate`` is the model name as graded.
        """
        h = _HL.c
        stmt = select(_HL).where(*where((h.task, task), (h.candidate, candidate), (h.annotator, annotator)))
        with reading(self.engine, "reading labels") as conn:
            rows = conn.execute(stmt.order_by(h.task, h.candidate, h.case_id, h.annotator)).mappings()
            return [_label(row) for row in rows]

    def case_labels(self, *, task: Filter = None, candidate: Filter = None) -> list[CaseLabels]:
        """The labels per (task, candidate model, case), with the annotators' majority
        (:attr:`CaseLabels.preference`, :attr:`CaseLabels.verdict`) and mean score."""
        grouped: dict[tuple[str, str, str], list[HumanLabel]] = {}
        for label in self.labels(task=task, candidate=candidate):
            grouped.setdefault((label.task, label.candidate, label.case_id), []).append(label)
        return [CaseLabels(t, cand, case_id, tuple(group)) for (t, cand, case_id), group in grouped.items()]

    def case_values(self, task: str, candidates: Sequence[str]) -> dict[tuple[str, str], float]:
        """``(candidate, case_id) -> what people say`` on the judges' 0..1 scale
        (:func:`~llm_connect.values.human_value`: the majority preference as 1 / 0.5 / 0, else the
        mean score), for every labelled case of ``candidates`` on ``task``; one light read, for
        routing on what people would say."""
        h = _HL.c
        stmt = select(h.candidate, h.case_id, h.preference, h.score).where(
            h.task == task, h.candidate.in_(list(candidates))
        )
        grouped: dict[tuple[str, str], tuple[list[str], list[float]]] = {}
        with reading(self.engine, "reading labels") as conn:
            for candidate, case_id, preference, score in conn.execute(stmt):
                prefs, scores = grouped.setdefault((candidate, case_id), ([], []))
                if preference is not None:
                    prefs.append(preference)
                if score is not None:
                    scores.append(float(score))
        values = {key: human_value(prefs, scores) for key, (prefs, scores) in grouped.items()}
        return {key: value for key, value in values.items() if value is not None}

    def version(self) -> tuple[Any, ...]:
        """A value that changes whenever a label is added, changed or deleted (count, highest id,
        and sums of the ids weighted by each label's content): for caches of figures read from
        the labels, such as the report page's."""
        sql = f"SELECT COUNT(*), MAX(id), SUM(id * {PREFERENCE_CODE}), SUM(id * score) FROM human_labels"
        with reading(self.engine, "reading labels") as conn:
            return tuple(conn.execute(text(sql)).one())

    def counts(self, *, task: Filter = None, candidate: Filter = None) -> list[LabelCounts]:
        """Per graded (task, candidate model): cases graded, cases labelled, annotators, labels.

        Every candidate with a grade that has a case id is listed, labelled or not; ordered by
        task and candidate.
        """
        g, h = _G.c, _HL.c
        graded_stmt = (
            select(g.task, g.candidate_model, func.count(distinct(g.case_id)))
            .where(g.case_id.is_not(None), *where((g.task, task), (g.candidate_model, candidate)))
            .group_by(g.task, g.candidate_model)
        )
        labelled_stmt = (
            select(
                h.task,
                h.candidate,
                func.count(distinct(h.case_id)),
                func.count(distinct(h.annotator)),
                func.count(),
            )
            .where(*where((h.task, task), (h.candidate, candidate)))
            .group_by(h.task, h.candidate)
        )
        with reading(self.engine, "counting labels") as conn:
            graded = {(r[0], r[1]): int(r[2]) for r in conn.execute(graded_stmt)}
            labelled = {(r[0], r[1]): (int(r[2]), int(r[3]), int(r[4])) for r in conn.execute(labelled_stmt)}
        return [
            LabelCounts(key[0], key[1], graded.get(key, 0), *labelled.get(key, (0, 0, 0)))
            for key in sorted(graded.keys() | labelled.keys())
        ]


def _content(label: HumanLabel) -> Content:
    return (label.preference, label.score, label.note, label.run_id)


def _values(key: Key, label: HumanLabel, now: Any, prefix: str) -> dict[str, Any]:
    """``label``'s values with ``key``'s (each name after ``prefix``)."""
    content = {name: getattr(label, name) for name in _CONTENT}
    keyed = {f"{prefix}{name}": value for name, value in zip(_KEY, key, strict=True)}
    return {**keyed, **content, "created_at": label.created_at or now}


def _label(row: Any) -> HumanLabel:
    score = None if row["score"] is None else float(row["score"])
    return HumanLabel(**{name: row[name] for name in (*_KEY, *_CONTENT, "created_at")} | {"score": score})
