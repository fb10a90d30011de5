"""Which graded cases go to people: the sampler behind ``labels queue`` and ``grade --label-rate``.

Each graded case is decided once (:class:`~llm_connect.ledger.SamplingStore`): an inclusion
probability fixed before any label of it exists, and a draw. Routing on what people would
say (``Router.decide(target="human")``) bounds the mean human value from the judge's grades
on every decided case and the labels on the chosen ones; only chosen cases' labels enter it.

* ``uniform``: every case ``rate``.
* ``active``: higher where the judge is unsure (``2 sqrt(J (1 - J))``, 1 at a tie), never below
  ``floor`` (default ``0.9 * rate``, :data:`~llm_connect.routing._ppi.ACTIVE_FLOOR`), mean
  ``rate`` over each batch decided together
  (:func:`~llm_connect.routing._ppi.inclusion_probabilities`; a whole batch is decided before
  any of its cases can enter a bound).

The draw of a case is a hash of (seed, task, candidate, case id) read as a uniform number, so
a seed gives the same choices whatever the batches, and every judge of a candidate with the
same probability chooses the same cases (their labels serve each). Without a seed the sampler
takes the one the candidate's earlier decisions on the task were drawn with, so this holds by
default across judges, batches and runs (``grade --label-rate``): at rate 0.3 two judges need
labels on 30% of the cases, not the 51% two independent draws would choose.
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llm_connect.errors import ConfigurationError, LabelError
from llm_connect.ledger import QualityLedger, SampledCase, SamplingStore
from llm_connect.values import HumanLabel

if TYPE_CHECKING:
    pass

__all__ = [
    "STRATEGIES",
    "UniformSample",
    "check_rate",
    "choose_for_labels",
    "plan_uniform_sample",
    "record_uniform_sample",
]

STRATEGIES = ("uniform", "active")
"""The sampler's strategies (``imported`` is what ``labels import --sampled-uniformly`` records)."""

_UNIT = float(2**64)

log = logging.getLogger(__name__)


def check_rate(rate: object, name: str = "rate") -> float:
    """``rate`` as a float in (0, 1]; :class:`ConfigurationError` naming it otherwise."""
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
        raise ConfigurationError(f"{name} must be a number in (0, 1], not {rate!r}")
    if not 0.0 < float(rate) <= 1.0:
        raise ConfigurationError(f"{name} must lie in (0, 1], not {rate!r}")
    return float(rate)


