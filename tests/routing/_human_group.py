"""The group both human-target incremental test modules grade, and its evidence from a full read.

:func:`full_read` is the oracle the Router's incremental reads are checked against: it reads every
sampled case of the group with SQL of its own (``label_sampling`` joined to ``case_stats``, in the
sampler's order), people's values through ``LabelStore.case_values``, and computes the bound
afresh with ``routing._ppi.human_bound``; nothing of the Router's caches or the ledger's
incremental reader (``ledger/_design.py``) is involved.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import text

from llm_connect.labels import HumanLabel
from llm_connect.ledger import LabelStore, QualityLedger
from llm_connect.routing._human import bound_evidence, rank_agreement
from llm_connect.routing._ppi import human_bound

GRADER = "sim-judge"
BASE, OTHER, CAND = "big", "other", "small"

_SAMPLED = text(
    "SELECT s.case_id, s.inclusion, s.chosen, s.floor, c.sum_quality / c.n FROM label_sampling s "
    "JOIN case_stats c ON c.task = s.task AND c.baseline_model = :base AND c.grader_id = s.grader_id "
    "AND c.candidate_model = s.candidate AND c.case_key = 'id:' || s.case_id "
    "WHERE s.task = :task AND s.candidate = :cand AND s.grader_id = :gid ORDER BY s.position"
)
_GRADED = text(
    "SELECT COUNT(*) FROM case_stats WHERE task = :task AND baseline_model = :base "
    "AND candidate_model = :cand AND grader_id = :gid AND case_key LIKE 'id:%'"
)


_PREFERENCES = text(
    "SELECT COUNT(*) FROM human_labels WHERE task = :task AND candidate = :cand AND preference IS NOT NULL"
)


def full_read(ledger: QualityLedger, task: str, alpha: float) -> object:
    """The candidate's human-target evidence computed from every sampled case and label."""
    params = {"task": task, "base": BASE, "cand": CAND, "gid": GRADER}
    with ledger.engine.connect() as conn:
        rows = conn.execute(_SAMPLED, params).all()
        graded = int(conn.execute(_GRADED, params).scalar_one())
    values = {k: v for k, v in LabelStore(ledger.engine).case_values(task, [CAND]).items() if k[0] == CAND}
    chosen = np.array([bool(r[2]) for r in rows], dtype=bool)
    human = np.array([values.get((CAND, r[0]), np.nan) if r[2] else np.nan for r in rows], dtype=float)
    chosen_ids = {r[0] for r in rows if r[2]}
    hb = human_bound(
        np.clip(np.array([float(r[4]) for r in rows]), 0.0, 1.0),
        np.array([float(r[1]) for r in rows]),
        chosen,
        human,
        alpha=alpha,
        min_quality=0.6,
        floor=min((float(r[3]) for r in rows), default=None),
        min_samples=30,
    )
    left_out = sum(1 for _, case_id in values if case_id not in chosen_ids)
    with ledger.engine.connect() as conn:  # people's scale: any label with a preference
        preferences = bool(conn.execute(_PREFERENCES, params).scalar_one())
    judge = np.clip(np.array([float(r[4]) for r in rows]), 0.0, 1.0)
    return bound_evidence(
        hb, GRADER, left_out=left_out, undecided=graded - len(rows), alpha=alpha, preferences=preferences,
        agreement=rank_agreement(judge, human), min_quality=0.6,
    )  # fmt: skip


PREFERENCES = ("candidate", "tie", "baseline")


def label_at_random(
    ledger: QualityLedger,
    task: str,
    case_ids: list[str],
    rng: Any,
    annotator: str = "ana",
    replace: bool = False,
) -> None:
    """People's labels of ``case_ids`` for the candidate: a preference drawn from ``rng`` each."""
    ledger.record_labels(
        [
            HumanLabel(task, c, CAND, annotator, preference=PREFERENCES[int(rng.integers(3))])
            for c in case_ids
        ],
        replace=replace,
    )
