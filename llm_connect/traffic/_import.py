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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from llm_connect._secrets import mask_secrets
from llm_connect.errors import TrafficImportError
from llm_connect.traffic._call import Deferred, Skip, TrafficCall, call_key
from llm_connect.traffic._draw import RESERVED_KEYS, draw, spare
from llm_connect.traffic._json import dumps_line, no_cyclic_gc
from llm_connect.traffic._logs import read_langfuse, read_openai_log
from llm_connect.traffic._otlp import DEFAULT_JOIN_WINDOW, OtlpReader
from llm_connect.traffic._parallel import ParallelOtlp, workers_for
from llm_connect.traffic._redact import Redactor, mask_all, mask_request
from llm_connect.traffic._sample import SampleExhausted, Sampler
from llm_connect.types import Conversation, ConversationError

__all__ = ["FORMATS", "ImportOptions", "ImportReport", "detect_format", "import_traffic", "meta_path"]

FORMATS = ("otlp-json", "openai-log", "langfuse")
"""The input formats ``suite import`` reads."""

EXAMPLES = 5
"""How many skipped records a report names (file, line, id)."""

META_VERSION = 1
"""The version of the ``.meta.json`` sidecar's layout (bump it when a key changes meaning)."""


@dataclass(frozen=True)
class ImportOptions:
    """How to turn traffic into a suite (the options of ``llm-connect suite import``)."""

    format: str | None = None
    """One of :data:`FORMATS`; ``None`` detects it from the first file's content."""
    task: str | None = None
    """The task of every case (wins over ``task_from``)."""
    task_from: str | None = None
    """A metadata or attribute key whose value is the case's task (else the model)."""
    sample: int | None = None
    """Keep a random sample of this many cases (``None``: every case)."""
    stratify_by: str | None = None
    """``task``, ``tag`` or a metadata/attribute key: the strata of the sample."""
    per_stratum: bool = False
    """``sample`` cases from every stratum instead of ``sample`` split proportionally."""
    seed: int = 0
    """The sample's seed."""
    keep_duplicates: bool = False
    """Keep exact duplicate conversations (else only the first is kept)."""
    redact: bool = False
    """Mask e-mail addresses, phone and card numbers and IPs with stable placeholders."""
    strict: bool = False
    """Any skipped record fails the import (nothing written)."""
    join_window: int = DEFAULT_JOIN_WINDOW
    """OTLP: spans waiting for their log records at most."""
    response_name: str = "production"
    """The recorded-response name of the production answer."""


@dataclass
class ImportReport:
    """What an import read, kept, skipped and wrote; also the ``counts`` of the ``.meta.json``."""

    output: str
    """The suite written."""
    meta: str
    """The sidecar written."""
    format: str
    """The format read."""
    files: list[str]
    """The files read, in order."""
    calls: int = 0
    """Calls the readers produced (before drops, refusals and duplicates)."""
    spans: int | None = None
    """OTLP: every span read, chat or not."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Records that could not be used, by reason."""
    examples: list[str] = field(default_factory=list)
    """The first few skipped records: ``file:line (id): reason``."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Calls left out on purpose: ``errored call``, ``empty answer``."""
    duplicates: int = 0
    """Exact duplicate conversations removed."""
    eligible: int = 0
    """Cases left after skips, drops and duplicates (what a sample is drawn from)."""
    written: int = 0
    """Cases in the suite."""
    strata: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per stratum: population, quota, taken (sampling only)."""
    warnings: list[str] = field(default_factory=list)
    """Things the user must know (a stratum smaller than asked)."""
    notes: dict[str, int] = field(default_factory=dict)
    """Counts worth a line: answers with tool calls but no tool definitions, masked values."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (``--json``)."""
        return asdict(self)


def meta_path(output: str | Path) -> Path:
    """The sidecar of a suite: ``suite.jsonl`` -> ``suite.meta.json``."""
    p = Path(output)
    return (
        p.with_name(p.name.split(".")[0] + ".meta.json")
        if p.name.split(".")[0]
        else p.with_suffix(".meta.json")
    )


# -- input ------------------------------------------------------------------------------


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


def _lookup(meta: Mapping[str, Any], key: str) -> Any:
    """``key`` in a call's metadata, its attributes, or a dotted path through the metadata."""
    if key in meta:
        return meta[key]
    attrs = meta.get("attributes")
    if isinstance(attrs, Mapping) and key in attrs:
        return attrs[key]
    node: Any = meta
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _mask_messages(messages: list[Any], redactor: Redactor | None) -> list[Any]:
    masked = mask_all(messages)
    return masked if redactor is None else redactor.value(masked)  # type: ignore[no-any-return]


