"""Public modules export a sorted ``__all__`` whose names all resolve."""

from __future__ import annotations

import importlib

import pytest


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then functions."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


PUBLIC_MODULES = [
    "llm_connect",
    "llm_connect.types",
    "llm_connect.errors",
    "llm_connect.adapters",
    "llm_connect.grading",
    "llm_connect.grading.judges",
    "llm_connect.scoring",
    "llm_connect.scoring.vrty",
    "llm_connect.scoring.rules",
    "llm_connect.scoring.persona",
    "llm_connect.scoring.safety",
    "llm_connect.ledger",
    "llm_connect.labels",
    "llm_connect.routing",
    "llm_connect.calibration",
    "llm_connect.stability",
]


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
