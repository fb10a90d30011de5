"""Following traffic files as they grow (``llm-connect watch``): new calls, by byte offset.

A :class:`Follower` reads the files ``suite import`` reads (OTLP JSON, OpenAI-style logs,
Langfuse JSON Lines) from a byte offset on, complete lines only: a last line without its newline
waits for the next poll. Each line goes through the format's own reader, so a line becomes the
same :class:`~llm_connect.traffic.TrafficCall` or :class:`~llm_connect.traffic.Skip` (with the
same reason) as in an import; OTLP spans wait for their log records as there (at most
``join_window`` spans).

**Settled lines.** Every call handed out is *open* until the caller :meth:`Follower.settle`\\ s it
(graded and recorded, failed and recorded, or left out). :meth:`Follower.positions` gives, per
path, the offset after the longest run of lines whose calls are all settled and that hold no
span still waiting for its records: what may be stored, so that a restart from it loses no call.
Lines after it may be read again after a crash; the caller recognises their calls by id.

**Rotation and truncation.** Each poll compares the path's device and inode with the file being
read. Renamed away and replaced (rotation): the old file, still open, is read to its end (its
waiting spans taken with what they have), and once its calls are settled the new file is read
from its start. A file shorter than the offset, or whose first bytes changed (``copytruncate``),
is read again from its start. A stored position whose file was rotated while nothing followed it
is looked for among the path's siblings by device and inode, and its rest read first.

**Patterns.** A path with glob magic (``logs/app-*.jsonl``) is looked for again at every poll, so
a dated file that appears later is followed from its start. A match that is a file already read
under another name (its device, inode and first bytes: a rotation renamed it) is left alone.
"""

from __future__ import annotations

import glob
import hashlib
import os
import stat
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from llm_connect.errors import TrafficImportError
from llm_connect.traffic._call import Skip, TrafficCall, content_key
from llm_connect.traffic._import import FORMATS, format_of_line
from llm_connect.traffic._importer import ImportOptions, _Importer, _lookup, dropped
from llm_connect.traffic._json import loads
from llm_connect.traffic._logs import read_langfuse, read_openai_log
from llm_connect.traffic._otlp import DEFAULT_JOIN_WINDOW, OtlpReader

__all__ = [
    "FINGERPRINT_BYTES",
    "FilePosition",
    "Followed",
    "Follower",
    "Poll",
    "call_id",
    "call_task",
    "sampled",
    "watch_case",
]

FINGERPRINT_BYTES = 256
"""How many of a file's first bytes tell it from another file at the same path."""
_CHUNK = 1 << 20


@dataclass(frozen=True)
class FilePosition:
    """Where a followed file is settled up to (what ``watch_offsets`` keeps)."""

    path: str
    file_id: str
    """``DEVICE:INODE``."""
    fingerprint: str
    """BLAKE2b (hex) of the first :attr:`fingerprint_bytes` bytes."""
    fingerprint_bytes: int
    offset: int
    """Every call before this byte is settled."""
    line: int
    """Lines before :attr:`offset`."""


@dataclass(frozen=True)
class Followed:
    """A call read from a followed file; :meth:`Follower.settle` it once it is settled."""

    call: TrafficCall
    format: str
    segment: Any = field(repr=False, compare=False)


@dataclass
class Poll:
    """What one :meth:`Follower.poll` read."""

    calls: list[Followed] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    """Records the readers could not use (settled as read)."""
    lines: int = 0
    """Complete lines read."""
    notes: list[str] = field(default_factory=list)
    """Rotations, truncations, files not there yet: one line each."""


def _file_id(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}"


def _fingerprint(fh: IO[bytes], size: int) -> tuple[str, int]:
    fh.seek(0)
    head = fh.read(min(size, FINGERPRINT_BYTES))
    return hashlib.blake2b(head, digest_size=16).hexdigest(), len(head)


