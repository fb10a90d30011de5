"""Large OTLP JSON files on several cores, every case built (no ``--sample``).

Workers read byte ranges of the files as for a sample (:mod:`llm_connect.traffic._parallel`:
a line belongs to the range it starts in, at most ``2 * workers`` ranges out at once,
workers started with ``spawn``), and build each chat span's case themselves: the
call, the drop of an errored call or an empty answer, the masking (and ``redact``),
the :class:`~llm_connect.types.Conversation` check and the case's suite line. What
depends on the cases before it stays in the parent, which consumes the ranges in
file order through the same :class:`~llm_connect.traffic._importer._Importer` as
one process, so that the suite and its ``.meta.json`` are the same bytes:

* an exact duplicate conversation (the worker sends its digest key), the counts
  of calls, drops, skips (the first few named, ``strict`` failing at the first)
  and notes (sent per case, counted only for a case that is not a duplicate);
* the case id (``#2``... for a repeated one, spliced into the line's first key)
  and a case with NaN or infinity (skipped after its id is taken, as in one process).

Line numbers in a case's ``source`` are absolute: the parent counts the newlines
of each range before it sends the next (one pass over the bytes, ``bytes.count``),
and tells each worker the number of lines before its first one.

The OTLP reader's state across lines is kept as for a sample: a chat span waiting
for its log records comes back whole and waits in the parent's join window (taken
there, it is built in the parent); at the first line holding a GenAI log record the
parent drops what the workers read from there on and reads the rest itself.
"""

from __future__ import annotations

import multiprocessing
from collections import OrderedDict, deque
from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from llm_connect.traffic import _json
from llm_connect.traffic._call import Skip, TrafficCall
from llm_connect.traffic._importer import CHECKED, ImportOptions, _Importer, dropped
from llm_connect.traffic._json import dumps_line, no_cyclic_gc, use_orjson
from llm_connect.traffic._otlp import OtlpReader, _finish, _Span
from llm_connect.traffic._parallel import RangeItems, RangeReaders, in_order, lines_from

__all__ = ["ParallelCases", "replay"]

_UNREADABLE, _DROPPED, _REFUSED, _CASE, _WAITING = range(5)
"""The kinds of a worker's entry (its first item); a reader's skip of a line is a bare :class:`Skip`."""

_Built = tuple[int, list[Any], "tuple[int, int] | None"]
"""A worker's answer: spans read, entries, and where it stopped (offset, line) if it did."""


# -- in a worker ------------------------------------------------------------------------


def _outcome(importer: _Importer, span: _Span) -> tuple[Any, ...]:
    """What one process does with a taken chat span, up to what depends on earlier cases."""
    sid = span.span_id
    call = _finish(span)
    if isinstance(call, Skip):
        return _UNREADABLE, sid, call
    reason = dropped(call)
    if reason is not None:
        return _DROPPED, sid, reason
    checked = importer.check(call)
    if isinstance(checked, Skip):
        return _REFUSED, sid, checked
    case = importer.case(call, checked)
    notes = importer.report.notes or None
    if notes:
        importer.report.notes = {}
    source = case["metadata"]["source"]
    text = dumps_line(case, checked=CHECKED)
    key = int(checked[2].digest[:16], 16)
    return _CASE, sid, key, notes, case["id"], source["file"], source["line"], text


def _build(file: str, start: int, end: int, before: int, options: ImportOptions, fast: bool) -> _Built:
    """Read and build the lines starting in ``[start, end)`` of ``file``; ``before`` lines precede them."""
    use_orjson(fast)  # the parent's encoder: the same bytes
    with no_cyclic_gc():
        importer = _Importer("otlp-json", [], replace(options, strict=False), Path(file))
        reader = OtlpReader(options.join_window, defer=True)
        reader.locate = True
        entries: list[Any] = []
        lines = RangeItems(reader, file, start, end, before)
        for _, lineno, items in lines:
            for item in items:
                if not isinstance(item, _Span):
                    entries.append(item)  # a skip of the line
                elif not item.answered and item.span_id:  # it waits for log records
                    loc = item.loc
                    assert loc is not None
                    entries.append((_WAITING, item.span_id, lineno, loc[3], loc[4]))
                else:
                    entries.append(_outcome(importer, item))
        return reader.spans_seen, entries, lines.stopped


