"""Check a judge's options against its factory's signature (:func:`~llm_connect.grading.judges.build_judge`).

An option the factory does not take becomes a :class:`~llm_connect.errors.ConfigurationError`
naming the judge, the option, the closest valid name ("did you mean 'normalize'?") and every
option the judge takes; a value whose type the factory's annotation rules out (``normalize=yes``
for a ``bool``) becomes one naming the type expected, unless the factory's own check names the
option first (it says more: "an integer >= 0"). Only simple annotations are checked
(``bool``, ``int``, ``float``, ``str``, ``list``, ``dict``/``Mapping`` and their unions with
``None``); anything else is left to the factory.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_connect._hints import closest
from llm_connect.errors import ConfigurationError

__all__ = ["WrongType", "check_judge_options", "check_no_unknown", "factory_options", "wrong_type"]

_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def factory_options(factory: Callable[..., Any]) -> tuple[dict[str, inspect.Parameter], bool]:
    """The options a judge factory takes (every named parameter after ``context``), and whether it
    also takes ``**kwargs``. A factory whose signature cannot be read takes anything."""
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):
        return {}, True
    named = {p.name: p for p in params[1:] if p.kind in _KINDS}
    return named, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def check_judge_options(
    name: str, factory: Callable[..., Any], args: Mapping[str, Any], *, strict: bool = False
) -> None:
    """Raise :class:`ConfigurationError` for an option ``factory`` does not take. With ``**kwargs``
    in the signature, names are checked only when ``strict`` (the built-in judges, whose
    ``**unknown`` only collects names to refuse)."""
    named, takes_any = factory_options(factory)
    unknown = [key for key in args if key not in named]
    if unknown and (strict or not takes_any):
        raise ConfigurationError(_unknown_message(name, unknown[0], sorted(named)))


def check_no_unknown(judge: str, unknown: Mapping[str, Any], known: Iterable[str]) -> None:
    """Reject option names a judge does not take (at build time)."""
    if unknown:
        names = ", ".join(sorted(unknown))
        raise ConfigurationError(
            f"judge {judge!r}: unknown option(s) {names} (known: {', '.join(sorted(known))})"
        )


@dataclass(frozen=True)
class WrongType:
    """An option whose value the factory's annotation rules out."""

    option: str
    message: str
    number_for_string: bool
    """A number where a string is annotated: the command line parses ``answer=42`` as JSON, so a
    factory that takes it (the value's text) is left to do so."""


def wrong_type(name: str, factory: Callable[..., Any], args: Mapping[str, Any]) -> WrongType | None:
    """The first option whose value the factory's annotation rules out, or ``None``."""
    named, _ = factory_options(factory)
    for key, value in args.items():
        param = named.get(key)
        expected = None if param is None else _expected(param.annotation)
        if expected is not None and not any(_fits(kind, value) for kind in expected):
            wanted = " or ".join(_WORDS[kind] for kind in expected if kind != "None") or "null"
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            return WrongType(
                key,
                f"judge {name!r}: option {key!r} must be {wanted}, not {value!r}",
                number and "str" in expected,
            )
    return None


def _unknown_message(name: str, option: str, known: list[str]) -> str:
    if not known:
        return f"judge {name!r}: unknown option {option!r}; judge {name!r} takes no options"
    guess = closest(option, known)
    hint = f"; did you mean {guess!r}?" if guess else ""
    return f"judge {name!r}: unknown option {option!r}{hint} (options of {name!r}: {', '.join(known)})"


_WORDS = {
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "list": "a JSON list",
    "dict": "a JSON object",
    "None": "null",
}
_ALIASES = {"Mapping": "dict", "dict": "dict", "list": "list", "Sequence": "list", "tuple": "list"}
_PART = re.compile(r"^(?P<base>[A-Za-z_.]+)(\[.*\])?$")


def _expected(annotation: Any) -> tuple[str, ...] | None:
    """The simple kinds an annotation allows, or ``None`` when it is not simple enough to check."""
    if annotation is inspect.Parameter.empty:
        return None
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None)
    if not isinstance(text, str):
        return None
    kinds: list[str] = []
    for part in _top_level_union(text):
        match = _PART.match(part)
        if match is None:
            return None
        base = match.group("base").rsplit(".", 1)[-1]
        if base in ("bool", "int", "float", "str", "None"):
            kinds.append(base)
        elif base in _ALIASES:
            kinds.append(_ALIASES[base])
        else:
            return None  # Any, Path, a class: the factory checks it
    return tuple(kinds) or None


def _top_level_union(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return parts


def _fits(kind: str, value: Any) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "list":
        return isinstance(value, (list, tuple))
    if kind == "dict":
        return isinstance(value, Mapping)
    return value is None