def _draw(seed: int, task: str, candidate: str, case_id: str) -> float:
    """A uniform number in [0, 1) from the seed and the case (not the judge, not the label)."""
    digest = hashlib.sha256(f"{seed}\0{task}\0{candidate}\0{case_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / _UNIT


def _store(ledger: QualityLedger | SamplingStore) -> SamplingStore:
    return ledger if isinstance(ledger, SamplingStore) else SamplingStore(ledger.engine)


def choose_for_labels(
    ledger: QualityLedger | SamplingStore,
    *,
    task: str,
    candidate: str,
    grader_id: str,
    rate: float = 0.2,
    strategy: str = "uniform",
    seed: int | None = None,
    floor: float | None = None,
) -> list[str]:
    """Decide, once, for each graded case of ``candidate`` by ``grader_id`` on ``task`` not yet
    decided, whether it goes to people; store each decision with its inclusion probability;
    return the chosen case ids that have no label yet, in arrival order (label them in that
    order: the bound waits for the earliest missing label).

    ``candidate`` is the model name as graded. ``rate``: the share of cases to label, in (0, 1].
    ``strategy``: ``"uniform"`` or ``"active"`` (``floor``, default ``0.9 * rate``, is the
    least probability any case gets; ``active`` only: a lower floor widens the bound's range
    and costs more labels than it saves, ``docs/decisions.md``). ``seed``: makes the draws reproducible
    (default: the seed of this candidate's earlier decisions on the task, any judge, else a fresh
    random one; stored with the decisions). One seed draws one number per case, so at one rate
    every judge of the candidate chooses the same cases, and one label serves them all. Cases
    decided earlier keep their decision whatever the arguments now. Raises
    :class:`ConfigurationError` naming a bad argument.
    """
    rate = check_rate(rate)
    if strategy not in STRATEGIES:
        raise ConfigurationError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if strategy == "uniform":
        if floor is not None:
            raise ConfigurationError(
                "floor applies to strategy='active' only (uniform gives every case rate)"
            )
        low = rate
    else:
        from llm_connect.routing import ACTIVE_FLOOR

        low = ACTIVE_FLOOR * rate if floor is None else check_rate(floor, "floor")
        if low > rate:
            raise ConfigurationError(f"floor {floor!r} must not exceed rate {rate!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
        raise ConfigurationError(f"seed must be an int in 0..2**63-1, not {seed!r}")
    for name, value in (("task", task), ("candidate", candidate), ("grader_id", grader_id)):
        if not isinstance(value, str) or not value:
            raise ConfigurationError(f"{name} must be a non-empty string, not {value!r}")
    store = _store(ledger)
    fresh = store.undecided(task, candidate, grader_id)
    if fresh:
        if seed is None:  # the candidate's seed (any judge, any batch), else a new one
            seed = store.seed(task, candidate)
            seed = secrets.randbits(62) if seed is None else seed
        if strategy == "uniform":
            probs = [rate] * len(fresh)
        else:
            from llm_connect.routing import inclusion_probabilities, judge_uncertainty

            probs = [
                float(p)
                for p in inclusion_probabilities(judge_uncertainty([c.grade for c in fresh]), rate, low)
            ]
        store.record(
            task,
            candidate,
            grader_id,
            [
                SampledCase(c.case_id, p, _draw(seed, task, candidate, c.case_id) < p)
                for c, p in zip(fresh, probs, strict=True)
            ],
            strategy=strategy,
            rate=rate,
            floor=low,
            seed=seed,
        )
    return store.queue(task, candidate, grader_id)


@dataclass(frozen=True)
class UniformSample:
    """A file of labels the user drew uniformly at ``rate``, checked and ready to record
    (:func:`plan_uniform_sample`): per (task, candidate, grader id), the labelled case ids."""

    rate: float
    groups: tuple[tuple[str, str, str, frozenset[str]], ...]


def plan_uniform_sample(store: SamplingStore, labels: Sequence[HumanLabel], rate: float) -> UniformSample:
    """Check that the cases of ``labels`` can be marked as drawn uniformly at ``rate``
    (``labels import --sampled-uniformly``) and say what :func:`record_uniform_sample` will store.

    Refused with :class:`LabelError` naming them when a labelled case was decided by the sampler
    before (a case is decided once), or :class:`ConfigurationError` for a rate outside (0, 1].
    A candidate must be named as graded (the model name).
    """
    rate = check_rate(rate, "--sampled-uniformly")
    wanted: dict[tuple[str, str], set[str]] = {}
    for label in labels:
        wanted.setdefault((label.task, label.candidate), set()).add(label.case_id)
    groups = []
    for (task, candidate), case_ids in wanted.items():
        graders = store.graders(task, candidate)
        if not graders:
            raise LabelError(
                f"--sampled-uniformly: candidate {candidate!r} has no graded case on task {task!r}; "
                "name the candidate model as graded",
                field="candidate",
            )
        already = sorted({case for (_, _, case) in store.decided(task, candidate) if case in case_ids})
        if already:
            shown = ", ".join(repr(c) for c in already[:10]) + (" ..." if len(already) > 10 else "")
            raise LabelError(
                f"--sampled-uniformly: {len(already)} labelled case(s) of {candidate!r} on task {task!r} "
                f"were already decided by the sampler, so they cannot be marked as drawn now: {shown}",
                field="case_id",
            )
        groups += [(task, candidate, gid, frozenset(case_ids)) for gid in graders]
    return UniformSample(rate, tuple(groups))


def record_uniform_sample(store: SamplingStore, sample: UniformSample) -> int:
    """Store a planned uniform sample: for every judge of each (task, candidate), the labelled
    cases chosen with probability ``rate`` and every other graded case not yet decided not
    chosen, with the same probability (the draw the user made). Returns the decisions stored."""
    written = 0
    for task, candidate, gid, case_ids in sample.groups:
        fresh = store.undecided(task, candidate, gid)
        written += store.record(
            task,
            candidate,
            gid,
            [SampledCase(c.case_id, sample.rate, c.case_id in case_ids) for c in fresh],
            strategy="imported",
            rate=sample.rate,
            floor=sample.rate,
            seed=None,
        )
    return written
