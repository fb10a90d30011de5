"""The group both human-target incremental test modules grade, and its evidence from a full read."""

from __future__ import annotations

from typing import Any

from llm_connect.labels import HumanLabel
from llm_connect.ledger import LabelStore, QualityLedger, SamplingStore
from llm_connect.routing._human import human_grader_evidence

GRADER = "sim-judge"
BASE, OTHER, CAND = "big", "other", "small"


def full_read(ledger: QualityLedger, task: str, alpha: float) -> object:
    """The candidate's human-target evidence computed from every sampled case and label."""
    design = SamplingStore(ledger.engine).design(task, BASE, [CAND], [GRADER])[(CAND, GRADER)]
    values = {k: v for k, v in LabelStore(ledger.engine).case_values(task, [CAND]).items() if k[0] == CAND}
    return human_grader_evidence(design, values, min_quality=0.6, min_samples=30, alpha=alpha)


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
