"""Every public module exports a sorted ``__all__`` whose names all resolve.

The public modules are found on disk (each package of ``llm_connect``, ``values``, ``report``,
``traffic`` and ``cli`` included, and every module no part of whose name starts with ``_``), so
a new one is covered without being listed.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from pathlib import Path

import pytest

from tests.test_import_circles import package_of
from tests.test_layers import RANK


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then functions."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


PACKAGE = Path(__file__).resolve().parents[1] / "llm_connect"


def _public_modules() -> list[str]:
    """Every module of llm_connect no part of whose name starts with ``_``: each package (its
    ``__init__``) and each public module, found on disk so that a new one is covered too."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not any(part.startswith("_") for part in parts):
            found.append(".".join(parts))
    return found


PUBLIC_MODULES = _public_modules()


def test_every_package_is_covered() -> None:
    packages = {f"llm_connect.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    assert {"llm_connect.values", "llm_connect.report", "llm_connect.traffic"} <= packages
    assert {"llm_connect", *packages} <= set(PUBLIC_MODULES)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key), f"{name}.__all__ is not sorted"
    for member in exported:
        assert getattr(module, member) is not None, f"{name}.{member}"


def test_every_error_derives_from_the_base() -> None:
    from llm_connect import errors

    for member in errors.__all__:
        assert issubclass(getattr(errors, member), errors.LLMConnectError)


def test_validation_style_errors_are_value_errors() -> None:
    from llm_connect import errors

    for cls in (
        errors.GradingValidationError,
        errors.JudgeOutputError,
        errors.SuiteError,
        errors.ConfigurationError,
    ):
        assert issubclass(cls, ValueError)


# -- one meaning per public name (issue 36, item 1: one vocabulary) ---------------------------------

_VALUES_LABELS = "labels: the label value types, so label code needs one import"
_LEDGER_LABELS = "labels: the label stores it reads and writes, kept in the ledger"
_DECISION = "routing: the value types Router.decide returns"
_POLICY = "routing: the policy it routes by"
_TOP = "llm_connect: the quick-start names at the top"
REEXPORTS: dict[str, str] = {
    "CaseLabels": _VALUES_LABELS,
    "HumanLabel": _VALUES_LABELS,
    "LABEL_FIELDS": _VALUES_LABELS,
    "PREFERENCES": _VALUES_LABELS,
    "score_verdict": _VALUES_LABELS,
    "LabelCounts": _LEDGER_LABELS,
    "LabelStore": _LEDGER_LABELS,
    "LabelWrite": _LEDGER_LABELS,
    "SamplingStore": _LEDGER_LABELS,
    "CandidateEvidence": _DECISION,
    "GraderEvidence": _DECISION,
    "IgnoredGrader": _DECISION,
    "RoutingDecision": _DECISION,
    "SliceDecision": _DECISION,
    "SliceDecisions": _DECISION,
    "SliceError": _DECISION,
    "PolicyError": _POLICY,
    "RoutingPolicy": _POLICY,
    "ExactMatchJudge": _TOP,
    "Judge": _TOP,
    "PairedGrader": _TOP,
    "QualityLedger": _TOP,
    "Router": _TOP,
    "Case": "grading: the case a judge reads (defined in values, as scorers read it too)",
    "GradingResult": "grading and llm_connect: the result every judge returns",
    "NotApplicable": "grading: what a judge raises when it cannot grade a case",
    "validate_quality_score": "grading: how a judge checks the score it gives",
}
"""Names exported by more than one package on purpose: the same object, defined below and
re-exported higher up, with the reason. A package and its subpackages count as one package."""

KNOWN_CLASHES: dict[str, str] = {}
"""Names two packages export with different meanings, left to rename: each fails the test once
renamed (remove it here then), and a new clash fails it too."""


def _exporters() -> dict[str, list[str]]:
    """Each name in a public package's ``__all__``, with the packages that export it."""
    found: dict[str, list[str]] = defaultdict(list)
    for name in PUBLIC_MODULES:
        if (PACKAGE.parent.joinpath(*name.split(".")) / "__init__.py").is_file():
            for member in importlib.import_module(name).__all__:
                found[member].append(name)
    return found


def _objects(member: str, packages: list[str]) -> list[object]:
    return [getattr(importlib.import_module(name), member) for name in packages]


def test_each_public_name_is_exported_by_exactly_one_package() -> None:
    clashes: dict[str, list[str]] = {}
    for member, packages in sorted(_exporters().items()):
        if len(packages) < 2:
            continue
        objects = _objects(member, packages)
        if any(obj is not objects[0] for obj in objects):
            clashes[member] = packages
            continue
        if len({package_of(name) for name in packages}) < 2:
            continue  # a package re-exports its own subpackage's name (llm_connect.scoring.rules)
        assert member in REEXPORTS, (
            f"{member} is exported by {', '.join(packages)}: export it from one, "
            "or list it in REEXPORTS with the reason"
        )
        home = getattr(objects[0], "__module__", None)  # classes and functions know their package
        if isinstance(home, str) and package_of(home) in RANK:
            owner = package_of(home)
            for name in packages:
                if package_of(name) != owner:
                    assert RANK[package_of(name)] > RANK[owner], f"{name} re-exports {member} from above"
    unexpected = {m: p for m, p in clashes.items() if m not in KNOWN_CLASHES}
    assert not unexpected, f"one name, different objects (give each its own name): {unexpected}"
    renamed = sorted(set(KNOWN_CLASHES) - set(clashes))
    assert not renamed, f"no longer clash (remove from KNOWN_CLASHES): {renamed}"


def test_every_listed_reexport_is_one_object_in_several_packages() -> None:
    exporters = _exporters()
    for member in REEXPORTS:
        packages = exporters.get(member, [])
        assert len({package_of(name) for name in packages}) >= 2, (
            f"{member} is exported by {packages} only: remove it from REEXPORTS"
        )
        objects = _objects(member, packages)
        assert all(obj is objects[0] for obj in objects), member
