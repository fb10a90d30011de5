"""Persona files: the YAML that describes a brand voice, validated when loaded."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_connect.scoring._yaml import YamlFile, load_yaml_file

__all__ = ["TRAIT_VALUES", "Persona", "load_persona"]

#: The traits a persona may declare, and the values each may take.
TRAIT_VALUES: dict[str, tuple[str, ...]] = {
    "formality": ("formal", "business_casual", "casual"),
    "tone": ("professional", "friendly", "technical", "conversational"),
    "verbosity": ("concise", "balanced", "detailed"),
}

_TOP_KEYS = ("description", "examples", "id", "lexicon", "name", "traits", "version")


@dataclass(frozen=True)
class Persona:
    """A validated persona: example responses, declared traits and a lexicon."""

    name: str
    """Short name; the judge's grader id is ``persona:<name>``."""
    examples: tuple[str, ...]
    """Responses written in the persona's voice (at least one)."""
    traits: dict[str, str] = field(default_factory=dict)
    """Declared traits (subset of ``formality``, ``tone``, ``verbosity``)."""
    preferred: tuple[str, ...] = ()
    """Words or phrases the voice uses."""
    avoided: tuple[str, ...] = ()
    """Words or phrases the voice never uses."""
    path: Path | None = None
    """The file it was read from."""
    sha256: str | None = None
    """SHA-256 of that file's bytes."""


def _string_list(doc: YamlFile, where: list[str | int], value: Any, *, required: bool) -> tuple[str, ...]:
    if value is None and not required:
        return ()
    if not isinstance(value, list):
        raise doc.error(where, f"must be a list of strings, not {type(value).__name__}")
    if required and not value:
        raise doc.error(where, "must hold at least one entry")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise doc.error([*where, index], f"must be a non-empty string, not {item!r}")
    return tuple(item.strip() for item in value)


def load_persona(path: Path) -> Persona:
    """Read and validate a persona file.

    Raises :class:`~llm_connect.errors.ConfigurationError` naming the file,
    the field and its line for anything malformed: unreadable or invalid
    YAML, a missing ``name`` or ``examples``, an unknown key, trait or trait
    value, a lexicon that is not lists of strings.
    """
    doc = load_yaml_file(path, what="persona file")
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error([], "a persona file must be a mapping (name, examples, traits, lexicon)")
    for key in data:
        if key not in _TOP_KEYS:
            raise doc.error([str(key)], f"unknown key (known: {', '.join(_TOP_KEYS)})")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise doc.error(["name"], f"must be a non-empty string, not {name!r}")
    if any(ch in name for ch in ",:+") or any(ch.isspace() for ch in name.strip()):
        raise doc.error(["name"], f"must not contain spaces, ',', ':' or '+' ({name!r})")
    examples = _string_list(doc, ["examples"], data.get("examples"), required=True)
    traits_raw = data.get("traits") or {}
    if not isinstance(traits_raw, dict):
        raise doc.error(["traits"], "must be a mapping of trait to value")
    traits: dict[str, str] = {}
    for trait, value in traits_raw.items():
        if trait not in TRAIT_VALUES:
            raise doc.error(["traits", str(trait)], f"unknown trait (known: {', '.join(TRAIT_VALUES)})")
        if value not in TRAIT_VALUES[trait]:
            raise doc.error(
                ["traits", trait], f"unknown {trait} {value!r} (known: {', '.join(TRAIT_VALUES[trait])})"
            )
        traits[trait] = value
    lexicon = data.get("lexicon") or {}
    if not isinstance(lexicon, dict):
        raise doc.error(["lexicon"], "must be a mapping with 'preferred' and/or 'avoided' lists")
    for key in lexicon:
        if key not in ("preferred", "avoided"):
            raise doc.error(["lexicon", str(key)], "unknown key (known: preferred, avoided)")
    preferred = _string_list(doc, ["lexicon", "preferred"], lexicon.get("preferred"), required=False)
    avoided = _string_list(doc, ["lexicon", "avoided"], lexicon.get("avoided"), required=False)
    return Persona(
        name=name.strip(),
        examples=examples,
        traits=traits,
        preferred=preferred,
        avoided=avoided,
        path=path,
        sha256=doc.sha256,
    )
