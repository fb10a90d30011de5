"""``import_traffic``: production calls in, a suite (and its ``.meta.json``) out.

Per call, in order: a reader's skip is counted by reason (the first few named);
an errored call or one with an empty answer is dropped (counted); credentials are
masked (:mod:`llm_connect._secrets`: shapes in every text, secret-named keys out
of settings and metadata); with ``redact`` personal data is masked
(:mod:`llm_connect.traffic._redact`); the conversation is checked by
:class:`~llm_connect.types.Conversation` (refused: skipped); an exact duplicate
of an earlier conversation is removed unless duplicates are kept; the case is
written, or offered to the sampler. Nothing is sent anywhere.

The suite is written to a temporary file beside the output and renamed into
place at the end, so a failed import (``strict`` and a skip, nothing left after
the filters) leaves no suite behind.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from llm_connect.errors import TrafficImportError
from llm_connect.traffic._call import Deferred, Skip, TrafficCall, call_key
from llm_connect.traffic._draw import RESERVED_KEYS, draw, spare
from llm_connect.traffic._importer import CHECKED, ImportOptions, ImportReport, _Importer
from llm_connect.traffic._json import dumps_line, no_cyclic_gc
from llm_connect.traffic._logs import read_langfuse, read_openai_log
from llm_connect.traffic._otlp import OtlpReader
from llm_connect.traffic._parallel import ParallelOtlp, workers_for
from llm_connect.traffic._parallel_cases import ParallelCases, replay
from llm_connect.traffic._sample import SampleExhausted, Sampler

__all__ = ["FORMATS", "detect_format", "format_of_line", "import_traffic"]

FORMATS = ("otlp-json", "openai-log", "langfuse")
"""The input formats ``suite import`` reads."""

_WHAT = {
    "otlp-json": "OpenTelemetry exports (OTLP JSON)",
    "openai-log": "OpenAI-style log lines",
    "langfuse": "Langfuse observations",
}
"""What a file in each format holds, in words (the reason a format read nothing)."""


META_VERSION = 1
"""The version of the ``.meta.json`` sidecar's layout (bump it when a key changes meaning)."""


def _open(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]  # a binary file object
    return open(path, "rb")


def _first_line(path: Path) -> bytes:
    with _open(path) as fh:
        for raw in fh:
            if raw.strip():
                return raw.strip()
    return b""


def detect_format(path: str | Path) -> str:
    """The format of a traffic file, from its first non-blank line.

    Raises:
        TrafficImportError: the file is empty, unreadable, or in none of :data:`FORMATS`.
    """
    p = Path(path)
    try:
        first = _first_line(p)
    except OSError as exc:
        raise TrafficImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not first:
        raise TrafficImportError(f"{path}: the file is empty")
    return format_of_line(first, str(path))


def format_of_line(first: bytes, path: str) -> str:
    """The format of a traffic file whose first non-blank line is ``first`` (:func:`detect_format`
    on a line already read; ``path`` names the file in the error)."""
    first = first.strip()
    if first[:1] == b"[":
        return "langfuse"  # a JSON document (a list of observations or traces)
    try:
        obj = json.loads(first)
    except ValueError:
        if first[:1] == b"{":
            return "langfuse"  # a pretty-printed JSON document
        raise TrafficImportError(f"{path}: the first line is not JSON; give --format") from None
    if isinstance(obj, Mapping):
        if "resourceSpans" in obj or "resourceLogs" in obj:
            return "otlp-json"
        if "request" in obj or "request_body" in obj or ("messages" in obj and "observations" not in obj):
            return "openai-log"
        if obj.get("type") == "GENERATION" or "observations" in obj or "data" in obj:
            return "langfuse"
    raise TrafficImportError(
        f"{path}: cannot tell the format from the first line; give --format ({', '.join(FORMATS)})"
    )


def _readable_first_line(path: Path) -> bytes:
    """:func:`_first_line`, an unreadable file a :class:`TrafficImportError` naming it."""
    try:
        return _first_line(path)
    except (OSError, EOFError) as exc:  # EOFError: a truncated .gz
        raise TrafficImportError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


