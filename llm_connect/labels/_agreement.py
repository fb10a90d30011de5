"""Agreement between annotators: Cohen's kappa (two), Fleiss' kappa (more).

Both measure agreement beyond chance on the three verdicts a label reduces to
(``candidate``, ``baseline``, ``tie``; a score counts as the verdict it stands
for, split at 0.5: :func:`~llm_connect.values.score_verdict`).

* Cohen (1960), two annotators who labelled the same cases:
  ``kappa = (p_o - p_e) / (1 - p_e)``, ``p_o`` the share of cases they agree on,
  ``p_e = sum_k a_k * b_k`` with ``a_k``, ``b_k`` each annotator's share of class ``k``.
  :func:`cohen_kappa_rows` is the one implementation, vectorised over rows of integer class
  codes (bootstrap resamples); :func:`cohen_kappa` and the calibration figures call it.
* Fleiss (1971), any number of annotators per case: for case ``i`` with ``n_i`` labels of
  which ``n_ij`` say class ``j``, ``P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1))``,
  ``P_bar`` the mean of ``P_i``, ``p_j = sum_i n_ij / sum_i n_i``, ``P_e = sum_j p_j^2`` and
  ``kappa = (P_bar - P_e) / (1 - P_e)``. With the same number of labels on every case this is
  Fleiss' kappa exactly; with different numbers each case's ``P_i`` uses its own ``n_i`` (the
  usual extension).

Either is undefined (``None``) when chance agreement is 1: every label says the same class.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from llm_connect.values import PREFERENCES, CaseLabels

__all__ = ["Agreement", "agreement", "cohen_kappa", "cohen_kappa_rows", "fleiss_kappa"]


def cohen_kappa_rows(
    first: NDArray[np.integer] | NDArray[np.bool_],
    second: NDArray[np.integer] | NDArray[np.bool_],
    classes: int | None = None,
) -> NDArray[np.float64]:
    """Cohen's kappa of each row's two class codes (``0..classes-1``), for every row at once.

    ``first`` and ``second`` have one row per sample (a bootstrap resample, or a single row)
    and one column per case; booleans count as the two classes 0 and 1. ``p_o`` is the share of
    equal codes, ``p_e = sum_c p_first(c) p_second(c)`` (Cohen 1960), both computed from integer
    counts, so ``p_e`` is exactly 1 only when both sides give every case one same class: those
    rows (and rows without cases) are NaN. ``classes`` defaults to the largest code plus one.
    """
    a = np.atleast_2d(np.asarray(first))
    b = np.atleast_2d(np.asarray(second))
    if a.shape != b.shape:
        raise ValueError(f"the two sides have shapes {a.shape} and {b.shape}")
    n = a.shape[1]
    if n == 0:
        return np.full(a.shape[0], np.nan)
    k = int(max(a.max(), b.max())) + 1 if classes is None else classes
    same = np.count_nonzero(a == b, axis=1)
    both = np.zeros(a.shape[0], dtype=np.int64)
    for c in range(k):
        both += np.count_nonzero(a == c, axis=1).astype(np.int64) * np.count_nonzero(b == c, axis=1)
    po = same / n
    pe = both / (n * n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pe < 1.0, (po - pe) / np.where(pe < 1.0, 1.0 - pe, 1.0), np.nan)


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """Cohen's kappa of two annotators' verdicts on the same cases (``first[i]``, ``second[i]``).

    ``None`` when there are no cases or chance agreement is 1 (both always say one same class).
    Any labels will do: they are coded as integers and passed to :func:`cohen_kappa_rows`.
    """
    if len(first) != len(second):
        raise ValueError(f"the two annotators label {len(first)} and {len(second)} cases")
    if not first:
        return None
    code = {label: i for i, label in enumerate(sorted(set(first) | set(second)))}
    value = float(
        cohen_kappa_rows(
            np.array([code[v] for v in first], dtype=np.intp),
            np.array([code[v] for v in second], dtype=np.intp),
            len(code),
        )[0]
    )
    return None if math.isnan(value) else value


def fleiss_kappa(table: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of a table with one row per case and one column per class (``table[i][j]``:
    how many annotators put case ``i`` in class ``j``).

    Rows with fewer than two labels are left out. ``None`` when no row is left or chance
    agreement is 1.
    """
    rows = [list(row) for row in table if sum(row) >= 2]
    if not rows:
        return None
    per_case = [(sum(c * c for c in row) - sum(row)) / (sum(row) * (sum(row) - 1)) for row in rows]
    observed = sum(per_case) / len(per_case)
    total = sum(sum(row) for row in rows)
    chance = sum((sum(row[j] for row in rows) / total) ** 2 for j in range(len(rows[0])))
    if chance >= 1.0:
        return None
    return (observed - chance) / (1.0 - chance)


@dataclass(frozen=True)
class Agreement:
    """How well a group's annotators agree with each other, on cases two or more labelled."""

    method: str | None
    """``"cohen"`` (exactly two annotators), ``"fleiss"`` (more), ``None`` (no case has two labels)."""
    kappa: float | None
    """The kappa of :attr:`method`; ``None`` when there is none or it is undefined."""
    cases: int
    """Cases labelled by two or more annotators (the cases the kappa is computed on)."""
    annotators: int
    """Distinct annotators of those cases."""
    observed: float | None
    """The raw share of agreement: pairs of labels of a case that say the same verdict."""


def agreement(cases: Iterable[CaseLabels]) -> Agreement:
    """The annotators' agreement on the verdicts of the cases two or more of them labelled.

    Cohen's kappa when exactly two annotators labelled those cases, Fleiss' kappa when more did.
    Scores count as the verdict they stand for (above 0.5 candidate, below baseline, 0.5 tie).
    """
    shared = [case for case in cases if case.annotators >= 2]
    people = sorted({label.annotator for case in shared for label in case.labels})
    if not shared:
        return Agreement(None, None, 0, 0, None)
    table = [[Counter(label.verdict for label in case.labels)[k] for k in PREFERENCES] for case in shared]
    pairs = [(sum(c * c for c in row) - sum(row)) / (sum(row) * (sum(row) - 1)) for row in table]
    observed = sum(pairs) / len(pairs)
    if len(people) == 2:
        by_person = [{label.annotator: label.verdict for label in case.labels} for case in shared]
        kappa = cohen_kappa([v[people[0]] for v in by_person], [v[people[1]] for v in by_person])
        return Agreement("cohen", kappa, len(shared), 2, observed)
    return Agreement("fleiss", fleiss_kappa(table), len(shared), len(people), observed)
