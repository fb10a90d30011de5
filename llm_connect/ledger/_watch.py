"""The watch store: how far each ``llm-connect watch`` has settled the files it follows.

A watch follows trace or log files as they grow and grades a sampled share of their calls in
shadow, as a run of its own. Its offsets (``watch_offsets``, revision 0015) say, per watch name
and file path, the byte offset and line count before which every call is settled: graded and
recorded, failed and recorded as failed, or skipped (unusable, not sampled). A restarted watch
reads on from there. The file's device and inode and a fingerprint of its first bytes are kept
with the offset, so a file renamed away (rotation) or cut short (truncation) is told apart from
the one that was read.

The offsets are written after the grades they cover (one transaction for all of a watch's files),
so a crash between the two re-reads a few settled calls: :meth:`WatchStore.settled_cases` finds
them among the run's grades, failures and not-applicable pairs, and the watch does not grade them
again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from sqlalchemy import Connection, Table, select

from llm_connect.ledger._cases import chunks
from llm_connect.ledger._engine import Store, dialect_insert, read, write
from llm_connect.ledger._models import Grade, RunFailure, RunSkip, WatchOffset
from llm_connect.traffic import FilePosition
from llm_connect.types import utcnow

__all__ = ["WatchStore"]

_OFFSETS = cast(Table, WatchOffset.__table__)
_GRADES = cast(Table, Grade.__table__)
_FAILURES = cast(Table, RunFailure.__table__)
_SKIPS = cast(Table, RunSkip.__table__)


class WatchStore(Store):
    """The offsets of watches (``watch_offsets``), and which of a watch run's cases are settled."""

    def offsets(self, watch: str) -> dict[str, FilePosition]:
        """The stored offsets of ``watch``, by path (``{}`` for a new watch): where each followed
        file is settled up to, as :class:`~llm_connect.traffic.FilePosition`."""
        stmt = select(_OFFSETS).where(_OFFSETS.c.watch == watch)

        def run(conn: Connection) -> dict[str, FilePosition]:
            rows = conn.execute(stmt).mappings()
            return {
                r["path"]: FilePosition(
                    **{k: r[k] for k in FilePosition.__dataclass_fields__ if k != "offset"},
                    offset=r["byte_offset"],
                )
                for r in rows
            }

        return read(self.engine, "reading a watch's offsets", run)

    def save(self, watch: str, rows: Sequence[FilePosition]) -> None:
        """Store ``rows`` as ``watch``'s offsets (each path's row replaced), in one transaction."""
        if not rows:
            return
        now = utcnow()
        values = [
            {
                "watch": watch,
                "path": r.path,
                "file_id": r.file_id,
                "fingerprint": r.fingerprint,
                "fingerprint_bytes": r.fingerprint_bytes,
                "byte_offset": r.offset,
                "line": r.line,
                "updated_at": now,
            }
            for r in rows
        ]

        def upsert(conn: Connection) -> None:
            stmt = dialect_insert(conn.dialect.name, _OFFSETS)
            changed = {k: stmt.excluded[k] for k in values[0] if k not in ("watch", "path")}
            conn.execute(stmt.on_conflict_do_update(index_elements=["watch", "path"], set_=changed), values)

        write(self.engine, "storing a watch's offsets", upsert)

    def settled_cases(self, run_id: str, case_ids: Iterable[str]) -> set[str]:
        """Which of ``case_ids`` run ``run_id`` has settled: graded, recorded as failed, or recorded
        as not applicable to a judge."""
        wanted = list(dict.fromkeys(case_ids))

        def run(conn: Connection) -> set[str]:
            found: set[str] = set()
            for part in chunks(wanted):
                for table in (_GRADES, _FAILURES, _SKIPS):
                    c = table.c
                    stmt = select(c.case_id).where(c.run_id == run_id, c.case_id.in_(part)).distinct()
                    found.update(r[0] for r in conn.execute(stmt))
            return found

        return read(self.engine, "reading a watch's settled cases", run) if wanted else set()
