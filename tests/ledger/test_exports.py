"""The ledger and routing packages re-export a sorted, importable ``__all__``."""

from __future__ import annotations

import importlib

import pytest


def _isort_key(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("module", ["llm_connect.ledger", "llm_connect.routing"])
def test_all_is_sorted_and_importable(module: str) -> None:
    mod = importlib.import_module(module)
    assert list(mod.__all__) == sorted(mod.__all__, key=_isort_key)
    for name in mod.__all__:
        assert getattr(mod, name) is not None
