"""Large OTLP JSON files on several cores, for ``--sample`` drawn first.

The sequential import of a sample (:mod:`llm_connect.traffic._draw`) parses each
line, probes each chat span (key of its conversation's source text, failed,
empty answer, models) and offers it to the reservoir; the parse and the probes
are most of the time. Here worker processes do that for byte ranges of the
files, and the parent consumes what they found in file order, as the sequential
reader would have produced it, so that the suite, its ``.meta.json``, the counts
and the skips named are the same bytes:

* a file is cut into ranges of ``chunk_bytes``; a line belongs to the range it
  starts in (a range's worker reads past its end to finish its last line);
* a worker gives, per range: the lines it owns, the spans it read, the
  reader's skips (line numbers counted from the range's first line), and per
  chat span its probe, stratum, span id and place (line offset, resource,
  scope and span index); the parent renumbers the lines and yields the skips
  and a :class:`_Remote` reference per chat span to :func:`draw`, which counts,
  removes duplicates and offers them to the sampler as it does sequentially;
* the span itself (its encoded attributes) crosses the process boundary only
  when it might be drawn: its priority is at most the largest its stratum's
  reservoir held when the range was sent out, and it is among the ``n + spare``
  smallest of its stratum in the range. The references drawn that came without
  their span are read again at the end, each line once, by the workers;
* the OTLP reader's state across lines: a chat span that would wait for its log
  records (no content, a span id) comes back whole, and the parent keeps it in
  the same join window, in the same order; log records do not fit ranges read
  apart, so at the first line holding a GenAI log record the parent drops what
  the workers read from there on and reads the rest itself, with a reader that
  continues where the workers' left off (the spans counted, the chat spans
  taken, the spans waiting).

Memory: at most ``2 * workers`` ranges are out at once, each sending back a few
tuples per chat span and at most ``n + spare`` spans per stratum; a worker holds
one line's parse at a time. Workers are started with ``spawn`` (nothing is
inherited), and only for plain files (not compressed) of at least
:data:`PARALLEL_MIN_BYTES` together, unless ``chunk_bytes`` is given.
"""

from __future__ import annotations

import heapq
import multiprocessing
import os
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from llm_connect.errors import TrafficImportError
from llm_connect.traffic._call import Probe, Skip, TrafficCall
from llm_connect.traffic._json import loads, no_cyclic_gc
from llm_connect.traffic._otlp import OtlpReader, _finish, _Span, service_name
from llm_connect.traffic._sample import Sampler

if TYPE_CHECKING:  # pragma: no cover
    from llm_connect.traffic._importer import ImportOptions

__all__ = [
    "CHUNK_BYTES",
    "MAX_AUTO_WORKERS",
    "PARALLEL_MIN_BYTES",
    "ParallelOtlp",
    "auto_workers",
    "lines_from",
    "workers_for",
]

T = TypeVar("T")

CHUNK_BYTES = 8 << 20
"""Bytes per range a worker reads (by default)."""

PARALLEL_MIN_BYTES = 256 << 20
"""Input smaller than this (all files together) is read in this process. Measured on 2 cores
(``scripts/bench/suite_import.py --sample 1000 --workers 2``): 76-142 MB ran 0.7x-1.05x one process
(starting the workers, filling and draining the pipeline), 300 MB 1.2x, 1 GB 1.2x-1.9x."""

_Loc = tuple[int, int, int]
"""A span's place in its line: resource, scope and span index."""
_Scanned = tuple[int, int, list[Any], "tuple[int, int] | None"]
"""A worker's answer: lines owned, spans read, entries, and where it stopped (offset, line) if it did."""


MAX_AUTO_WORKERS = 8
"""``--workers`` by default: one per CPU, at most this many (the parent, consuming every chat
span's probe in order, keeps up with about that many)."""


