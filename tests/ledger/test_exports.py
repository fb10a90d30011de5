"""The ledger and routing packages re-export a sorted, importable ``__all__``."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("module", ["llm_connect.ledger", "llm_connect.routing"])
def test_all_is_sorted_and_importable(module: str) -> None:
    mod = importlib.import_module(module)
    assert list(mod.__all__) == sorted(mod.__all__)
    for name in mod.__all__:
        assert getattr(mod, name) is not None
