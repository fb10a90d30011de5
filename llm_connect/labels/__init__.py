"""Human labels: what people say about a candidate's answers, kept in the ledger.

A :class:`HumanLabel` holds one annotator's preference (``candidate``,
``baseline``, ``tie``) or 0..1 score for one (task, case, candidate). The
ledger keeps them in a store of their own (:class:`LabelStore`, table
``human_labels``), checked against the grades: a label must name a graded case
and candidate, and a different label under a stored key is refused unless
replaced. Labels never change a grade.

* Writing: :meth:`QualityLedger.record_labels <llm_connect.ledger.QualityLedger.record_labels>`,
  or :func:`import_labels` for a JSON Lines / CSV file (``llm-connect labels import``).
* Reading: :meth:`QualityLedger.labels <llm_connect.ledger.QualityLedger.labels>`;
  :meth:`LabelStore.case_labels` (per case, with the annotators' majority), :meth:`LabelStore.counts`.
* Agreement between annotators: :func:`agreement` (Cohen's kappa for two, Fleiss' for more;
  :func:`cohen_kappa_rows` is the vectorised Cohen's kappa every package uses),
  :func:`label_status` per task and candidate (``llm-connect labels status``).
* Labelling sheets: a file of the queued cases people fill in (:data:`SHEET_FIELDS`), each case's
  two answers in a blind order (:func:`candidate_first`, seeded by :data:`BLIND_SEED`), the same
  order the Label page shows.

Example::

    from llm_connect.labels import HumanLabel, LabelStore, label_status
    from llm_connect.ledger import QualityLedger

    with QualityLedger() as ledger:
        ledger.record_labels([HumanLabel("qa", "c1", "gpt-4o-mini", "ana", preference="baseline")])
        for row in label_status(ledger, task="qa"):
            print(row.candidate, row.cases_labelled, row.kappa)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from llm_connect._renamed import renamed_attribute
from llm_connect.errors import LabelError
from llm_connect.labels._agreement import Agreement, agreement, cohen_kappa, cohen_kappa_rows, fleiss_kappa
from llm_connect.labels._files import (
    LABEL_FORMATS,
    detect_label_format,
    read_label_file,
    read_label_lines,
    read_labels,
    write_labels,
)
from llm_connect.labels._sampler import (
    STRATEGIES,
    UniformSample,
    choose_for_labels,
    plan_uniform_sample,
    record_uniform_sample,
)
from llm_connect.labels._sheet import BLIND_SEED, SHEET_FIELDS, candidate_first
from llm_connect.ledger import LabelCounts, LabelStore, LabelWrite, QualityLedger, SamplingStore
from llm_connect.values import LABEL_FIELDS, PREFERENCES, CaseLabels, HumanLabel, score_verdict

__all__ = [
    "BLIND_SEED",
    "LABEL_FIELDS",
    "LABEL_FORMATS",
    "PREFERENCES",
    "SHEET_FIELDS",
    "STRATEGIES",
    "Agreement",
    "CaseLabels",
    "HumanLabel",
    "LabelCounts",
    "LabelImport",
    "LabelStatus",
    "LabelStore",
    "LabelWrite",
    "SamplingProgress",
    "SamplingStore",
    "UniformSample",
    "agreement",
    "candidate_first",
    "choose_for_labels",
    "cohen_kappa",
    "cohen_kappa_rows",
    "detect_label_format",
    "fleiss_kappa",
    "import_labels",
    "label_status",
    "plan_uniform_sample",
    "read_label_file",
    "read_label_lines",
    "read_labels",
    "record_uniform_sample",
    "score_verdict",
    "write_labels",
]

Filter = str | Sequence[str] | None


def _store(ledger: QualityLedger | LabelStore) -> LabelStore:
    return ledger if isinstance(ledger, LabelStore) else LabelStore(ledger.engine)


@dataclass(frozen=True)
class LabelImport(LabelWrite):
    """What :func:`import_labels` did: the write's counts, and the file's blank sheet rows."""

    blank: int = 0
    """Rows of a labelling sheet with no ``better`` yet: not labels, skipped (they stay queued)."""


def import_labels(
    ledger: QualityLedger | LabelStore,
    path: str | Path,
    *,
    annotator: str | None = None,
    replace: bool = False,
    format: str | None = None,
    sampled_uniformly: float | None = None,
) -> LabelImport:
    """Read the labels file at ``path`` and store every label in one transaction; returns what
    the write did and how many rows of a labelling sheet were left blank (not labels: skipped).

    ``annotator`` fills lines that name none. Any error (a malformed line, a case or candidate
    the ledger has no grade for, a conflicting label without ``replace``) raises
    :class:`~llm_connect.errors.LabelError` naming the file, the line and the field, and
    nothing of the file is written.

    A file with no label in it (0 bytes, a header alone, or a labelling sheet whose every row is
    still blank) is a :class:`~llm_connect.errors.LabelError` too, saying which: importing it
    would do nothing, and a wrong file is likelier than an intended no-op.

    ``sampled_uniformly``: the file's cases were drawn at random, each graded case with this
    probability (``labels import --sampled-uniformly RATE``); they are recorded as chosen by the
    sampler with that inclusion probability, and the other graded cases not yet decided as not
    chosen, so routing on what people would say can use these labels
    (:func:`plan_uniform_sample`). Refused, before anything is written, when a labelled case
    was decided by the sampler already.
    """
    lines, blank = read_label_file(path, annotator=annotator, format=format)
    name = str(path)
    if not lines:
        raise LabelError(_no_labels(path, blank), path=name)
    store = _store(ledger)
    sampling = SamplingStore(store.engine)
    plan = None
    if sampled_uniformly is not None:
        try:
            plan = plan_uniform_sample(sampling, [label for _, label in lines], sampled_uniformly)
        except LabelError as exc:
            raise exc.located(name, None) from None
    try:
        written = store.record(
            [label for _, label in lines],
            replace=replace,
            names=[f"line {line}" for line, _ in lines],
        )
    except LabelError as exc:
        if exc.index is None or exc.index >= len(lines):
            raise
        raise exc.located(name, lines[exc.index][0]) from None
    if plan is not None:
        record_uniform_sample(sampling, plan)
    return LabelImport(written.written, written.unchanged, written.replaced, blank)


def _no_labels(path: str | Path, blank: int) -> str:
    """Why a labels file with no label is refused: every sheet row blank, or no row at all."""
    if blank:
        rows = "1 row, blank" if blank == 1 else f"{blank} rows, all blank"
        return f"no row has a label ({rows}): fill 'better' with 1, 2 or tie; nothing written"
    try:
        empty = not Path(path).read_text(encoding="utf-8-sig").strip()
    except (OSError, UnicodeDecodeError):  # read once already: only a race gets here
        empty = False
    what = "is empty" if empty else "holds a header but no label rows"
    return f"the labels file {what}; nothing written"


@dataclass(frozen=True)
class SamplingProgress:
    """How far people have come with the cases the label sampler chose for one judge (routing on
    what people would say reads these labels; ``llm-connect labels queue`` lists the rest)."""

    grader_id: str
    """The judge whose grades the sampler read."""
    decided: int
    """Graded cases the sampler has decided (chosen or not)."""
    chosen: int
    """Cases it chose for people."""
    labelled: int
    """Chosen cases with at least one label."""
    waiting: int
    """Chosen cases without a label (the bound waits for the earliest of them)."""


@dataclass(frozen=True)
class LabelStatus:
    """How far the labelling of one graded (task, candidate) has come, and how well its
    annotators agree (``llm-connect labels status``)."""

    task: str
    candidate: str
    """The candidate model as graded."""
    cases_graded: int
    cases_labelled: int
    annotators: int
    labels: int
    cases_shared: int
    """Cases labelled by two or more annotators: the cases the kappa is computed on."""
    kappa_method: str | None
    """``"cohen"`` (two annotators), ``"fleiss"`` (more), ``None`` (no shared case)."""
    kappa: float | None
    """Agreement beyond chance on the verdicts (scores split at 0.5); ``None`` when undefined."""
    observed_agreement: float | None
    """The raw share of agreeing pairs of labels on the shared cases."""
    sampling: tuple[SamplingProgress, ...] = ()
    """Per judge the label sampler ran for: its cases decided, chosen, labelled and waiting."""

    def to_dict(self) -> dict[str, Any]:
        """The row as plain JSON-ready values."""
        return asdict(self)


def label_status(
    ledger: QualityLedger | LabelStore, *, task: Filter = None, candidate: Filter = None
) -> list[LabelStatus]:
    """One :class:`LabelStatus` per graded (task, candidate model), labelled or not, ordered by
    task and candidate."""
    store = _store(ledger)
    by_group: dict[tuple[str, str], list[CaseLabels]] = {}
    for case in store.case_labels(task=task, candidate=candidate):
        by_group.setdefault((case.task, case.candidate), []).append(case)
    rows = store.counts(task=task, candidate=candidate)
    labelled = {key: {case.case_id for case in cases} for key, cases in by_group.items()}
    # Per (task, candidate), per judge: decided, chosen, chosen and labelled (one pass per task).
    progress: dict[tuple[str, str], dict[str, list[int]]] = {}
    sampling = SamplingStore(store.engine)
    for t in dict.fromkeys(r.task for r in rows):
        for (cand, gid, case_id), (_, _, chosen) in sampling.decided(t).items():
            row = progress.setdefault((t, cand), {}).setdefault(gid, [0, 0, 0])
            row[0] += 1
            row[1] += chosen
            row[2] += chosen and case_id in labelled.get((t, cand), ())
    out = []
    for counts in rows:
        agreed = agreement(by_group.get((counts.task, counts.candidate), []))
        mine = progress.get((counts.task, counts.candidate), {})
        out.append(
            LabelStatus(
                task=counts.task,
                candidate=counts.candidate,
                cases_graded=counts.cases_graded,
                cases_labelled=counts.cases_labelled,
                annotators=counts.annotators,
                labels=counts.labels,
                cases_shared=agreed.cases,
                kappa_method=agreed.method,
                kappa=agreed.kappa,
                observed_agreement=agreed.observed,
                sampling=tuple(
                    SamplingProgress(gid, n, chosen, done, chosen - done)
                    for gid, (n, chosen, done) in sorted(mine.items())
                ),
            )
        )
    return out


_RENAMED = {"FORMATS": "LABEL_FORMATS", "detect_format": "detect_label_format"}
"""Old names kept for one release (``contracts/labels.md`` named them): they clashed with
:mod:`llm_connect.traffic`'s ``FORMATS`` and ``detect_format``, which are about traffic files."""


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)
