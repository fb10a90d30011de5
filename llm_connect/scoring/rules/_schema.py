"""SchemaScorer: is the response JSON that validates against a JSON Schema?"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llm_connect.errors import CaseDataError, ConfigurationError
from llm_connect.scoring._base import PathResolver, Score, WorkingDirectory
from llm_connect.scoring.rules._common import case_field, check_bool, unfence
from llm_connect.values import Case

__all__ = ["DRAFTS", "SchemaScorer"]

DRAFTS: tuple[str, ...] = ("2020-12", "2019-09", "7", "6", "4", "3")
"""Accepted values of the ``draft`` option (``draft7``/``draft-07`` spellings work too)."""

_MAX_MESSAGE = 300


def _draft_key(value: str) -> str:
    key = str(value).strip().lower().removeprefix("draft").strip("-_ ")
    return key.lstrip("0") if key.isdigit() else key


def _validator_class(draft: str | None, schema: Mapping[str, Any]) -> type[Any]:
    import jsonschema
    from jsonschema import validators

    classes: dict[str, type[Any]] = {
        "2020-12": jsonschema.Draft202012Validator,
        "2019-09": jsonschema.Draft201909Validator,
        "7": jsonschema.Draft7Validator,
        "6": jsonschema.Draft6Validator,
        "4": jsonschema.Draft4Validator,
        "3": jsonschema.Draft3Validator,
    }
    if draft is not None:
        return classes[_draft_key(draft)]
    cls: type[Any] = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls


def _load_schema_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read JSON schema file {str(path)!r}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"JSON schema file {str(path)!r} is not JSON: {exc}") from None


class _Checked:
    """A schema that passed ``check_schema``, with its validator."""

    def __init__(self, schema: Mapping[str, Any], draft: str | None, check_formats: bool) -> None:
        from jsonschema.exceptions import SchemaError

        if not isinstance(schema, Mapping) and not isinstance(schema, bool):
            raise ValueError(f"a JSON schema must be an object, not {type(schema).__name__}")
        cls = _validator_class(draft, schema if isinstance(schema, Mapping) else {})
        try:
            cls.check_schema(schema)
        except SchemaError as exc:
            where = exc.json_path if hasattr(exc, "json_path") else "$"
            raise ValueError(f"invalid JSON schema at {where}: {exc.message}") from None
        checker = cls.FORMAT_CHECKER if check_formats else None
        self.validator = cls(schema, format_checker=checker)
        self.dialect = cls.__name__.removesuffix("Validator")
        self.sha256 = hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()


class SchemaScorer:
    """1.0 when the response is JSON valid against the schema, else 0.0.

    The schema comes from the ``schema`` option (a mapping, or a path to a JSON
    file) or, when that is absent, from the case's ``expected.schema`` (a
    mapping or a path). Validation uses ``jsonschema`` with draft 2020-12
    unless ``draft`` is given or the schema names its own ``$schema``; with
    ``check_formats=True`` ``format`` keywords are asserted too. A response
    wrapped in one Markdown code fence is unwrapped first. ``details["errors"]``
    lists every validation error as ``{"path", "message", "validator"}``
    (``path`` a JSON path such as ``$.items[2].price``), sorted by path.
    """

    def __init__(
        self,
        schema: Mapping[str, Any] | str | Path | None = None,
        *,
        draft: str | None = None,
        check_formats: bool = False,
        context: PathResolver | None = None,
    ) -> None:
        if draft is not None and _draft_key(draft) not in DRAFTS:
            raise ConfigurationError(f"judge 'schema': unknown draft {draft!r} (known: {', '.join(DRAFTS)})")
        self.draft = draft
        self.check_formats = check_bool("schema", "check_formats", check_formats)
        self._context: PathResolver = context or WorkingDirectory()
        self._cache: dict[str, _Checked] = {}
        self._lock = threading.Lock()
        args: dict[str, Any] = {}
        self._fixed: _Checked | None = None
        self.schema_path: Path | None = None
        if schema is not None:
            if isinstance(schema, (str, Path)):
                self.schema_path = self._context.resolve_path(schema).resolve()
                loaded = _load_schema_file(self.schema_path)
                args["schema"] = str(self.schema_path)
                what = f"JSON schema file {str(self.schema_path)!r}"
            elif isinstance(schema, Mapping):
                loaded = dict(schema)
                args["schema"] = loaded
                what = "option 'schema'"
            else:
                raise ConfigurationError(
                    f"judge 'schema': option 'schema' must be a path or a JSON object, not {schema!r}"
                )
            try:
                self._fixed = _Checked(loaded, draft, self.check_formats)
            except ValueError as exc:
                raise ConfigurationError(f"judge 'schema': {what}: {exc}") from None
        if draft is not None:
            args["draft"] = draft
        if self.check_formats:
            args["check_formats"] = True
        self.name = "schema"
        self.spec: Mapping[str, Any] = {"name": "schema", "args": args}

    def __repr__(self) -> str:
        return f"SchemaScorer(schema={self.spec['args'].get('schema', '<from case>')!r})"

    def _for_case(self, case: Case | None) -> _Checked:
        if self._fixed is not None:
            return self._fixed
        raw = case_field(case, "schema")
        case_id = case.id if case is not None else None
        if raw is None:
            raise CaseDataError(
                "no JSON schema: give the judge option 'schema' or the case field expected.schema",
                case_id=case_id,
                field="expected.schema",
            )
        if isinstance(raw, str):
            path = self._context.resolve_path(raw).resolve()
            key = f"path:{path}"
        elif isinstance(raw, (Mapping, bool)):
            path = None
            key = "inline:" + json.dumps(raw, sort_keys=True)
        else:
            raise CaseDataError(
                f"must be a JSON Schema object or a path, not {type(raw).__name__}",
                case_id=case_id,
                field="expected.schema",
            )
        with self._lock:
            checked = self._cache.get(key)
        if checked is not None:
            return checked
        try:
            loaded = _load_schema_file(path) if path is not None else raw
            checked = _Checked(loaded, self.draft, self.check_formats)
        except ValueError as exc:
            raise CaseDataError(str(exc), case_id=case_id, field="expected.schema") from None
        with self._lock:
            self._cache[key] = checked
        return checked

    def score(self, text: str, *, prompt: str, case: Case | None = None) -> Score:
        """Validate ``text``; details hold ``valid``, ``errors``, ``fenced`` and the schema's hash."""
        checked = self._for_case(case)
        body, lang = unfence(text)
        fenced = lang is not None and lang in ("", "json", "jsonc", "json5")
        if not fenced:
            body = text
        details: dict[str, Any] = {
            "fenced": fenced,
            "dialect": checked.dialect,
            "schema_sha256": checked.sha256,
        }
        try:
            instance = json.loads(body)
        except ValueError as exc:
            return Score(0.0, {**details, "valid": False, "parse_error": str(exc), "errors": []})
        errors = sorted(
            (
                {
                    "path": error.json_path,
                    "message": error.message[:_MAX_MESSAGE],
                    "validator": str(error.validator),
                }
                for error in checked.validator.iter_errors(instance)
            ),
            key=lambda e: (e["path"], e["validator"], e["message"]),
        )
        return Score(0.0 if errors else 1.0, {**details, "valid": not errors, "errors": errors})