def auto_workers() -> int:
    """One worker per CPU this process may use, at most :data:`MAX_AUTO_WORKERS`."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return min(cpus, MAX_AUTO_WORKERS)


def workers_for(
    paths: Sequence[Path],
    fmt: str,
    *,
    draw_first: bool,
    workers: int | None,
    chunk_bytes: int | None,
) -> int:
    """How many worker processes read ``paths`` (1: none, the sequential reader).

    More than one only for OTLP JSON drawn first (``draw_first``; the caller also says so for
    every case without a sample: :mod:`llm_connect.traffic._parallel_cases`), plain files, at least
    :data:`PARALLEL_MIN_BYTES` together unless ``chunk_bytes`` is given, and no
    more workers than ranges.
    """
    n = auto_workers() if workers is None else workers
    if n <= 1 or fmt != "otlp-json" or not draw_first or any(p.suffix == ".gz" for p in paths):
        return 1
    sizes = [p.stat().st_size for p in paths]
    if chunk_bytes is None and sum(sizes) < PARALLEL_MIN_BYTES:
        return 1
    step = chunk_bytes or CHUNK_BYTES
    ranges = sum(-(-size // step) for size in sizes)
    return min(n, ranges) if ranges > 1 else 1


def lines_from(
    paths: Sequence[Path], first: int, offset: int, lineno: int
) -> Iterator[tuple[str, int, bytes]]:
    """``(file, line number, line)`` from ``offset`` (line ``lineno``) of file ``first`` on."""
    for i in range(first, len(paths)):
        with open(paths[i], "rb") as fh:
            start = 1
            if i == first:
                fh.seek(offset)
                start = lineno
            for n, raw in enumerate(fh, start):
                if raw.strip():
                    yield str(paths[i]), n, raw


# -- in a worker ------------------------------------------------------------------------


class RangeItems:
    """What ``reader`` makes of the lines starting in ``[start, end)`` of ``file``:
    ``(offset, line number, items)`` per non-blank line (the line running into ``start`` belongs
    to the range before; ``lineno`` lines precede the range). It stops at the first line that
    holds a GenAI log record (:attr:`stopped`: its offset and number; the parent joins those
    spans itself); :attr:`lineno` is then the number of the last line read."""

    def __init__(self, reader: OtlpReader, file: str, start: int, end: int, lineno: int) -> None:
        self.reader, self.file, self.start, self.end = reader, file, start, end
        self.lineno = lineno
        self.stopped: tuple[int, int] | None = None

    def __iter__(self) -> Iterator[tuple[int, int, list[Any]]]:
        reader = self.reader
        with open(self.file, "rb") as fh:
            if self.start > 0:
                fh.seek(self.start - 1)
                if fh.read(1) != b"\n":
                    fh.readline()  # the line that started before this range
            pos = fh.tell()
            while pos < self.end:
                raw = fh.readline()
                if not raw:
                    return
                self.lineno += 1
                offset, pos = pos, pos + len(raw)
                if not raw.strip():
                    continue
                seen, records = reader.spans_seen, reader.genai_records
                items = list(reader.read_line(self.file, self.lineno, raw))
                if reader.genai_records != records:
                    reader.spans_seen, self.stopped = seen, (offset, self.lineno)
                    return
                yield offset, self.lineno, items


def _result(future: Future[T], path: str | Path) -> T:
    """``future``'s result; a worker that died (killed, out of memory) is a
    :class:`~llm_connect.errors.TrafficImportError` naming the file and the way round it."""
    try:
        return future.result()
    except BrokenProcessPool as exc:
        raise TrafficImportError(
            f"{path}: a worker process reading this file stopped unexpectedly (killed, or out of "
            "memory?); nothing was written. Run again with --workers 1 to read it in one process."
        ) from exc


def in_order(
    pool: ProcessPoolExecutor,
    jobs: Iterator[tuple[int, Callable[..., T], tuple[Any, ...]]],
    paths: Sequence[Path],
    ahead: int,
) -> Generator[tuple[int, T], None, None]:
    """``(file index, result)`` of each ``(file index, function, arguments)`` of ``jobs``, in
    their order, with at most ``ahead`` out at once. The next job is taken (and its arguments
    computed) as each result comes back, before it is yielded. Closing the generator cancels the
    jobs not started; a dead worker is :func:`_result`'s error."""
    out: deque[tuple[int, Future[T]]] = deque()

    def send() -> None:
        job = next(jobs, None)
        if job is not None:
            i, fn, args = job
            out.append((i, pool.submit(fn, *args)))

    try:
        for _ in range(ahead):
            send()
        while out:
            i, future = out.popleft()
            result = _result(future, paths[i])
            send()
            yield i, result
    finally:
        for _, later in out:
            later.cancel()


