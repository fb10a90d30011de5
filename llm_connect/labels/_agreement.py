"""Agreement between annotators: Cohen's kappa (two), Fleiss' kappa (more).

Both measure agreement beyond chance on the three verdicts a label reduces to
(``candidate``, ``baseline``, ``tie``; a score counts as the verdict it stands
for, split at 0.5: :func:`~llm_connect.values.score_verdict`).

* Cohen (1960), two annotators who labelled the same cases:
  ``kappa = (p_o - p_e) / (1 - p_e)``, ``p_o`` the share of cases they agree on,
  ``p_e = sum_k a_k * b_k`` with ``a_k``, ``b_k`` each annotator's share of class ``k``.
* Fleiss (1971), any number of annotators per case: for case ``i`` with ``n_i`` labels of
  which ``n_ij`` say class ``j``, ``P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1))``,
  ``P_bar`` the mean of ``P_i``, ``p_j = sum_i n_ij / sum_i n_i``, ``P_e = sum_j p_j^2`` and
  ``kappa = (P_bar - P_e) / (1 - P_e)``. With the same number of labels on every case this is
  Fleiss' kappa exactly; with different numbers each case's ``P_i`` uses its own ``n_i`` (the
  usual extension).

Either is undefined (``None``) when chance agreement is 1: every label says the same class.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from llm_connect.values import PREFERENCES, CaseLabels

__all__ = ["Agreement", "agreement", "cohen_kappa", "fleiss_kappa"]


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """Cohen's kappa of two annotators' verdicts on the same cases (``first[i]``, ``second[i]``).

    ``None`` when there are no cases or chance agreement is 1 (both always say one same class).
    """
    if len(first) != len(second):
        raise ValueError(f"the two annotators label {len(first)} and {len(second)} cases")
    n = len(first)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    count_a, count_b = Counter(first), Counter(second)
    chance = sum(count_a[k] * count_b[k] for k in count_a) / (n * n)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1.0 - chance)


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
