"""The project's JSON options for what it stores: compact, UTF-8 kept, NaN refused.

:class:`~llm_connect.grading.GradingResult` validates its ``details`` with
:func:`strict_dumps`, and the ledger's engine encodes every JSON column with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["strict_dumps"]


def _mapping_as_dict(value: Any) -> Any:
    if isinstance(value, Mapping):  # a read-only mapping (MappingProxyType) nested in a value
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def strict_dumps(value: Any) -> str:
    """``json.dumps`` compact (no spaces, UTF-8 kept as is); NaN and infinities raise ``ValueError``."""
    return json.dumps(
        value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_mapping_as_dict
    )