def _scan(
    file: str,
    start: int,
    end: int,
    options: ImportOptions,
    limit: int,
    thresholds: dict[str, int] | None,
) -> _Scanned:
    """Read the lines starting in ``[start, end)`` of ``file`` (see the module docstring)."""
    from llm_connect.traffic._draw import _stratum
    from llm_connect.traffic._importer import _Importer

    with no_cyclic_gc():
        importer = _Importer("otlp-json", [], options, Path(file))
        hasher = Sampler(1, seed=options.seed)
        reader = OtlpReader(options.join_window, defer=True)
        reader.locate = True
        entries: list[Any] = []
        kept: dict[str, list[tuple[int, int, Any, Any]]] = defaultdict(list)
        lines = RangeItems(reader, file, start, end, 0)
        for offset, lineno, items in lines:
            for item in items:
                if not isinstance(item, _Span):
                    entries.append(item)  # a skip of the line
                    continue
                loc = item.loc
                assert loc is not None
                if not item.answered and item.span_id:  # it waits for log records
                    entries.append((None, item.span_id, lineno, loc[3], loc[4]))
                    continue
                probe = item.probe()
                if isinstance(probe, Skip):
                    entries.append((probe, item.span_id))
                    continue
                stratum, priority = None, -1
                if not probe.error and not probe.empty:
                    stratum = _stratum(importer, item, probe)
                    if thresholds is not None:
                        priority = hasher.priority(probe.key.hex(), 0)
                        most = thresholds.get(stratum)
                        if most is None or priority < most:
                            heap = kept[stratum]
                            entry = (-priority, len(entries), loc[3], loc[4])
                            if len(heap) < limit:
                                heapq.heappush(heap, entry)
                            elif entry[0] > heap[0][0]:
                                heapq.heapreplace(heap, entry)
                p, sid = probe, item.span_id
                found = (p.key, p.error, p.empty, p.requested_model, p.answer_model, stratum, priority)
                entries.append((*found, sid, lineno, offset, loc[0], loc[1], loc[2], None))
        for heap in kept.values():
            for _, index, span, service in heap:
                entries[index] = (*entries[index][:13], (span, service))
        return lines.lineno, reader.spans_seen, entries, lines.stopped


def _fetch(file: str, offset: int, locs: list[_Loc]) -> list[tuple[Any, Any]]:
    """The spans at ``locs`` of the line at ``offset``, each with its service name."""
    with open(file, "rb") as fh:
        fh.seek(offset)
        obj = loads(fh.readline())
    out = []
    for r, s, i in locs:
        resource = obj["resourceSpans"][r]
        out.append((resource["scopeSpans"][s]["spans"][i], service_name(resource)))
    return out


# -- in the parent ------------------------------------------------------------------------


class _Remote:
    """A chat span a worker probed: its probe, its place, and the span if it came along."""

    __slots__ = ("_probe", "data", "file", "line", "loc", "offset", "path")

    def __init__(
        self, probe: Probe, path: str, file: str, line: int, offset: int, loc: _Loc, data: Any
    ) -> None:
        self._probe, self.path, self.file, self.line = probe, path, file, line
        self.offset, self.loc, self.data = offset, loc, data

    def probe(self) -> Probe:
        """The worker's probe (with the stratum)."""
        return self._probe

    def _span(self) -> _Span:
        if self.data is None:
            self.data = _fetch(self.path, self.offset, [self.loc])[0]
        return _Span.read_again(self.file, self.line, *self.data)

    def build(self) -> TrafficCall | Skip:
        """The call, as the sequential reader would have built it."""
        return _finish(self._span())

    def metadata(self) -> dict[str, Any]:
        """The call's metadata."""
        return self._span().metadata()

    def tags(self) -> list[str]:
        """Spans carry no tags."""
        return []


class RangeReaders:
    """What the two ways of reading files by worker processes share (:class:`ParallelOtlp`,
    ``_parallel_cases.ParallelCases``): the files, options, workers and range size, and the
    counts of the parent's own reader once it reads on (after a GenAI log record)."""

    def __init__(
        self, paths: Sequence[Path], options: ImportOptions, *, workers: int, chunk_bytes: int | None = None
    ) -> None:
        self.paths = list(paths)
        self.options = options
        self.workers = workers
        self.chunk_bytes = chunk_bytes or CHUNK_BYTES
        self._spans = 0
        self._reader: OtlpReader | None = None

    @property
    def spans_seen(self) -> int:
        """Every span read, chat or not."""
        return self._reader.spans_seen if self._reader is not None else self._spans

    @property
    def notes(self) -> dict[str, int]:
        """The reader's notes (records matching no chat span: only once the parent reads on)."""
        return self._reader.notes if self._reader is not None else {}

    @property
    def genai_records(self) -> int:
        """GenAI log records read: the parent reads on itself from the first one, so 0 means none."""
        return self._reader.genai_records if self._reader is not None else 0