# -- in the parent ----------------------------------------------------------------------


def replay(importer: _Importer, entry: tuple[Any, ...]) -> bytes | None:
    """Count a worker's entry as one process would and give the suite line to write, if any."""
    r = importer.report
    r.calls += 1
    kind = entry[0]
    if kind == _DROPPED:
        r.dropped[entry[2]] = r.dropped.get(entry[2], 0) + 1
        return None
    if kind == _REFUSED:
        importer.skip(entry[2])
        return None
    _, _, key, notes, base, file, line, text = entry
    if importer.duplicate(key):
        return None
    if notes:
        for what, n in notes.items():
            importer.note(what, n)
    r.eligible += 1
    importer.seq += 1
    case_id = importer.unique(base)
    if text is None:
        importer.skip(Skip("not JSON (NaN or infinity)", file, line, case_id))
        return None
    if case_id != base:  # the id is the line's first key
        head = len(dumps_line(base) or b"") + 5  # '{"id":' and the JSON string, less its newline
        text = b'{"id":' + (dumps_line(case_id) or b"")[:-1] + text[head:]
    return text  # type: ignore[no-any-return]


def _ranges(paths: Sequence[Path], step: int) -> Generator[tuple[int, int, int, int], None, None]:
    """``(file index, start, end, lines before the first line starting in the range)``."""
    for i, path in enumerate(paths):
        size = path.stat().st_size
        newlines, last = 0, b"\n"
        with open(path, "rb") as fh:
            for start in range(0, size, step):
                # the first line owned follows the first newline at or after start - 1: the lines
                # before it are the newlines before start - 1, plus that one
                before = newlines + 1 - (last == b"\n") if start else 0
                yield i, start, min(start + step, size), before
                block = fh.read(step)
                newlines += block.count(b"\n")
                last = block[-1:]


class ParallelCases(RangeReaders):
    """OTLP JSON files read and built by worker processes, replayed in file order (module docstring).

    :meth:`read` yields, in the order one process reads them, the reader's skips,
    the calls built in this process (spans that waited, the rest after a log
    record) and the workers' entries, each for :func:`replay`; :attr:`spans_seen`
    and :attr:`notes` are the reader's once it has finished.
    """

    def read(self) -> Iterator[Skip | TrafficCall | tuple[Any, ...]]:
        """Skips, calls and workers' entries in file order (see the class docstring)."""
        ranges = _ranges(self.paths, self.chunk_bytes)
        pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        jobs = (
            (i, _build, (str(self.paths[i]), start, end, before, self.options, _json.FAST))
            for i, start, end, before in ranges
        )
        results = in_order(pool, jobs, self.paths, 2 * self.workers)
        try:
            window = max(1, self.options.join_window)
            done: deque[str] = deque(maxlen=window)
            waiting: OrderedDict[str, _Span] = OrderedDict()
            for i, (spans, entries, stopped) in results:
                file = str(self.paths[i])
                self._spans += spans
                for entry in entries:
                    if type(entry) is Skip:
                        yield entry
                        continue
                    kind, span_id = entry[0], entry[1]
                    if kind == _WAITING:  # a span waiting for its log records (none read so far)
                        _, _, line, span, service = entry
                        waiting[span_id] = _Span.read_again(file, line, span, service)
                        if len(waiting) > window:
                            yield _finish(waiting.popitem(last=False)[1])
                        continue
                    if span_id:
                        done.append(span_id)
                    yield entry[2] if kind == _UNREADABLE else entry
                if stopped is not None:
                    results.close()  # the ranges after this one: the parent reads on itself
                    reader = OtlpReader(self.options.join_window)
                    reader.prime(self._spans, done, waiting.items())
                    self._reader = reader
                    yield from reader.read(lines_from(self.paths, i, *stopped))  # type: ignore[misc]  # not deferred
                    break
            else:
                while waiting:  # no log record in the files: they wait in vain
                    yield _finish(waiting.popitem(last=False)[1])
        finally:
            results.close()
            ranges.close()
            pool.shutdown(wait=True, cancel_futures=True)