class _Segment:
    """One open file at a followed path: the read position, the open lines, the settled position."""

    def __init__(self, path: str, fh: IO[bytes], st: os.stat_result, offset: int, line: int) -> None:
        self.path, self.fh = path, fh
        self.file_id = _file_id(st)
        self.fingerprint, self.fingerprint_bytes = _fingerprint(fh, st.st_size)
        self.read_offset, self.line = offset, line
        self.reader: OtlpReader | None = None
        self.pending: deque[list[int]] = deque()  # [line, end offset, open calls], in line order
        self.open: dict[int, list[int]] = {}
        self.retiring = False
        self.committed = FilePosition(
            path, self.file_id, self.fingerprint, self.fingerprint_bytes, offset, line
        )

    def same_start(self) -> bool:
        """Whether the file still begins with the bytes fingerprinted (widening the fingerprint
        to :data:`FINGERPRINT_BYTES` as the file grows)."""
        size = os.fstat(self.fh.fileno()).st_size
        if size < self.fingerprint_bytes:
            return False
        if _fingerprint(self.fh, self.fingerprint_bytes) != (self.fingerprint, self.fingerprint_bytes):
            return False
        if self.fingerprint_bytes < FINGERPRINT_BYTES and size > self.fingerprint_bytes:
            self.fingerprint, self.fingerprint_bytes = _fingerprint(self.fh, size)
            self.committed = replace(
                self.committed, fingerprint=self.fingerprint, fingerprint_bytes=self.fingerprint_bytes
            )
        return True

    def waiting_line(self) -> float:
        """The first line of a span still waiting for its log records (infinity: none)."""
        if self.reader is None:
            return float("inf")
        return min((span.line for span in self.reader._pending.values()), default=float("inf"))

    def close(self) -> None:
        self.fh.close()


