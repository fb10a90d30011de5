"""Labels files: JSON Lines or CSV with the fields of :data:`~llm_connect.values.LABEL_FIELDS`.

A line holds ``task``, ``case_id``, ``candidate``, and ``preference`` or ``score``;
``annotator``, ``note``, ``run_id`` and ``created_at`` (ISO 8601) are optional
(an ``annotator`` given to the reader fills lines that name none). A file whose lines hold
``better`` is a labelling sheet (``_sheet``, :data:`~llm_connect.labels._sheet.SHEET_FIELDS`):
``better`` 1, 2 or tie becomes the preference, a blank one is skipped (not labelled yet), and
the prompt and answers are not read. The format comes from the extension (``.jsonl``,
``.ndjson``, ``.json``; ``.csv``), else from the first character (``{``: JSON Lines). Every
error names the file, the line and the field; reading stops at the first.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from llm_connect.errors import LabelError
from llm_connect.labels._sheet import SHEET_FIELDS, sheet_preference
from llm_connect.values import LABEL_FIELDS, HumanLabel

__all__ = [
    "LABEL_FORMATS",
    "detect_label_format",
    "read_label_file",
    "read_label_lines",
    "read_labels",
    "write_labels",
]

#: The formats a labels file may have.
LABEL_FORMATS: tuple[str, ...] = ("jsonl", "csv")
_EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}
_REQUIRED = ("task", "case_id", "candidate")


def detect_label_format(path: str | Path, text: str) -> str:
    """``jsonl`` or ``csv``: by the extension of ``path``, else by the first non-blank character."""
    by_extension = _EXTENSIONS.get(Path(path).suffix.lower())
    if by_extension is not None:
        return by_extension
    return "jsonl" if text.lstrip().startswith("{") else "csv"


def read_label_lines(
    path: str | Path, *, annotator: str | None = None, format: str | None = None
) -> list[tuple[int, HumanLabel]]:
    """Every label of the file at ``path`` with its line number (counted from 1); a sheet's
    rows whose ``better`` is blank are not labels and are left out.

    Raises:
        LabelError: the file cannot be read, or a line is malformed (``path``, ``line`` and
            ``field`` name it): a missing or unknown field, an unknown preference, a score that
            is not a number from 0 to 1, no annotator on the line and none given.
    """
    return read_label_file(path, annotator=annotator, format=format)[0]


def read_label_file(
    path: str | Path, *, annotator: str | None = None, format: str | None = None
) -> tuple[list[tuple[int, HumanLabel]], int]:
    """:func:`read_label_lines`, and how many rows of a labelling sheet have no ``better`` yet
    (0 for a plain labels file), from one read of the file."""
    name = str(path)
    out = []
    waiting = 0
    for line, record in _records(path, format):
        try:
            label = _label(record, annotator)
        except LabelError as exc:
            raise exc.located(name, line) from None
        if label is None:
            waiting += 1
        else:
            out.append((line, label))
    return out, waiting


def _records(path: str | Path, format: str | None) -> Iterator[tuple[int, dict[str, Any]]]:
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelError(f"cannot read the labels file: {exc}", path=name) from None
    fmt = format or detect_label_format(path, text)
    if fmt not in LABEL_FORMATS:
        raise LabelError(f"unknown labels format {fmt!r} (one of {', '.join(LABEL_FORMATS)})", path=name)
    return _jsonl_records(text, name) if fmt == "jsonl" else _csv_records(text, name)


def read_labels(
    path: str | Path, *, annotator: str | None = None, format: str | None = None
) -> list[HumanLabel]:
    """Every label of the labels file at ``path`` (see :func:`read_label_lines`)."""
    return [label for _, label in read_label_lines(path, annotator=annotator, format=format)]


def _jsonl_records(text: str, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise LabelError(f"not JSON: {exc.msg} at column {exc.colno}", path=name, line=line) from None
        if not isinstance(record, dict):
            raise LabelError(f"a JSON object is needed, not {type(record).__name__}", path=name, line=line)
        _check_fields(record, name, line)
        yield line, record


def _csv_records(text: str, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if reader.fieldnames is None:
        return
    header = {field: "" for field in reader.fieldnames}
    _check_fields(header, name, 1)
    start = reader.line_num + 1
    for row in reader:
        if None in row:  # more cells than the header names
            raise LabelError(f"{len(row[None])} more cells than the header has fields", path=name, line=start)
        yield start, {k: (None if v in ("", None) else v) for k, v in row.items()}
        start = reader.line_num + 1


def _check_fields(record: dict[str, Any], name: str, line: int) -> None:
    sheet = "better" in record
    fields = SHEET_FIELDS if sheet else LABEL_FIELDS
    unknown = [field for field in record if field not in fields]
    if unknown:
        what = "a labelling sheet's row" if sheet else "a label"
        raise LabelError(
            f"unknown field ({what} has {', '.join(fields)})", path=name, line=line, field=unknown[0]
        )
    for field in _REQUIRED:
        if field not in record:
            raise LabelError("missing", path=name, line=line, field=field)
    if not sheet and "preference" not in record and "score" not in record:
        raise LabelError(
            "missing: a label holds a preference or a score", path=name, line=line, field="preference"
        )


def _text(record: dict[str, Any], field: str) -> str | None:
    value = record.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise LabelError(f"must be text, not {json.dumps(value)}", field=field)
    return str(value)


def _label(record: dict[str, Any], annotator: str | None) -> HumanLabel | None:
    for field in _REQUIRED:
        if record.get(field) in (None, ""):
            raise LabelError("is empty", field=field)
    task, case_id, candidate = (str(_text(record, f)) for f in _REQUIRED)
    preference = _text(record, "preference")
    if "better" in record:  # a labelling sheet's row: blank is not labelled yet
        preference = sheet_preference(record["better"], task, case_id, candidate)
        if preference is None:
            return None
    who = _text(record, "annotator") or annotator
    if not who:
        raise LabelError("no annotator: name one on the line or give --annotator NAME", field="annotator")
    return HumanLabel(
        task=task,
        case_id=case_id,
        candidate=candidate,
        annotator=who,
        preference=preference,
        score=_number(record.get("score")),
        note=_text(record, "note"),
        run_id=_text(record, "run_id"),
        created_at=_when(record.get("created_at")),
    )


def _number(value: Any) -> Any:
    """A CSV cell's text as a float; anything else is left to :class:`HumanLabel` to check."""
    if not isinstance(value, str):
        return value
    try:
        return float(value)
    except ValueError:
        raise LabelError(f"{value!r} is not a number from 0 to 1", field="score") from None


def _when(value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        raise LabelError(f"{value!r} is not an ISO 8601 time", field="created_at") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def write_labels(labels: Iterable[HumanLabel], out: IO[str], format: str = "jsonl") -> int:
    """Write ``labels`` to ``out`` as JSON Lines or CSV (fields in :data:`LABEL_FIELDS` order,
    a missing value an empty cell); returns how many. What it writes reads back as the same
    labels (:func:`read_labels`)."""
    if format not in LABEL_FORMATS:
        raise ValueError(f"labels format must be one of {', '.join(LABEL_FORMATS)}, not {format!r}")
    count = 0
    if format == "jsonl":
        for label in labels:
            out.write(json.dumps(label.to_dict(), ensure_ascii=False) + "\n")
            count += 1
        return count
    writer = csv.DictWriter(out, fieldnames=list(LABEL_FIELDS), lineterminator="\n")
    writer.writeheader()
    for label in labels:
        writer.writerow({k: "" if v is None else v for k, v in label.to_dict().items()})
        count += 1
    return count
