"""Helpers shared by the rule-based scorers: option checks, case data, text matching."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from llm_connect.errors import CaseDataError, ConfigurationError
from llm_connect.values import Case

__all__ = [
    "case_field",
    "case_string_list",
    "check_bool",
    "check_string_list",
    "compile_phrase",
    "normalize_text",
    "unfence",
]

# A whole response that is one Markdown code fence: ```lang\n...\n``` (or ~~~).
_FENCE = re.compile(
    r"\A\s*(?P<marker>`{3,}|~{3,})[ \t]*(?P<lang>[\w.+-]*)[ \t]*\r?\n"
    r"(?P<body>.*?)\r?\n?[ \t]*(?P=marker)\s*\Z",
    re.DOTALL,
)
_WHITESPACE = re.compile(r"\s+")


def check_bool(judge: str, option: str, value: Any) -> bool:
    """``value`` as a bool; only real booleans are accepted (``normalize=true`` on the CLI)."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"judge {judge!r}: option {option!r} must be true or false, not {value!r}")
    return value


def check_string_list(judge: str, option: str, value: Any, *, allow_empty: bool = False) -> tuple[str, ...]:
    """A list of non-empty strings (a single string counts as a list of one)."""
    items: Sequence[Any] = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in items):
        raise ConfigurationError(
            f"judge {judge!r}: option {option!r} must be a list of non-empty strings, not {value!r}"
        )
    if not items and not allow_empty:
        raise ConfigurationError(f"judge {judge!r}: option {option!r} must not be empty")
    return tuple(v.strip() for v in items)


def case_field(case: Case | None, key: str) -> Any:
    """``case.expected[key]`` (``None`` when absent). A string or number ``expected`` is the ``answer``."""
    if case is None or case.expected is None:
        return None
    expected = case.expected
    if isinstance(expected, (str, int, float)) and not isinstance(expected, bool):
        return expected if key == "answer" else None
    if isinstance(expected, Mapping):
        return expected.get(key)
    raise CaseDataError(
        f"'expected' must be a string or a mapping, not {type(expected).__name__}",
        case_id=case.id,
        field="expected",
    )


def case_string_list(case: Case | None, key: str) -> tuple[str, ...] | None:
    """``case.expected[key]`` as a tuple of strings, ``None`` when absent."""
    value = case_field(case, key)
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in items):
        raise CaseDataError(
            f"must be a list of non-empty strings, not {value!r}",
            case_id=case.id if case else None,
            field=f"expected.{key}",
        )
    return tuple(v.strip() for v in items)


def unfence(text: str) -> tuple[str, str | None]:
    """``(body, language)`` when the whole text is one Markdown code fence, else ``(text, None)``.

    ``language`` is the fence's info string (``""`` when it has none).
    """
    match = _FENCE.match(text)
    if match is None:
        return text, None
    return match.group("body"), match.group("lang").lower()


def normalize_text(text: str) -> str:
    """Fold for answer comparison: NFKC, case-folded, punctuation dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    return _WHITESPACE.sub(" ", text).strip()


def compile_phrase(phrase: str) -> re.Pattern[str]:
    """A case-insensitive pattern for ``phrase``, word-boundary aware.

    A phrase starting (ending) with a word character must not be preceded
    (followed) by one, so ``cat`` does not match ``concatenate`` while ``C++``
    and ``.NET`` still match; inner whitespace matches any run of whitespace.
    """
    words = phrase.split()
    body = r"\s+".join(re.escape(w) for w in words)
    if re.match(r"\w", phrase.strip()):
        body = r"(?<!\w)" + body
    if re.search(r"\w\Z", phrase.strip()):
        body += r"(?!\w)"
    return re.compile(body, re.IGNORECASE)