class Follower:
    """Reads new calls from ``paths`` as the files grow (see the module docstring).

    Args:
        paths: the files to follow (a path not there yet is waited for); a glob pattern
            (``logs/app-*.jsonl``) follows every file it matches, looked for again at each poll:
            a file that matches at the first poll is a path like the others, one that appears
            later, or since the watch stopped (``positions`` given, none for it), is read from
            its start (it holds only calls not seen). A file that a followed path was rotated to
            (``app.log.1`` under ``app.log*``) is not followed a second time.
        format: one of :data:`~llm_connect.traffic.FORMATS` for every file (``None``: each path's
            from its first line).
        positions: stored positions by path (:meth:`positions` of an earlier follower).
        join_window: OTLP: spans waiting for their log records at most.
        start_at_end: a path with no stored position starts after what it holds now.
    """

    def __init__(
        self,
        paths: Sequence[str],
        *,
        format: str | None = None,
        positions: Mapping[str, FilePosition] | None = None,
        join_window: int = DEFAULT_JOIN_WINDOW,
        start_at_end: bool = False,
    ) -> None:
        if format is not None and format not in FORMATS:
            raise TrafficImportError(f"unknown format {format!r}: one of {', '.join(FORMATS)}")
        for path in paths:
            if path.endswith(".gz"):
                raise TrafficImportError(f"{path}: a compressed file cannot be followed as it grows")
        given = list(dict.fromkeys(paths))
        self.patterns = [p for p in given if glob.has_magic(p)]
        self.paths = [p for p in given if not glob.has_magic(p)]
        self.format = format
        self.formats: dict[str, str] = dict.fromkeys(self.paths, format) if format else {}
        self.join_window = join_window
        self.start_at_end = start_at_end
        self._stored = dict(positions or {})
        self._resumed = bool(self._stored)
        # file id -> (path, fingerprint, its bytes) of every file read: stored, and read here
        self._known: dict[str, tuple[str, str, int]] = {
            pos.file_id: (path, pos.fingerprint, pos.fingerprint_bytes) for path, pos in self._stored.items()
        }
        self._segments: dict[str, _Segment] = {}
        self._missing: set[str] = set()
        self._looked = False  # whether the patterns were looked for once (the first poll)
        self._appeared: set[str] = set()  # matched after the first poll: read from the start

    # -- reading ------------------------------------------------------------------------

    def poll(self, max_calls: int | None = None) -> Poll:
        """Read complete new lines of every path (up to about ``max_calls`` calls in all)."""
        poll = Poll()
        self._discover(poll)
        for path in self.paths:
            if max_calls is not None and len(poll.calls) >= max_calls:
                break
            self._poll_path(path, poll, None if max_calls is None else max_calls - len(poll.calls))
        return poll

    def _discover(self, poll: Poll) -> None:
        """Follow the files the patterns match now and no path follows yet."""
        first, self._looked = not self._looked, True
        for pattern in self.patterns:
            found = sorted(glob.glob(pattern))
            if not found and first:
                poll.notes.append(f"{pattern}: no file matches (yet); waiting for one")
            for path in found:
                if path in self.paths or path.endswith(".gz"):
                    continue
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode) or self._read_before(path, st):
                    continue  # a followed file under its rotated name: read through the old handle
                self.paths.append(path)
                if self.format:
                    self.formats[path] = self.format
                if path in self._stored or (first and not self._resumed):
                    continue
                self._appeared.add(path)  # new while watching, or since the watch stopped
                since = "" if not first else " since the watch stopped"
                poll.notes.append(f"{path}: new{since}, matches {pattern}; reading it from its start")

    def _poll_path(self, path: str, poll: Poll, budget: int | None) -> None:
        seg = self._segments.get(path)
        if seg is None:
            seg = self._open(path, poll)
            if seg is None:
                return
            self._segments[path] = seg
        if seg.retiring:
            return  # the rotated file is read; the new one comes once its calls are settled
        try:
            current: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            current = None  # renamed away, the new one not created yet: read on in the old one
        if current is not None and _file_id(current) != seg.file_id:
            self._read(seg, poll, None)
            self._retire(seg, poll)
            poll.notes.append(
                f"{path}: rotated; the old file was read to its end (line {seg.line}), "
                "the new one is read from its start"
            )
            return
        if os.fstat(seg.fh.fileno()).st_size < seg.read_offset or not seg.same_start():
            poll.notes.append(f"{path}: truncated or rewritten; reading it again from its start")
            seg.close()
            seg = self._start(path, poll, offset=0, line=0)
            if seg is None:
                return
            self._segments[path] = seg
        self._read(seg, poll, budget)

    def _open(self, path: str, poll: Poll) -> _Segment | None:
        """The segment to read ``path`` from: its stored position when it is still the same file,
        the rest of a rotated one first, else its start (or end, ``start_at_end``)."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if path not in self._missing:
                poll.notes.append(f"{path}: not there (yet); waiting for it")
                self._missing.add(path)
            return None
        except OSError as exc:
            raise TrafficImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
        self._missing.discard(path)
        stored = self._stored.pop(path, None)
        if stored is None:
            return self._start(path, poll, at_end=self.start_at_end and path not in self._appeared)
        if stored.file_id == _file_id(st):
            seg = self._start(path, poll, offset=stored.offset, line=stored.line)
            if seg is not None and (st.st_size < stored.offset or not _matches(seg, stored)):
                seg.close()
                poll.notes.append(f"{path}: truncated or rewritten since the watch stopped; reading it again")
                return self._start(path, poll, offset=0, line=0)
            return seg
        old = _sibling(path, stored.file_id)
        if old is not None:
            seg = self._start(path, poll, offset=stored.offset, line=stored.line, source=old)
            if seg is not None and _matches(seg, stored):
                poll.notes.append(f"{path}: rotated since the watch stopped; reading the rest of {old} first")
                return seg
            if seg is not None:
                seg.close()
        poll.notes.append(
            f"{path}: replaced since the watch stopped and the file read before is gone; "
            "reading the new one from its start"
        )
        return self._start(path, poll, offset=0, line=0)

    def _start(
        self,
        path: str,
        poll: Poll,
        *,
        offset: int = 0,
        line: int = 0,
        at_end: bool = False,
        source: str | None = None,
    ) -> _Segment | None:
        try:
            fh = open(source or path, "rb")  # noqa: SIM115 - kept open while followed
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TrafficImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
        if at_end:
            offset, line = _end_of_lines(fh)
        seg = _Segment(path, fh, os.fstat(fh.fileno()), offset, line)
        self._known[seg.file_id] = (path, seg.fingerprint, seg.fingerprint_bytes)
        return seg

    def _read_before(self, path: str, st: os.stat_result) -> bool:
        """Whether ``path`` is a file some path was read from, now or before the watch stopped (a
        rotation renamed it): the same device and inode and the same first bytes (an inode
        reused by a new file begins with others)."""
        known = self._known.get(_file_id(st))
        if known is None or known[0] == path or known[2] == 0:
            return False
        try:
            with open(path, "rb") as fh:
                return _fingerprint(fh, known[2]) == known[1:]
        except OSError:
            return False

    def _retire(self, seg: _Segment, poll: Poll) -> None:
        """The rotated file is read: its waiting spans come out as they are."""
        seg.retiring = True
        if seg.reader is not None:
            self._take(seg, seg.reader.finish(), poll)

    def _read(self, seg: _Segment, poll: Poll, budget: int | None) -> None:
        size = _CHUNK
        while budget is None or len(poll.calls) < budget:
            seg.fh.seek(seg.read_offset)
            data = seg.fh.read(size)
            end = data.rfind(b"\n")
            if end < 0:
                if len(data) == size:  # one line longer than the chunk: read more of it
                    size *= 2
                    continue
                return  # nothing new, or a last line still being written
            size = _CHUNK
            start = 0
            while start <= end:
                stop = data.index(b"\n", start) + 1
                self._line(seg, data[start:stop], seg.read_offset + stop - start, poll)
                seg.read_offset += stop - start
                start = stop
                if budget is not None and len(poll.calls) >= budget:
                    return

    def _line(self, seg: _Segment, raw: bytes, end: int, poll: Poll) -> None:
        seg.line += 1
        poll.lines += 1
        entry = [seg.line, end, 0]
        seg.pending.append(entry)
        seg.open[seg.line] = entry
        if not raw.strip():
            return
        fmt = self.formats.get(seg.path)
        if fmt is None:
            fmt = self.formats[seg.path] = _format(raw, seg.path)
        self._take(seg, self._items(seg, fmt, seg.line, raw), poll)

    def _items(self, seg: _Segment, fmt: str, lineno: int, raw: bytes) -> Iterator[TrafficCall | Skip]:
        if fmt == "otlp-json":
            if seg.reader is None:
                seg.reader = OtlpReader(self.join_window)
            return seg.reader.read_line(seg.path, lineno, raw)  # type: ignore[return-value]
        if fmt == "openai-log":
            return read_openai_log([(seg.path, lineno, raw)])
        return read_langfuse([(seg.path, lineno, raw)])

    def _take(self, seg: _Segment, items: Any, poll: Poll) -> None:
        fmt = self.formats.get(seg.path, "")
        for item in items:
            if isinstance(item, Skip):
                poll.skips.append(item)
                continue
            entry = seg.open.get(item.line)
            if entry is not None:
                entry[2] += 1
            poll.calls.append(Followed(item, fmt, seg))

    # -- settling -------------------------------------------------------------------------

    def settle(self, item: Followed) -> None:
        """Mark ``item``'s call settled (graded, failed or left out, and recorded)."""
        entry = item.segment.open.get(item.call.line)
        if entry is not None and entry[2] > 0:
            entry[2] -= 1

    def positions(self) -> list[FilePosition]:
        """Per path read so far, the position after its longest run of settled lines; a rotated
        file whose calls are all settled gives way to the new file here."""
        out: list[FilePosition] = []
        for path in self.paths:
            seg = self._segments.get(path)
            if seg is None:
                continue
            waiting = seg.waiting_line()
            while seg.pending and seg.pending[0][2] == 0 and seg.pending[0][0] < waiting:
                line, end, _ = seg.pending.popleft()
                del seg.open[line]
                seg.committed = replace(seg.committed, offset=end, line=line)
            if seg.retiring and not seg.pending:
                seg.close()
                fresh = self._start(path, Poll(), offset=0, line=0)
                if fresh is None:
                    del self._segments[path]
                    continue
                self._segments[path] = seg = fresh
            out.append(seg.committed)
        return out

    def close(self) -> None:
        """Close every file."""
        for seg in self._segments.values():
            seg.close()
        self._segments.clear()

    def __enter__(self) -> Follower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _matches(seg: _Segment, stored: FilePosition) -> bool:
    """Whether ``seg``'s file begins with the bytes ``stored`` fingerprinted."""
    return _fingerprint(seg.fh, stored.fingerprint_bytes) == (stored.fingerprint, stored.fingerprint_bytes)


