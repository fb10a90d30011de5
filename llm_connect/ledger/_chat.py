"""The conversations store: multi-turn prompts graded with grades, and stability analyses."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Engine, Table, select

from llm_connect._secrets import mask_value
from llm_connect.errors import LedgerError
from llm_connect.ledger._cases import where
from llm_connect.ledger._engine import dialect_insert, reading, write
from llm_connect.ledger._models import ConversationRecord, StabilityResponseRecord, StabilityRunRecord
from llm_connect.ledger._rows import StabilityResponseRow, StabilityRow
from llm_connect.types import Conversation
from llm_connect.values import STABILITY_VERDICTS

if TYPE_CHECKING:
    from llm_connect.ledger._rows import RecordItem


_CONV = cast(Table, ConversationRecord.__table__)
_STAB = cast(Table, StabilityRunRecord.__table__)
_STAB_RESP = cast(Table, StabilityResponseRecord.__table__)

VERDICTS = STABILITY_VERDICTS


def _finite(value: Any, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise LedgerError(f"{where}: NaN and infinity are not JSON")
    if isinstance(value, Mapping):
        for k, v in value.items():
            _finite(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _finite(v, f"{where}[{i}]")


class ChatStore:
    """Conversations stored with grades, and stability analyses, over the ledger's engine."""

    def __init__(self, engine: Engine, *, store_text: bool = True) -> None:
        self.engine = engine
        self.store_text = store_text

    def add_conversations(self, conn: Connection, records: Sequence[RecordItem]) -> None:
        """Store the conversations of ``records`` not stored yet, in ``conn``'s transaction
        (none in a ledger opened with ``store_text=False``)."""
        rows: dict[str, dict[str, Any]] = {}  # one per distinct conversation
        for conv in (item.result.conversation for item in records if self.store_text):
            if conv is not None and conv.digest not in rows:
                data = conv.to_dict()
                tools, choice = data["tools"] or None, data["tool_choice"]
                rows[conv.digest] = dict(
                    sha256=conv.digest, messages=data["messages"], tools=tools, tool_choice=choice
                )
        if rows:
            stmt = dialect_insert(conn.dialect.name, _CONV).on_conflict_do_nothing(index_elements=["sha256"])
            conn.execute(stmt, list(rows.values()))

    def conversation(self, sha256: str) -> Conversation | None:
        """The conversation whose digest is ``sha256`` (a grade's ``prompt_sha256``), or ``None``."""
        stmt = select(_CONV).where(_CONV.c.sha256 == sha256)
        with reading(self.engine, "reading a conversation") as conn:
            row = conn.execute(stmt).mappings().first()
        if row is None:
            return None
        return Conversation(row["messages"], tools=row["tools"], tool_choice=row["tool_choice"])

    # -- stability ---------------------------------------------------------------

    def record_stability(
        self,
        *,
        task: str,
        model: str,
        adapter_id: str,
        prompt_sha256: str,
        runs: int,
        successful_runs: int,
        overall_score: float,
        verdict: str,
        report: Mapping[str, Any],
        responses: Sequence[Mapping[str, Any]] = (),
        endpoint: str | None = None,
    ) -> int:
        """Store one stability analysis and its runs' answers in one transaction; returns its id."""
        if verdict not in VERDICTS:
            raise LedgerError(f"verdict must be one of {', '.join(VERDICTS)}, not {verdict!r}")
        if isinstance(overall_score, bool) or not isinstance(overall_score, (int, float)):
            raise LedgerError(f"overall_score must be a number, not {overall_score!r}")
        if not 0.0 <= float(overall_score) <= 1.0:
            raise LedgerError(f"overall_score must lie in 0..1, not {overall_score!r}")
        if not (isinstance(runs, int) and isinstance(successful_runs, int) and 0 <= successful_runs <= runs):
            raise LedgerError(f"need 0 <= successful_runs <= runs, not {successful_runs!r} of {runs!r}")
        for name, value in (("task", task), ("model", model), ("adapter_id", adapter_id)):
            if not isinstance(value, str) or not value.strip():
                raise LedgerError(f"{name} must be a non-empty string, not {value!r}")
        _finite(dict(report), "report")
        run_row: dict[str, Any] = dict(
            task=task, model=model, adapter_id=adapter_id, endpoint=endpoint, runs=runs, verdict=verdict
        )
        run_row.update(
            prompt_sha256=prompt_sha256, successful_runs=successful_runs, report=mask_value(dict(report))
        )
        run_row["overall_score"] = float(overall_score)
        response_rows = []
        for r in responses:
            row: dict[str, Any] = {
                "run_index": int(r["run_index"]),
                "latency_ms": r.get("latency_ms"),
                "error": mask_value(r.get("error")),
            }
            row["text"] = mask_value(r.get("text")) if self.store_text else None
            row["tool_calls"] = mask_value(list(r["tool_calls"])) if r.get("tool_calls") else None
            response_rows.append({**row, "served_model": r.get("served_model")})

        def insert(conn: Connection) -> int:
            new_id = int(conn.execute(_STAB.insert().returning(_STAB.c.id), run_row).scalar_one())
            if response_rows:
                conn.execute(_STAB_RESP.insert(), [{**r, "stability_run_id": new_id} for r in response_rows])
            return new_id

        return write(self.engine, "recording a stability analysis", insert)

    def stability_runs(
        self, *, task: str | None = None, model: str | None = None, limit: int | None = None
    ) -> list[StabilityRow]:
        """Stored stability analyses, newest first, optionally for one task and/or model."""
        stmt = select(_STAB).where(*where((_STAB.c.task, task), (_STAB.c.model, model)))
        stmt = stmt.order_by(_STAB.c.id.desc()).limit(limit)
        with reading(self.engine, "reading stability analyses") as conn:
            return [StabilityRow(**dict(rec)) for rec in conn.execute(stmt).mappings()]

    def latest_stability(self, task: str, model: str) -> StabilityRow | None:
        """The newest stability analysis of ``model`` on ``task``, or ``None``."""
        found = self.stability_runs(task=task, model=model, limit=1)
        return found[0] if found else None

    def stability_responses(self, stability_run_id: int) -> list[StabilityResponseRow]:
        """The runs' answers of one stored analysis, in run order."""
        c = _STAB_RESP.c
        stmt = select(_STAB_RESP).where(c.stability_run_id == stability_run_id).order_by(c.run_index)
        with reading(self.engine, "reading stability responses") as conn:
            return [StabilityResponseRow(**dict(rec)) for rec in conn.execute(stmt).mappings()]