def _lines(paths: Sequence[Path]) -> Iterator[tuple[str, int, bytes]]:
    for path in paths:
        with _open(path) as fh:
            for lineno, raw in enumerate(fh, 1):
                if raw.strip():
                    yield str(path), lineno, raw


def _whole_json(path: Path) -> bool:
    first = _first_line(path)
    if first[:1] == b"[":
        return True
    try:
        json.loads(first)
    except ValueError:
        return True
    return False


def _read(
    fmt: str, paths: Sequence[Path], options: ImportOptions, *, defer: bool = False
) -> tuple[Iterator[TrafficCall | Skip | Deferred], Any]:
    if fmt == "otlp-json":
        reader = OtlpReader(options.join_window, defer=defer)
        return reader.read(_lines(paths)), reader
    if fmt == "openai-log":
        return read_openai_log(_lines(paths)), None
    whole = [p for p in paths if _whole_json(p)]
    streamed = [p for p in paths if p not in whole]

    def documents() -> Iterator[tuple[str, bytes]]:
        for p in whole:
            with _open(p) as fh:
                yield str(p), fh.read()

    return read_langfuse(_lines(streamed), documents()), None


# -- one call -> one case -----------------------------------------------------------------


def import_traffic(
    files: Sequence[str | Path],
    output: str | Path,
    options: ImportOptions | None = None,
    *,
    on_progress: Callable[[int], None] | None = None,
    workers: int | None = 1,
    chunk_bytes: int | None = None,
) -> ImportReport:
    """Read production traffic from ``files`` and write a suite to ``output`` (plus ``.meta.json``).

    With ``sample`` (and not ``strict``) only the cases drawn are built
    (:mod:`llm_connect.traffic._draw`); otherwise every call becomes a case first.
    Drawn first or with every case (no ``sample``), large plain OTLP JSON files are read
    by ``workers`` spawned processes (``None``: one per CPU; 1: none) in ranges of
    ``chunk_bytes``; the output is the same (:mod:`llm_connect.traffic._parallel`,
    :mod:`llm_connect.traffic._parallel_cases`; a script needs the ``__main__`` guard).

    Raises:
        TrafficImportError: an unknown or mixed format, a missing file, only empty files, a
            skip under ``strict``, no case left after the filters (when the format read no call,
            saying what the files hold and the format to give; OTLP spans without their
            messages, where they may be), an output that cannot be written. Nothing is written then.
    """
    options = options or ImportOptions()
    _check(options)
    paths = [Path(f) for f in files]
    if not paths:
        raise TrafficImportError("no input files")
    for p in paths:
        if not p.is_file():
            raise TrafficImportError(f"{p}: no such file")
    filled = [p for p in paths if _readable_first_line(p)]  # an empty file has none
    if not filled:
        what = f"{paths[0]}: the file is" if len(paths) == 1 else "the input files are"
        raise TrafficImportError(f"{what} empty; nothing written")
    fmt = options.format
    if fmt is None:
        found = {str(p): detect_format(p) for p in filled}
        if len(set(found.values())) > 1:
            raise TrafficImportError(
                f"the files are in different formats ({found}); import them one format at a time"
            )
        fmt = next(iter(found.values()))
    out = Path(output)
    first = options.sample is not None and not options.strict and options.stratify_by not in RESERVED_KEYS
    every = options.sample is None  # every case: workers build them (_parallel_cases)
    n = workers_for(paths, fmt, draw_first=first or every, workers=workers, chunk_bytes=chunk_bytes)
    with no_cyclic_gc():
        if first:
            try:
                return _run(fmt, paths, options, out, on_progress, draw_first=True, workers=(n, chunk_bytes))
            except SampleExhausted:
                pass  # too many drawn calls were unusable: build every case
        return _run(fmt, paths, options, out, on_progress, draw_first=False, workers=(n, chunk_bytes))


