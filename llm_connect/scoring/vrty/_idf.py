"""The IDF table VRTY 1.0.1 scores with, loaded once and checked against its SHA-256.

``data/idf.json.gz`` is VRTY's own table, copied unchanged from the ``vrty``
1.0.1 wheel (MIT licence, see ``data/LICENSE-vrty.txt``). It holds the
smoothed IDF ``ln((N+1)/(df+1)) + 1`` of 32,017 terms over N = 5,391
documents and the 126-word stop-word list. A term outside the table gets the
largest possible IDF, ``ln(N+1) + 1`` (the df = 0 case).

The file is read on first use, not at import; its SHA-256 must equal
:data:`IDF_SHA256`, otherwise :class:`~llm_connect.errors.ScorerDataError`
is raised and nothing is scored.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from llm_connect.errors import ScorerDataError

__all__ = ["IDF_PATH", "IDF_SHA256", "IdfTable", "idf_table", "read_idf_table"]

IDF_SHA256: Final[str] = "0e475bcaa5524d1e26cbb166bb5c138e37f87e1e47b75e6506c6460a94259fd2"
"""SHA-256 of the gzipped bytes of the shipped table (the same as vrty 1.0.1's)."""

IDF_PATH: Final[Path] = Path(__file__).resolve().parent / "data" / "idf.json.gz"
"""Where the shipped table lives."""


@dataclass(frozen=True, slots=True, eq=False)
class IdfTable:
    """The loaded table. Treat ``idf`` as read-only: it is shared by every scorer.

    Compared and hashed by identity, so it can key the prompt cache.
    """

    idf: dict[str, float]
    """Term -> smoothed IDF."""
    oov: float
    """IDF of a term not in ``idf``: ``ln(doc_count + 1) + 1``."""
    stopwords: frozenset[str]
    """Tokens left out of completeness and conciseness."""
    doc_count: int
    """N, the number of corpus documents the IDF was computed over."""
    sha256: str
    """SHA-256 of the file the table was read from."""


def _field(payload: dict[str, Any], name: str, kind: type | tuple[type, ...], path: Path) -> Any:
    value = payload.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ScorerDataError(f"{path}: field {name!r} is missing or malformed", path=str(path))
    return value


def read_idf_table(path: Path, *, expected_sha256: str = IDF_SHA256) -> IdfTable:
    """Read and verify an IDF table file.

    Raises :class:`~llm_connect.errors.ScorerDataError` when the file cannot
    be read, its SHA-256 is not ``expected_sha256``, or its content is not a
    VRTY 1.0.1 table.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ScorerDataError(f"cannot read VRTY IDF table {path}: {exc}", path=str(path)) from None
    actual = hashlib.sha256(raw).hexdigest()
    if actual != expected_sha256:
        raise ScorerDataError(
            f"VRTY IDF table {path} failed its integrity check: SHA-256 is {actual}, "
            f"expected {expected_sha256}. The file was modified or corrupted; "
            "reinstall llm-connect to restore it.",
            path=str(path),
        )
    try:
        payload = json.loads(gzip.decompress(raw).decode("ascii"))
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise ScorerDataError(f"VRTY IDF table {path} is unreadable: {exc}", path=str(path)) from None
    if not isinstance(payload, dict):
        raise ScorerDataError(f"{path}: the table is not a JSON object", path=str(path))
    doc_count = _field(payload, "doc_count", int, path)
    idf = _field(payload, "idf", dict, path)
    stopwords = _field(payload, "stopwords", list, path)
    file_oov = _field(payload, "idf_oov", (int, float), path)
    if len(idf) != _field(payload, "vocab_size", int, path):
        raise ScorerDataError(f"{path}: 'vocab_size' does not match the number of terms", path=str(path))
    oov = math.log(doc_count + 1) + 1
    if float(file_oov) != oov:
        raise ScorerDataError(f"{path}: 'idf_oov' is not ln(doc_count + 1) + 1", path=str(path))
    return IdfTable(
        idf={str(term): float(value) for term, value in idf.items()},
        oov=oov,
        stopwords=frozenset(str(word) for word in stopwords),
        doc_count=doc_count,
        sha256=actual,
    )


_lock = threading.Lock()
_table: IdfTable | None = None


def idf_table() -> IdfTable:
    """The shipped table, read and verified on the first call only."""
    global _table
    table = _table
    if table is None:
        with _lock:
            if _table is None:
                _table = read_idf_table(IDF_PATH)
            table = _table
    return table
