"""Whether an optional package (an extra's) can be imported, checked without importing it."""

from __future__ import annotations

import importlib.util

__all__ = ["importable"]


def importable(name: str) -> bool:
    """Whether the top-level module ``name`` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules holds None (import blocked)
        return False
