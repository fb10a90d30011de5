"""Cohen's and Fleiss' kappa, against figures computed by hand and scikit-learn's."""

from __future__ import annotations

import numpy as np
import pytest

from llm_connect.labels import CaseLabels, HumanLabel, agreement, cohen_kappa, cohen_kappa_rows, fleiss_kappa
from tests.fixtures.skips import import_or_skip


def test_cohen_kappa_by_hand() -> None:
    # 10 cases. Agreements: 4 candidate, 2 baseline, 1 tie -> p_o = 0.7.
    # a: candidate 5, baseline 3, tie 2; b: candidate 6, baseline 2, tie 2
    # p_e = (5*6 + 3*2 + 2*2) / 100 = 0.40; kappa = (0.7 - 0.4) / 0.6 = 0.5
    a = ["candidate"] * 4 + ["baseline"] * 2 + ["tie"] + ["candidate", "baseline", "tie"]
    b = ["candidate"] * 4 + ["baseline"] * 2 + ["tie"] + ["tie", "candidate", "candidate"]
    assert cohen_kappa(a, b) == pytest.approx(0.5)


def test_cohen_kappa_matches_scikit_learn() -> None:
    metrics = import_or_skip("sklearn.metrics", tests="the comparison with scikit-learn")
    a = ["candidate", "baseline", "tie", "candidate", "candidate", "baseline", "tie", "baseline", "candidate"]
    b = ["candidate", "candidate", "tie", "candidate", "baseline", "baseline", "baseline", "baseline", "tie"]
    assert cohen_kappa(a, b) == pytest.approx(metrics.cohen_kappa_score(a, b))


def test_vectorised_kappa_matches_scikit_learn_on_every_row() -> None:
    metrics = import_or_skip("sklearn.metrics", tests="the comparison with scikit-learn")
    rng = np.random.default_rng(5)
    first = rng.integers(0, 3, size=(50, 30))
    second = np.where(rng.uniform(size=(50, 30)) < 0.5, first, rng.integers(0, 3, size=(50, 30)))
    rows = cohen_kappa_rows(first, second, 3)
    assert rows.shape == (50,)
    for a, b, value in zip(first, second, rows, strict=True):
        assert value == pytest.approx(metrics.cohen_kappa_score(a, b))
    # booleans are the two classes of a pass/fail kappa
    passes, other = first >= 1, second >= 1
    for a, b, value in zip(passes, other, cohen_kappa_rows(passes, other, 2), strict=True):
        assert value == pytest.approx(metrics.cohen_kappa_score(a, b))


def test_vectorised_kappa_is_nan_where_chance_agreement_is_one() -> None:
    same = np.array([[1, 1, 1], [0, 1, 2]])
    rows = cohen_kappa_rows(same, same)
    assert np.isnan(rows[0]) and rows[1] == 1.0
    assert np.isnan(cohen_kappa_rows(np.zeros((2, 0), dtype=np.intp), np.zeros((2, 0), dtype=np.intp))).all()
    assert cohen_kappa_rows(np.array([True, True]), np.array([False, False]), 2).tolist() == [0.0]
    with pytest.raises(ValueError, match="shapes"):
        cohen_kappa_rows(np.zeros((1, 2), dtype=np.intp), np.zeros((1, 3), dtype=np.intp))


def test_kappa_is_undefined_when_every_label_says_the_same() -> None:
    assert cohen_kappa(["tie", "tie"], ["tie", "tie"]) is None
    assert cohen_kappa([], []) is None
    assert fleiss_kappa([[0, 3, 0], [0, 2, 0]]) is None


def test_fleiss_kappa_on_fleiss_worked_example() -> None:
    # The worked example of Fleiss' kappa (Wikipedia, "Fleiss' kappa"): 10 subjects, 14 raters,
    # 5 categories. P_bar = 0.378, P_e = 0.213, kappa = 0.210 (hand computation in the article).
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert fleiss_kappa(table) == pytest.approx(0.20993, abs=5e-5)


def test_fleiss_kappa_small_example_by_hand() -> None:
    # 3 cases x 3 annotators over (candidate, baseline, tie):
    # rows [3,0,0] P=1, [2,1,0] P=(4+1-3)/6=1/3, [0,1,2] P=(1+4-3)/6=1/3 -> P_bar = 5/9
    # p = (5/9, 2/9, 2/9) -> P_e = (25+4+4)/81 = 33/81; kappa = (45/81 - 33/81) / (48/81) = 0.25
    assert fleiss_kappa([[3, 0, 0], [2, 1, 0], [0, 1, 2]]) == pytest.approx(0.25)


def _case(case_id: str, *verdicts: tuple[str, str | float]) -> CaseLabels:
    labels = tuple(
        HumanLabel(
            "qa", case_id, "small", who, **({"score": v} if isinstance(v, float) else {"preference": v})
        )
        for who, v in verdicts
    )
    return CaseLabels("qa", "small", case_id, labels)


def test_agreement_uses_cohen_for_two_annotators_and_splits_scores_at_one_half() -> None:
    cases = [
        _case("c0", ("ana", "candidate"), ("bob", 0.8)),  # both candidate
        _case("c1", ("ana", "baseline"), ("bob", 0.5)),  # baseline / tie
        _case("c2", ("ana", "tie"), ("bob", "tie")),
        _case("c3", ("ana", "baseline"), ("bob", 0.2)),  # both baseline
        _case("c4", ("ana", "candidate")),  # one annotator: not counted
    ]
    found = agreement(cases)
    # ana: candidate, baseline, tie, baseline; bob: candidate, tie, tie, baseline
    # p_o = 3/4; p_e = (1*1 + 2*1 + 1*2) / 16 = 5/16; kappa = (12/16 - 5/16) / (11/16) = 7/11
    assert (found.method, found.cases, found.annotators) == ("cohen", 4, 2)
    assert found.kappa == pytest.approx(7 / 11)
    assert found.observed == pytest.approx(0.75)


def test_agreement_uses_fleiss_for_more_annotators() -> None:
    cases = [
        _case("c0", ("a", "candidate"), ("b", "candidate"), ("c", "candidate")),
        _case("c1", ("a", "candidate"), ("b", "candidate"), ("c", "baseline")),
        _case("c2", ("a", "baseline"), ("b", "tie"), ("c", "tie")),
    ]
    found = agreement(cases)
    assert (found.method, found.cases, found.annotators) == ("fleiss", 3, 3)
    assert found.kappa == pytest.approx(0.25)  # the table of the hand example above
    assert agreement([_case("c0", ("a", "tie"))]).method is None


def test_the_renamed_file_names_still_work_for_one_release_with_a_warning() -> None:
    import llm_connect.labels as labels

    with pytest.warns(DeprecationWarning, match="renamed LABEL_FORMATS"):
        assert labels.FORMATS is labels.LABEL_FORMATS
    with pytest.warns(DeprecationWarning, match="renamed detect_label_format"):
        assert labels.detect_format is labels.detect_label_format
    assert "FORMATS" not in labels.__all__ and "detect_format" not in labels.__all__
    with pytest.raises(AttributeError):
        labels.no_such_name  # noqa: B018