class ParallelOtlp(RangeReaders):
    """OTLP JSON files read by worker processes, consumed in file order (module docstring).

    :meth:`read` yields what ``OtlpReader(join_window, defer=True).read(...)``
    would (skips and deferred chat spans, same order, same line numbers);
    :attr:`spans_seen` and :attr:`notes` are the reader's once it has finished.
    """

    def __init__(
        self,
        paths: Sequence[Path],
        options: ImportOptions,
        sampler: Sampler,
        *,
        workers: int,
        chunk_bytes: int | None = None,
    ) -> None:
        super().__init__(paths, options, workers=workers, chunk_bytes=chunk_bytes)
        self.sampler = sampler

    def _thresholds(self) -> dict[str, int] | None:
        s = self.sampler
        if s.keep_duplicates:  # the priority depends on the position: spans fetched at the end
            return None
        full = s.n + s.spare
        return {name: -st.heap[0][0] for name, st in s.strata.items() if len(st.heap) >= full}

    def read(self) -> Iterator[Skip | _Remote | TrafficCall | Any]:
        """Skips and chat spans in file order (see the class docstring)."""
        step = self.chunk_bytes
        limit = self.sampler.n + self.sampler.spare
        pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        jobs = (  # the thresholds as the reservoirs stand when the range is sent
            (i, _scan, (str(path), start, min(start + step, size), self.options, limit, self._thresholds()))
            for i, path in enumerate(self.paths)
            for size in (path.stat().st_size,)
            for start in range(0, size, step)
        )
        results = in_order(pool, jobs, self.paths, 2 * self.workers)
        try:
            owned: dict[int, int] = {}
            window = max(1, self.options.join_window)
            done: deque[str] = deque(maxlen=window)
            waiting: OrderedDict[str, _Span] = OrderedDict()
            strata = self.sampler.strata
            full = self.sampler.n + self.sampler.spare
            light = not self.sampler.keep_duplicates
            for i, (lines, spans, entries, stopped) in results:
                path = file = str(self.paths[i])
                base = owned.get(i, 0)
                self._spans += spans
                for entry in entries:
                    if type(entry) is Skip:
                        yield replace(entry, line=entry.line + base)
                        continue
                    if entry[0] is None:  # a span waiting for its log records (none read so far)
                        _, span_id, line, span, service = entry
                        waiting[span_id] = _Span.read_again(file, line + base, span, service)
                        if len(waiting) > window:
                            yield waiting.popitem(last=False)[1]
                        continue
                    if type(entry[0]) is Skip:
                        if entry[1]:
                            done.append(entry[1])
                        yield replace(entry[0], line=entry[0].line + base)
                        continue
                    key, error, empty, req, ans, stratum, priority, span_id, line, offset, *loc, data = entry
                    if span_id:
                        done.append(span_id)
                    if data is None and light:
                        if error or empty:
                            yield (key, error, empty, None)
                            continue
                        st = strata.get(stratum)
                        if st is not None and len(st.heap) >= full and priority >= -st.heap[0][0]:
                            yield (key, error, empty, stratum)  # cannot enter the reservoir: counted
                            continue
                    probe = Probe(key, error, empty, req, ans, stratum)
                    yield _Remote(probe, path, file, line + base, offset, (loc[0], loc[1], loc[2]), data)
                if stopped is not None:
                    results.close()  # the ranges after this one: the parent reads on itself
                    reader = OtlpReader(self.options.join_window, defer=True)
                    reader.prime(self._spans, done, waiting.items())
                    self._reader = reader
                    yield from reader.read(lines_from(self.paths, i, stopped[0], base + stopped[1]))
                    break
                owned[i] = base + lines
            else:
                while waiting:  # no log record in the files: they wait in vain
                    yield waiting.popitem(last=False)[1]
            self._prefetch(pool)
        finally:
            results.close()
            pool.shutdown(wait=True, cancel_futures=True)

    def _prefetch(self, pool: ProcessPoolExecutor) -> None:
        """The spans of the references the reservoirs hold that came without theirs, each line read once."""
        wanted: dict[tuple[str, int], list[_Remote]] = defaultdict(list)
        for stratum in self.sampler.strata.values():
            for _, _, ref in stratum.heap:
                if isinstance(ref, _Remote) and ref.data is None:
                    wanted[ref.path, ref.offset].append(ref)
        jobs = [
            (refs, pool.submit(_fetch, path, offset, [r.loc for r in refs]))
            for (path, offset), refs in wanted.items()
        ]
        for refs, future in jobs:
            found: list[tuple[Any, Any]] = _result(future, refs[0].path)
            for ref, data in zip(refs, found, strict=True):
                ref.data = data