def _sibling(path: str, file_id: str) -> str | None:
    """A file beside ``path`` that is ``file_id`` (where a rotation renamed it), or ``None``."""
    folder = Path(path).parent
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if entry.is_file() and _file_id(entry.stat()) == file_id:
                        return entry.path
                except OSError:
                    continue
    except OSError:
        return None
    return None


def _end_of_lines(fh: IO[bytes]) -> tuple[int, int]:
    """The offset after the file's last complete line, and the lines before it."""
    lines = offset = position = 0
    fh.seek(0)
    while chunk := fh.read(_CHUNK):
        newlines = chunk.count(b"\n")
        if newlines:
            lines += newlines
            offset = position + chunk.rfind(b"\n") + 1
        position += len(chunk)
    return offset, lines


def _format(raw: bytes, path: str) -> str:
    """The format of a followed file from its first non-blank line; a whole JSON document (a
    Langfuse export that is not JSON Lines) cannot be followed."""
    fmt = format_of_line(raw, path)
    if fmt == "langfuse":
        try:
            whole = not isinstance(loads(raw), dict)
        except ValueError:
            whole = True
        if whole:
            raise TrafficImportError(
                f"{path}: a whole JSON document cannot be followed as it grows; watch reads JSON Lines "
                "(one observation or trace per line)"
            )
    return fmt


