"""Reading the scorers' YAML files (persona, safety patterns) with line numbers for errors."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_connect.errors import ConfigurationError

__all__ = ["YamlFile", "load_yaml_file"]


class YamlFile:
    """A parsed YAML file that can name the line of any field in its errors."""

    def __init__(self, path: Path, data: Any, root: Any, sha256: str) -> None:
        self.path = path
        self.data = data
        self._root = root
        self.sha256 = sha256

    def line_of(self, field_path: Sequence[str | int]) -> int | None:
        """The 1-based line where the field at ``field_path`` starts (its deepest known parent)."""
        import yaml

        node = self._root
        line = None if node is None else node.start_mark.line + 1
        for part in field_path:
            nxt = None
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                for key, value in node.value:
                    if isinstance(key, yaml.ScalarNode) and key.value == part:
                        nxt, line = value, key.start_mark.line + 1
                        break
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                nxt = node.value[part]
                line = nxt.start_mark.line + 1
            if nxt is None:
                break
            node = nxt
        return line

    def error(self, field_path: Sequence[str | int], message: str) -> ConfigurationError:
        """A :class:`ConfigurationError` naming this file, the field and its line."""
        name = ""
        for part in field_path:
            name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else part)
        line = self.line_of(field_path)
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        return ConfigurationError(f"{where}: field {name or '<top>'!r}: {message}")


def load_yaml_file(path: Path, *, what: str) -> YamlFile:
    """Read and parse ``path`` (``what`` names the kind of file in errors)."""
    import yaml

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"cannot read {what} {str(path)!r}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"{what} {str(path)!r} is not UTF-8: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigurationError(f"{where}: {what} is not valid YAML: {problem}") from None
    return YamlFile(path, data, root, hashlib.sha256(raw).hexdigest())