def _run(
    fmt: str,
    paths: Sequence[Path],
    options: ImportOptions,
    out: Path,
    on_progress: Callable[[int], None] | None,
    *,
    draw_first: bool,
    workers: tuple[int, int | None] = (1, None),
) -> ImportReport:
    importer = _Importer(fmt, paths, options, out)
    report = importer.report
    sampler = (
        Sampler(
            options.sample,
            seed=options.seed,
            per_stratum=options.per_stratum,
            keep_duplicates=options.keep_duplicates,
            spare=spare(options.sample) if draw_first else 0,
        )
        if options.sample is not None
        else None
    )
    if workers[0] > 1 and sampler is not None and draw_first:  # OTLP JSON (_parallel.workers_for)
        reader: Any = ParallelOtlp(paths, options, sampler, workers=workers[0], chunk_bytes=workers[1])
        items: Iterator[Any] = reader.read()
    elif workers[0] > 1 and sampler is None:  # every case of OTLP JSON, built by the workers
        reader = ParallelCases(paths, options, workers=workers[0], chunk_bytes=workers[1])
        items = reader.read()
    else:
        items, reader = _read(fmt, paths, options, defer=draw_first)
    try:
        tmp = tempfile.NamedTemporaryFile(  # noqa: SIM115 - renamed or removed below
            "wb", dir=out.absolute().parent, prefix=f".{out.name}.", suffix=".tmp", delete=False
        )
    except OSError as exc:
        raise TrafficImportError(f"{out}: cannot write: {exc.strerror or exc}") from None
    try:
        with tmp:
            if sampler is not None and draw_first:
                for case in draw(items, importer, sampler):
                    _write(tmp, importer, case)
            else:
                for item in items:
                    if type(item) is tuple:  # a worker's case (or drop, or refusal)
                        line = replay(importer, item)
                        if line is not None:
                            tmp.write(line)
                            report.written += 1
                            if on_progress is not None and report.written % 10_000 == 0:
                                on_progress(report.written)
                        continue
                    if isinstance(item, Skip):
                        importer.skip(item)
                        continue
                    assert isinstance(item, TrafficCall)
                    if not importer.admit(item):
                        continue
                    built = importer.build(item)
                    if built is None:
                        continue
                    case = built[0]
                    report.eligible += 1
                    importer.seq += 1
                    if sampler is not None:  # keyed as in draw(): the same seed draws the same sample
                        sampler.offer(importer.stratum(case), call_key(item).hex(), importer.seq, case)
                        continue
                    _write(tmp, importer, case)
                    if on_progress is not None and report.written % 10_000 == 0:
                        on_progress(report.written)
                if sampler is not None:
                    chosen, report.warnings = sampler.result()
                    for case in chosen:
                        _write(tmp, importer, case)
            if sampler is not None:
                report.strata = {
                    name: {"population": s.population, "quota": s.quota, "taken": s.taken}
                    for name, s in sorted(sampler.strata.items())
                }
        if reader is not None:
            report.spans = reader.spans_seen
            for what, n in reader.notes.items():
                importer.note(what, n)
        records = getattr(reader, "genai_records", 0)
        if report.written == 0:
            raise TrafficImportError(_empty_message(report, _wrong_format(fmt, paths, report), records))
        hint = None if records else _messages_hint(report, records)
        if hint is not None:  # some cases written, no log record given: where the rest may be
            importer.note(f"{_NO_INPUT} ({hint})", report.skipped[_NO_INPUT])
        os.replace(tmp.name, out)
    except BaseException:
        Path(tmp.name).unlink(missing_ok=True)
        raise
    _write_meta(report, options)
    return report


def _write(fh: IO[bytes], importer: _Importer, case: dict[str, Any]) -> None:
    importer.unique_id(case)
    line = dumps_line(case, checked=CHECKED)
    if line is None:
        importer.skip(
            Skip(
                "not JSON (NaN or infinity)",
                case["metadata"]["source"]["file"],
                case["metadata"]["source"]["line"],
                str(case["id"]),
            )
        )
        return
    fh.write(line)
    importer.report.written += 1


