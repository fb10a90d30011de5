"""Old public names kept for one release after a rename, each with a ``DeprecationWarning``.

A package that renamed a public name lists ``{old: new}`` and answers a module attribute that is
not found (``__getattr__``) with :func:`renamed_attribute`. Standard library only: a leaf.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["renamed_attribute"]


def renamed_attribute(
    module: str, renamed: Mapping[str, str], namespace: Mapping[str, Any], name: str
) -> Any:
    """The object ``namespace`` holds under the new name of ``name`` (warning that ``name`` goes in
    the next release), or ``AttributeError`` when ``name`` is no old name of ``module``."""
    if name not in renamed:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new = renamed[name]
    warnings.warn(
        f"{module}.{name} is renamed {new}; the old name goes in the next release",
        DeprecationWarning,
        stacklevel=3,  # the code that asked the module for the old name
    )
    return namespace[new]