# -- one call: its id, sampling, task and case ------------------------------------------


def call_id(call: TrafficCall) -> str:
    """The call's own id (span id, log or request id, observation id), else a digest of what it
    holds (``h:...``): the same call read again gets the same id."""
    if call.ref:
        return call.ref
    answer = call.answer
    key = content_key(
        [call.messages, call.tools, call.tool_choice],
        None if answer is None else [answer.text, answer.tool_calls, answer.model],
        [call.metadata, call.tags, call.error],
    )
    return "h:" + key.hex()


def sampled(case_id: str, rate: float) -> bool:
    """Whether the call ``case_id`` is in the sampled share ``rate`` (0..1): a hash of the id
    against the rate, so every run samples the same calls."""
    if rate >= 1.0:
        return True
    digest = hashlib.blake2b(case_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") < rate * 2.0**64


def call_task(call: TrafficCall, kind: str, name: str) -> str | None:
    """The task a call names: ``tag`` — its first tag ``NAME:VALUE`` gives ``VALUE``; ``meta`` —
    its metadata (or attribute, or dotted path) ``NAME``. ``None`` when it names none."""
    if kind == "tag":
        prefix = name + ":"
        for tag in call.tags:
            if tag.startswith(prefix) and len(tag) > len(prefix):
                return tag[len(prefix) :]
        return None
    value = _lookup(call.metadata, name)
    return None if value is None or value == "" else str(value)


def watch_case(call: TrafficCall, *, format: str, task: str, case_id: str) -> dict[str, Any] | Skip:
    """The suite case of ``call`` as ``suite import`` writes it (the production answer under
    ``responses.production``, credentials masked), with id ``case_id`` and task ``task``; or the
    skip of a call that cannot be one (an errored call, an empty answer, a conversation refused)."""
    reason = dropped(call)
    if reason is not None:
        return Skip(reason, call.file, call.line, call.ref)
    importer = _Importer(format, [], ImportOptions(format=format, task=task), Path("watch.jsonl"))
    checked = importer.check(call)
    if isinstance(checked, Skip):
        return checked
    case = importer.case(call, checked)
    case["id"] = case_id
    return case
