"""Every public module exports a sorted ``__all__`` whose names all resolve.

The public modules are found on disk (each package of ``llm_connect``, ``values``, ``report``,
``traffic`` and ``cli`` included, and every module no part of whose name starts with ``_``), so
a new one is covered without being listed.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest


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