def _response(call: TrafficCall, redactor: Redactor | None) -> dict[str, Any]:
    answer = call.answer
    assert answer is not None
    text = mask_secrets(answer.text)
    calls = [{"name": c["name"], "arguments": mask_secrets(c["arguments"])} for c in answer.tool_calls]
    if redactor is not None:
        text = redactor.text(text)
        calls = [{"name": c["name"], "arguments": redactor.text(c["arguments"])} for c in calls]
    model = answer.model or call.requested_model
    out: dict[str, Any] = {"text": text, "model": model} if model else {"text": text}
    if call.requested_model and model and call.requested_model != model:
        out["requested_model"] = call.requested_model
    if calls:
        out["tool_calls"] = calls
    if answer.prompt_tokens is not None or answer.completion_tokens is not None:
        out["usage"] = {
            "prompt_tokens": answer.prompt_tokens or 0,
            "completion_tokens": answer.completion_tokens or 0,
        }
    for key, value in (("latency_ms", answer.latency_ms), ("cost_usd", answer.cost_usd)):
        if value is not None and value >= 0:
            out[key] = round(value, 3) if key == "latency_ms" else value
    if answer.finish_reason:
        out["finish_reason"] = answer.finish_reason
    return out


class _Importer:
    """The per-call steps (module docstring); keeps the counts for the report."""

    def __init__(self, fmt: str, paths: Sequence[Path], options: ImportOptions, output: Path) -> None:
        self.options = options
        self.report = ImportReport(str(output), str(meta_path(output)), fmt, [str(p) for p in paths])
        self.seen: set[int] = set()
        self.ids: set[int] = set()
        self.seq = 0

    def skip(self, skip: Skip) -> None:
        r = self.report
        r.skipped[skip.reason] = r.skipped.get(skip.reason, 0) + 1
        if len(r.examples) < EXAMPLES:
            detail = f" ({skip.detail})" if skip.detail else ""
            r.examples.append(f"{skip.where}: {skip.reason}{detail}")
        if self.options.strict:
            raise TrafficImportError(
                f"{skip.where}: {skip.reason}{' (' + skip.detail + ')' if skip.detail else ''}; "
                "--strict: nothing written"
            )

    def note(self, what: str, n: int = 1) -> None:
        self.report.notes[what] = self.report.notes.get(what, 0) + n

    def admit(self, call: TrafficCall, *, count: bool = True) -> bool:
        """Whether ``call`` may become a case: errored calls and empty answers are dropped (counted)."""
        r = self.report
        if count:
            r.calls += 1
        if call.error is not None:
            r.dropped["errored call"] = r.dropped.get("errored call", 0) + 1
            return False
        if call.answer is None or call.answer.empty:
            r.dropped["empty answer"] = r.dropped.get("empty answer", 0) + 1
            return False
        return True

    def task(
        self, metadata: Mapping[str, Any], requested: str | None, served: str | None, *, note: bool = True
    ) -> str:
        """The case's task: ``--task``, the ``--task-from`` value, the model asked for, the served one."""
        opts = self.options
        task = opts.task
        if task is None and opts.task_from is not None:
            value = _lookup(metadata, opts.task_from)
            task = None if value is None or value == "" else str(value)
            if task is None and note:
                self.note(f"cases without {opts.task_from!r} (task: the model)")
        return task or requested or served or "default"

    def build(self, call: TrafficCall) -> tuple[dict[str, Any], str] | None:
        """The suite case of an admitted call and its conversation digest, or ``None`` (counted)."""
        r, opts = self.report, self.options
        assert call.answer is not None
        redactor = Redactor() if opts.redact else None
        messages = _mask_messages(call.messages or [], redactor)
        tools = mask_all(call.tools) if call.tools else None
        try:
            conversation = Conversation(messages, tools=tools, tool_choice=call.tool_choice)
        except ConversationError as exc:
            self.skip(Skip("conversation refused", call.file, call.line, call.ref, detail=str(exc)))
            return None
        key = int(conversation.digest[:16], 16)
        if key in self.seen:
            if not opts.keep_duplicates:
                r.duplicates += 1
                return None
        else:
            self.seen.add(key)
        task = self.task(call.metadata, call.requested_model, call.answer.model)
        response = _response(call, redactor)
        if call.answer.tool_calls and not conversation.tools:
            self.note("answers that call tools the trace does not define")
        if redactor is not None:
            for kind, n in redactor.masked.items():
                self.note(f"redacted {kind.lower()} values", n)
        # the lists Conversation checked (it keeps a copy of its own): no second JSON round trip
        case: dict[str, Any] = {"id": call.ref or f"{Path(call.file).name}:{call.line}", "task": task}
        case["messages"] = messages
        if tools:
            case["tools"] = tools
        if call.tool_choice is not None:
            case["tool_choice"] = call.tool_choice
        if call.tags:
            case["tags"] = [mask_secrets(t) for t in call.tags]
        metadata = mask_request(call.metadata)
        metadata["source"] = {"format": r.format, "file": call.file, "line": call.line, "ref": call.ref}
        if call.settings:
            metadata["run_settings"] = mask_request(call.settings)
        case["metadata"] = metadata if redactor is None else redactor.value(metadata)
        case["responses"] = {opts.response_name: response}
        return case, conversation.digest

    def stratum(self, case: Mapping[str, Any]) -> str:
        by = self.options.stratify_by
        if by is None:
            return ""
        if by == "task":
            return str(case["task"])
        if by == "tag":
            return ",".join(sorted(case.get("tags") or ())) or "(untagged)"
        meta = case.get("metadata") or {}
        value = meta.get(by, (meta.get("attributes") or {}).get(by))
        return "(none)" if value is None else str(value)

    def unique_id(self, case: dict[str, Any]) -> None:
        base = str(case["id"])
        n, candidate = 1, base
        while hash(candidate) in self.ids:
            n += 1
            candidate = f"{base}#{n}"
        self.ids.add(hash(candidate))
        case["id"] = candidate


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
    Drawn first, large plain OTLP JSON files are read by ``workers`` spawned processes
    (``None``: one per CPU; 1: none) in ranges of ``chunk_bytes``; the output is the
    same (:mod:`llm_connect.traffic._parallel`; a script needs the ``__main__`` guard).

    Raises:
        TrafficImportError: an unknown or mixed format, a missing file, a skip under
            ``strict``, no case left after the filters, an output that cannot be written.
            Nothing is written then.
    """
    options = options or ImportOptions()
    _check(options)
    paths = [Path(f) for f in files]
    if not paths:
        raise TrafficImportError("no input files")
    for p in paths:
        if not p.is_file():
            raise TrafficImportError(f"{p}: no such file")
    fmt = options.format
    if fmt is None:
        found = {str(p): detect_format(p) for p in paths if _first_line(p)}  # an empty file has none
        if not found:
            raise TrafficImportError("the input files are empty; nothing written")
        if len(set(found.values())) > 1:
            raise TrafficImportError(
                f"the files are in different formats ({found}); import them one format at a time"
            )
        fmt = next(iter(found.values()))
    out = Path(output)
    first = options.sample is not None and not options.strict and options.stratify_by not in RESERVED_KEYS
    n = workers_for(paths, fmt, draw_first=first, workers=workers, chunk_bytes=chunk_bytes)
    with no_cyclic_gc():
        if first:
            try:
                return _run(fmt, paths, options, out, on_progress, draw_first=True, workers=(n, chunk_bytes))
            except SampleExhausted:
                pass  # too many drawn calls were unusable: build every case
        return _run(fmt, paths, options, out, on_progress, draw_first=False)


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
    if workers[0] > 1 and sampler is not None:  # OTLP JSON drawn first (_parallel.workers_for)
        reader = ParallelOtlp(paths, options, sampler, workers=workers[0], chunk_bytes=workers[1])
        items: Iterator[Any] = reader.read()
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
        if report.written == 0:
            raise TrafficImportError(_empty_message(report))
        os.replace(tmp.name, out)
    except BaseException:
        Path(tmp.name).unlink(missing_ok=True)
        raise
    _write_meta(report, options)
    return report


_CHECKED = ("messages", "tools", "tool_choice")
"""Case keys :class:`Conversation` has checked for NaN and infinity."""


def _write(fh: IO[bytes], importer: _Importer, case: dict[str, Any]) -> None:
    importer.unique_id(case)
    line = dumps_line(case, checked=_CHECKED)
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


def _empty_message(report: ImportReport) -> str:
    parts = [f"{n} {why}" for why, n in {**report.skipped, **report.dropped}.items()]
    if report.duplicates:
        parts.append(f"{report.duplicates} duplicates")
    read = f"{report.calls} calls" + (f" in {report.spans} spans" if report.spans is not None else "")
    why = f" ({', '.join(parts)})" if parts else ""
    first = f"; first: {report.examples[0]}" if report.examples else ""
    return f"no case left to write: read {read}{why}{first}; nothing written"


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