def _check(options: ImportOptions) -> None:
    if options.format is not None and options.format not in FORMATS:
        raise TrafficImportError(f"unknown format {options.format!r}: one of {', '.join(FORMATS)}")
    if options.sample is not None and options.sample < 1:
        raise TrafficImportError(f"--sample must be >= 1, not {options.sample}")
    if options.stratify_by is not None and options.sample is None:
        raise TrafficImportError("--stratify-by needs --sample N")
    if options.per_stratum and options.stratify_by is None:
        raise TrafficImportError("--per-stratum needs --stratify-by")
    if options.join_window < 1:
        raise TrafficImportError(f"the join window must be >= 1, not {options.join_window}")
    if not options.response_name.strip():
        raise TrafficImportError("the response name must not be empty")


_NO_INPUT = "no input messages"
"""The skip of a span (or log line) without the conversation."""

_LOGS_HINT = (
    "if the instrumentation exports the messages apart from the spans, as OpenTelemetry log "
    "records, give the logs file too: llm-connect suite import SPANS LOGS -o SUITE"
)
"""Where the messages of spans without them usually are, and how to import them."""


def _messages_hint(report: ImportReport, records: int) -> str | None:
    """Where the messages of OTLP spans skipped without them may be (``records``: GenAI log
    records read), or ``None`` when no span was skipped for that."""
    if report.format != "otlp-json" or not report.skipped.get(_NO_INPUT):
        return None
    if not records:
        return f"the files hold no GenAI log record; {_LOGS_HINT}"
    return (
        "the files hold GenAI log records, but a span takes only those that come while it waits "
        "(at most --join-window spans wait at once); if the records come long after their spans, "
        "raise --join-window"
    )


def _wrong_format(fmt: str, paths: Sequence[Path], report: ImportReport) -> str | None:
    """Why ``fmt`` read no call from files that are not empty: another format's shape (named with
    the ``--format`` to give), or nothing of ``fmt``'s shape; ``None`` once a call was read."""
    if report.calls:
        return None
    for path in paths:
        try:
            found = detect_format(path)
        except TrafficImportError:  # empty, or no known shape
            continue
        if found != fmt:
            return f"{path} holds {_WHAT[found]}, not {_WHAT[fmt]}: use --format {found}"
    if not report.skipped:
        return f"no line of the files reads as {_WHAT[fmt]}"
    return None


def _empty_message(report: ImportReport, wrong: str | None = None, records: int = 0) -> str:
    parts = [f"{n} {why}" for why, n in {**report.skipped, **report.dropped}.items()]
    if report.duplicates:
        parts.append(f"{report.duplicates} duplicates")
    read = f"{report.calls} calls" + (f" in {report.spans} spans" if report.spans is not None else "")
    why = f" ({', '.join(parts)})" if parts else ""
    first = f"; first: {report.examples[0]}" if report.examples else ""
    if wrong is not None:
        return f"{wrong}; read {read}{why}; nothing written"
    hint = _messages_hint(report, records)
    hint = "" if hint is None else f". {hint[0].upper()}{hint[1:]}"
    return f"no case left to write: read {read}{why}{first}; nothing written{hint}"


def _write_meta(report: ImportReport, options: ImportOptions) -> None:
    sources = []
    for name in report.files:
        try:
            size: int | None = os.path.getsize(name)
        except OSError:
            size = None
        sources.append({"file": name, "bytes": size})
    meta = {
        "version": META_VERSION,
        "suite": report.output,
        "format": report.format,
        "sources": sources,
        "options": asdict(options),
        "counts": {
            k: v
            for k, v in report.to_dict().items()
            if k not in ("output", "meta", "format", "files", "warnings")
        },
        "warnings": report.warnings,
    }
    try:
        Path(report.meta).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as exc:
        raise TrafficImportError(f"{report.meta}: cannot write: {exc.strerror or exc}") from None
