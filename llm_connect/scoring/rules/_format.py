"""FormatScorer: does the response parse as JSON, XML, YAML, Markdown or CSV?"""

from __future__ import annotations

import csv
import functools
import io
import json
from collections.abc import Callable, Mapping
from typing import Any

from llm_connect.errors import ConfigurationError
from llm_connect.scoring._base import Score
from llm_connect.scoring.rules._common import unfence
from llm_connect.values import Case

__all__ = ["ANSWER_FORMATS", "FormatScorer"]

ANSWER_FORMATS: tuple[str, ...] = ("csv", "json", "markdown", "xml", "yaml")
"""The formats :class:`FormatScorer` checks."""

# Fence info strings accepted around each format (besides no info string at all).
_FENCE_LANGS: dict[str, frozenset[str]] = {
    "json": frozenset({"json", "json5", "jsonc"}),
    "xml": frozenset({"xml", "html", "svg"}),
    "yaml": frozenset({"yaml", "yml"}),
    "csv": frozenset({"csv", "tsv", "text", "txt"}),
}
_CSV_DELIMITERS = ",\t;|"
_MARKDOWN_TOKENS: dict[str, str] = {
    "heading_open": "headings",
    "bullet_list_open": "lists",
    "ordered_list_open": "lists",
    "fence": "code_fences",
    "link_open": "links",
    "em_open": "emphasis",
    "strong_open": "emphasis",
    "blockquote_open": "blockquotes",
    "table_open": "tables",
}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_json(body: str) -> dict[str, Any]:
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except ValueError as exc:
        return {"valid": False, "error": str(exc)}
    kinds = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return {"valid": True, "json_type": kinds.get(type(value), "number")}


def _check_xml(body: str) -> dict[str, Any]:
    from xml.etree.ElementTree import ParseError

    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring

    try:
        root = fromstring(body.strip())
    except DefusedXmlException as exc:
        # Entity declarations (billion laughs), external entities: refused, never expanded.
        return {"valid": False, "rejected": type(exc).__name__, "error": str(exc)}
    except ParseError as exc:
        return {"valid": False, "error": str(exc)}
    return {"valid": True, "root": root.tag}


def _check_yaml(body: str) -> dict[str, Any]:
    import yaml

    try:
        value = yaml.safe_load(body)
    except yaml.YAMLError as exc:
        return {"valid": False, "error": " ".join(str(exc).split())}
    if not isinstance(value, (dict, list)):
        return {
            "valid": False,
            "error": f"YAML document is a {type(value).__name__}, not a mapping or list",
        }
    return {"valid": True, "yaml_type": "mapping" if isinstance(value, dict) else "list"}


@functools.cache
def _markdown_parser() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def _check_markdown(body: str) -> dict[str, Any]:
    found: dict[str, int] = {}
    stack = list(_markdown_parser().parse(body))
    while stack:
        token = stack.pop()
        kind = _MARKDOWN_TOKENS.get(token.type)
        if kind is not None:
            found[kind] = found.get(kind, 0) + 1
        if token.children:
            stack.extend(token.children)
    if not found:
        return {"valid": False, "error": "no Markdown structure (headings, lists, code, links, emphasis...)"}
    return {"valid": True, "elements": dict(sorted(found.items()))}


def _check_csv(body: str) -> dict[str, Any]:
    lines = [line for line in body.strip().splitlines() if line.strip()]
    if len(lines) < 2:
        return {"valid": False, "error": "CSV needs a header and at least one data row"}
    sample = "\n".join(lines)
    try:
        delimiter = csv.Sniffer().sniff(sample, delimiters=_CSV_DELIMITERS).delimiter
    except csv.Error:
        # No delimiter is consistent; check the rows against the header's likeliest one.
        counts = {d: lines[0].count(d) for d in _CSV_DELIMITERS}
        delimiter = max(counts, key=lambda d: counts[d])
        if counts[delimiter] == 0:
            return {"valid": False, "error": "no delimiter (, tab ; |) in the header"}
    try:
        rows = list(csv.reader(io.StringIO(sample), delimiter=delimiter))
    except csv.Error as exc:
        return {"valid": False, "error": str(exc)}
    width = len(rows[0])
    if width < 2:
        return {"valid": False, "error": "header has a single column"}
    for index, row in enumerate(rows[1:], start=2):
        if len(row) != width:
            return {
                "valid": False,
                "error": f"row {index} has {len(row)} columns, the header has {width}",
                "delimiter": delimiter,
            }
    return {"valid": True, "delimiter": delimiter, "columns": width, "rows": len(rows) - 1}


_CHECKS: dict[str, Callable[[str], dict[str, Any]]] = {
    "json": _check_json,
    "xml": _check_xml,
    "yaml": _check_yaml,
    "markdown": _check_markdown,
    "csv": _check_csv,
}


class FormatScorer:
    """1.0 when the response is well-formed ``fmt``, else 0.0.

    * ``json`` — the standard library parser (``NaN``/``Infinity`` refused).
    * ``xml`` — ``defusedxml``: entity declarations and external entities are
      rejected (reported under ``rejected``), never expanded.
    * ``yaml`` — ``yaml.safe_load``; the document must be a mapping or a list.
    * ``markdown`` — markdown-it-py (CommonMark + tables) must find structure:
      a heading, list, code fence, link, emphasis, blockquote or table.
    * ``csv`` — header plus at least one data row, at least two columns, every
      row as wide as the header, for the delimiter ``csv.Sniffer`` picks among
      ``, \\t ; |``.

    For json, xml, yaml and csv a response that is exactly one Markdown code
    fence (with a matching or empty info string) is unwrapped first, and
    ``details["fenced"]`` says so.
    """

    def __init__(self, fmt: str = "json") -> None:
        if not isinstance(fmt, str) or fmt.lower() not in _CHECKS:
            known = ", ".join(ANSWER_FORMATS)
            raise ConfigurationError(f"judge 'format': unknown format {fmt!r} (known: {known})")
        self.fmt = fmt.lower()
        self.name = f"format:{self.fmt}"
        self.spec: Mapping[str, Any] = {"name": "format", "args": {"fmt": self.fmt}}

    def __repr__(self) -> str:
        return f"FormatScorer({self.fmt!r})"

    def score(self, text: str, *, prompt: str, case: Case | None = None) -> Score:
        """Check ``text``; details hold ``format``, ``valid``, ``fenced`` and the error if any."""
        body, lang = text, None
        if self.fmt != "markdown":
            unwrapped, lang = unfence(text)
            if lang is not None and (lang == "" or lang in _FENCE_LANGS[self.fmt]):
                body = unwrapped
            else:
                lang = None
        result = _CHECKS[self.fmt](body)
        details: dict[str, Any] = {"format": self.fmt, "fenced": lang is not None, **result}
        return Score(1.0 if result["valid"] else 0.0, details)
