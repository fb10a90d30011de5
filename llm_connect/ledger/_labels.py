"""The labels store: what people said about candidates' answers, over the ledger's engine.

:class:`LabelStore` owns the ``human_labels`` table (``_models_labels``) and
nothing else; it is handed the ledger's engine (``LabelStore(ledger.engine)``)
and reads ``grades`` only to check that a label names a graded case and
candidate. Labels never change a grade.

A label's candidate may be spelled as the model asked for (``grades.candidate_model``,
``gpt-4o-mini``) or as the adapter id (``grades.candidate_adapter_id``,
``openai:gpt-4o-mini``); the store keeps the model name, the spelling every other
reader of the ledger groups by (summary, routing, calibration).

Writing a batch (:meth:`LabelStore.record`) is one transaction: every label is
checked first (its case and candidate graded, no conflicting label stored or
given twice), with one query per chunk of cases rather than one per label, and
then the new labels go in with one ``executemany`` insert.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Engine, Table, bindparam, distinct, func, insert, select, update

from llm_connect.errors import LabelConflictError, LabelError
from llm_connect.ledger._cases import _match
from llm_connect.ledger._engine import ledger_errors, read_connection, write_transaction
from llm_connect.ledger._models import Grade
from llm_connect.ledger._models_labels import HumanLabelRecord
from llm_connect.types import utcnow
from llm_connect.values import CaseLabels, HumanLabel, human_value

__all__ = ["LabelCounts", "LabelStore", "LabelWrite"]

_HL = cast(Table, HumanLabelRecord.__table__)
_G = cast(Table, Grade.__table__)
#: Case ids per ``task = ? AND case_id IN (...)`` query: well under both backends' parameter limits.
_CHUNK = 500
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


def _by_task(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for task, case_id in dict.fromkeys(pairs):
        grouped[task].append(case_id)
    return grouped


class LabelStore:
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

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

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

        def write(conn: Connection) -> LabelWrite:
            return self._record_in(conn, batch, replace=replace, names=names)

        with ledger_errors("recording labels", self.engine.url):
            return write_transaction(self.engine, write)

    def _record_in(
        self, conn: Connection, batch: list[HumanLabel], *, replace: bool, names: Sequence[str] | None
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
            conn.execute(insert(_HL), [self._row(keys[i], batch[i], now) for i in new])
        if changed:
            stmt = update(_HL).where(
                _HL.c.task == bindparam("k_task"),
                _HL.c.case_id == bindparam("k_case_id"),
                _HL.c.candidate == bindparam("k_candidate"),
                _HL.c.annotator == bindparam("k_annotator"),
            )
            conn.execute(stmt, [self._update_row(keys[i], batch[i], now) for i in changed])
        return LabelWrite(written=len(new), unchanged=unchanged, replaced=len(changed))

    @staticmethod
    def _row(key: Key, label: HumanLabel, now: Any) -> dict[str, Any]:
        return {
            "task": key[0],
            "case_id": key[1],
            "candidate": key[2],
            "annotator": key[3],
            "preference": label.preference,
            "score": label.score,
            "note": label.note,
            "run_id": label.run_id,
            "created_at": label.created_at or now,
        }

    @staticmethod
    def _update_row(key: Key, label: HumanLabel, now: Any) -> dict[str, Any]:
        values: dict[str, Any] = {name: getattr(label, name) for name in _CONTENT}
        values["created_at"] = label.created_at or now
        values.update(k_task=key[0], k_case_id=key[1], k_candidate=key[2], k_annotator=key[3])
        return values

    def _canonical_keys(self, conn: Connection, batch: list[HumanLabel]) -> list[Key]:
        """Each label's key with the candidate as the graded model name; LabelError for a label
        whose (task, case) or candidate has no grade."""
        graded: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        c = _G.c
        for task, case_ids in _by_task((label.task, label.case_id) for label in batch).items():
            for start in range(0, len(case_ids), _CHUNK):
                stmt = (
                    select(c.case_id, c.candidate_model, c.candidate_adapter_id)
                    .where(c.task == task, c.case_id.in_(case_ids[start : start + _CHUNK]))
                    .distinct()
                )
                for case_id, model, adapter in conn.execute(stmt):
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
        for task, case_ids in _by_task((key[0], key[1]) for key in keys).items():
            for start in range(0, len(case_ids), _CHUNK):
                stmt = select(h.case_id, h.candidate, h.annotator, *(h[name] for name in _CONTENT)).where(
                    h.task == task, h.case_id.in_(case_ids[start : start + _CHUNK])
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
        conditions = [
            cond
            for cond in (
                _match(_HL.c.task, task),
                _match(_HL.c.candidate, candidate),
                _match(_HL.c.annotator, annotator),
            )
            if cond is not None
        ]
        stmt = (
            select(_HL)
            .where(*conditions)
            .order_by(_HL.c.task, _HL.c.candidate, _HL.c.case_id, _HL.c.annotator)
        )
        with ledger_errors("reading labels", self.engine.url), read_connection(self.engine) as conn:
            return [_label(row) for row in conn.execute(stmt).mappings()]

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
        with ledger_errors("reading labels", self.engine.url), read_connection(self.engine) as conn:
            for candidate, case_id, preference, score in conn.execute(stmt):
                prefs, scores = grouped.setdefault((candidate, case_id), ([], []))
                if preference is not None:
                    prefs.append(preference)
                if score is not None:
                    scores.append(float(score))
        out: dict[tuple[str, str], float] = {}
        for key, (prefs, scores) in grouped.items():
            value = human_value(prefs, scores)
            if value is not None:
                out[key] = value
        return out

    def counts(self, *, task: Filter = None, candidate: Filter = None) -> list[LabelCounts]:
        """Per graded (task, candidate model): cases graded, cases labelled, annotators, labels.

        Every candidate with a grade that has a case id is listed, labelled or not; ordered by
        task and candidate.
        """
        g, h = _G.c, _HL.c
        graded_stmt = (
            select(g.task, g.candidate_model, func.count(distinct(g.case_id)))
            .where(
                g.case_id.is_not(None),
                *[c for c in (_match(g.task, task), _match(g.candidate_model, candidate)) if c is not None],
            )
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
            .where(*[c for c in (_match(h.task, task), _match(h.candidate, candidate)) if c is not None])
            .group_by(h.task, h.candidate)
        )
        with ledger_errors("counting labels", self.engine.url), read_connection(self.engine) as conn:
            graded = {(r[0], r[1]): int(r[2]) for r in conn.execute(graded_stmt)}
            labelled = {(r[0], r[1]): (int(r[2]), int(r[3]), int(r[4])) for r in conn.execute(labelled_stmt)}
        return [
            LabelCounts(key[0], key[1], graded.get(key, 0), *labelled.get(key, (0, 0, 0)))
            for key in sorted(graded.keys() | labelled.keys())
        ]


def _content(label: HumanLabel) -> Content:
    return (label.preference, label.score, label.note, label.run_id)


def _label(row: Any) -> HumanLabel:
    return HumanLabel(
        task=row["task"],
        case_id=row["case_id"],
        candidate=row["candidate"],
        annotator=row["annotator"],
        preference=row["preference"],
        score=None if row["score"] is None else float(row["score"]),
        note=row["note"],
        run_id=row["run_id"],
        created_at=row["created_at"],
    )
