"""The labelling queue: which cases a person labels next, and what the page shows of one.

:func:`label_queue` is the one place that orders the cases to label; a sampler
that chooses cases for the prediction-powered bound can put its own first here.

**Order.** A queue entry is one graded (task, baseline, candidate, case id). Its
*disagreement* is the larger of

- the spread of the case's mean grade across the judges that graded it
  (``max - min`` of ``sum_quality / n`` over the judges, from ``case_stats``;
  0 with one judge), and
- for a ``pairwise:`` judge, ``1 - 2 * |grade - 0.5|``: 1 when the judge called
  the case a tie (or flipped across orders), 0 when it was sure.

**Chosen cases first.** Cases the label sampler chose for routing on what people
would say (``label_sampling``, ``llm-connect labels queue`` / ``grade --label-rate``)
that nobody has labelled yet come before all others, in the sampler's order: the
prediction-powered bound waits for the earliest missing label, so a label given out of
that order helps no decision until the ones before it arrive. Then the other entries by
disagreement, largest first, then in the order the cases arrived (their first grade's
id), then by task, candidate and case. Cases the annotator labelled already (for that
candidate, any baseline) are left out; grades without a case id cannot be labelled and
are never queued.

**Blind order.** :func:`~llm_connect.labels._sheet.candidate_first` draws per (task, case,
candidate) from a seeded SHA-256 whether the candidate's answer is shown first: stable across
reloads and restarts, about half the cases each way, never sent to the page (a labelling sheet
of the same case shows the same order).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llm_connect.labels import BLIND_SEED, candidate_first
from llm_connect.report._cases import _tools

if TYPE_CHECKING:
    from llm_connect.ledger import QualityLedger

__all__ = [
    "BLIND_SEED",
    "LabelCase",
    "QueueItem",
    "candidate_first",
    "chosen_waiting",
    "grades_mark",
    "label_queue",
    "load_case",
    "queue_size",
    "queue_total",
    "ranked_cases",
]

MAX_QUEUE = 500
"""Entries one :func:`label_queue` call returns at most."""


@dataclass(frozen=True)
class QueueItem:
    """One case waiting for a label: a graded (task, baseline, candidate, case id)."""

    task: str
    baseline: str
    """The baseline model as graded (``grades.baseline_model``)."""
    candidate: str
    """The candidate model as graded (``grades.candidate_model``): the label's candidate."""
    case_id: str
    disagreement: float
    """The larger of the judges' spread and a pairwise judge's uncertainty (module docstring)."""
    spread: float
    """``max - min`` of the case's mean grade across its judges."""
    judges: int
    """How many judges graded the case."""
    chosen: bool = field(default=False, compare=False)
    """The label sampler chose the case and nobody has labelled it yet: routing on what people
    would say waits for its label."""


@dataclass(frozen=True)
class LabelCase:
    """What the labelling page shows of one queued case (both answers of its latest grade)."""

    item: QueueItem
    run_id: str | None
    """The run whose answers are shown (stored with the label)."""
    prompt: str
    messages: list[dict[str, str]] | None
    """The conversation (``role``, ``content``), when the case was one; else ``None``."""
    candidate_text: str
    baseline_text: str
    candidate_tools: list[str]
    baseline_tools: list[str]
    system_prompt: str | None = None
    """The run's system prompt both sides were asked with (masked as stored), when there was one
    and the conversation holds no system message of its own (that one is in ``messages``)."""


def _filters(
    task: str | None, candidate: str | None, keys: Sequence[str] = ()
) -> tuple[list[str], dict[str, Any]]:
    """``case_stats`` conditions of the labellable cases (a case id, a grade) within the filters,
    or of the case keys (``id:...``) given, and their parameters."""
    where = ["case_key LIKE 'id:%'", "n > 0"]
    params: dict[str, Any] = {}
    if keys:
        where.append(f"case_key IN ({', '.join(f':k{i}' for i in range(len(keys)))})")
        params.update({f"k{i}": key for i, key in enumerate(keys)})
    if task:
        where.append("task = :task")
        params["task"] = task
    if candidate:
        where.append("candidate_model = :candidate")
        params["candidate"] = candidate
    return where, params


def _groups_sql(
    task: str | None, candidate: str | None, keys: Sequence[str] = ()
) -> tuple[str, dict[str, Any]]:
    """The per-case disagreement of every labellable case (one row per task, baseline, candidate,
    case), or of the case keys (``id:...``) given."""
    where, params = _filters(task, candidate, keys)
    sql = (
        "SELECT task, baseline_model, candidate_model, case_key, "
        "MAX(sum_quality / n) - MIN(sum_quality / n) AS spread, "
        "MAX(CASE WHEN grader_id LIKE 'pairwise:%' "
        "THEN 1.0 - 2.0 * ABS(sum_quality / n - 0.5) ELSE 0.0 END) AS unsure, "
        "COUNT(*) AS judges, MIN(first_id) AS first_id "
        f"FROM case_stats WHERE {' AND '.join(where)} "
        "GROUP BY task, baseline_model, candidate_model, case_key"
    )
    return sql, params


def _labelled(
    ledger: QualityLedger, task: str | None, candidate: str | None, annotator: str
) -> set[tuple[str, str, str]]:
    """(task, candidate, case id) the annotator has labelled, within the filters."""
    from llm_connect.ledger import LabelStore

    store = LabelStore(ledger.engine)
    labels = store.labels(task=task, candidate=candidate, annotator=annotator)
    return {(lb.task, lb.candidate, lb.case_id) for lb in labels}


_ORDER = (
    "CASE WHEN q.spread >= q.unsure THEN q.spread ELSE q.unsure END DESC, "
    "q.first_id ASC, q.task, q.candidate_model, q.case_key"
)

Ranked = Callable[[int], Sequence[Mapping[str, Any]]]
"""The first ``depth`` labellable entries by disagreement (:func:`ranked_cases`'s rows)."""


def ranked_cases(
    ledger: QualityLedger, *, task: str | None = None, candidate: str | None = None, depth: int
) -> list[Mapping[str, Any]]:
    """The first ``depth`` labellable entries (task, baseline, candidate, case) within the filters,
    by disagreement, largest first (module docstring), with their figures. The order depends
    on the grades alone (``case_stats``): it changes only when a grade arrives."""
    from sqlalchemy import text

    groups, params = _groups_sql(task, candidate)
    sql = f"SELECT * FROM ({groups}) q ORDER BY {_ORDER} LIMIT :depth"
    with ledger.engine.connect() as conn:
        rows: list[Mapping[str, Any]] = [
            dict(r) for r in conn.execute(text(sql), {**params, "depth": depth}).mappings()
        ]
        conn.rollback()
    return rows


def label_queue(
    ledger: QualityLedger,
    *,
    task: str | None = None,
    candidate: str | None = None,
    annotator: str,
    limit: int = 1,
    ranked: Ranked | None = None,
) -> list[QueueItem]:
    """The next ``limit`` cases ``annotator`` has not labelled: the sampler's chosen cases
    nobody has labelled, in its order, then the others by judges' disagreement.

    ``ranked``: gives the first ``depth`` entries by disagreement, as :func:`ranked_cases` reads
    them (the Label page keeps them until a new grade); default: read them now.

    ``task`` and ``candidate`` (the model name as graded) narrow the queue. The chosen cases
    come from ``label_sampling`` (at most ``limit``, by index), their figures from their own
    ``case_stats`` rows; the rest is one SQL statement that groups ``case_stats`` per case and
    orders it (module docstring). The annotator's own labels, read through
    :class:`~llm_connect.ledger.LabelStore`, are left out of the first ``limit + labelled``
    entries, so the reads stay bounded. (One statement joining the two read 100,000 grouped
    cases against a thousand chosen ones in 12 s on SQLite: ``scripts/bench/label_queue.py``.)
    """
    from sqlalchemy import text

    from llm_connect.ledger import SamplingStore

    if not 1 <= limit <= MAX_QUEUE:
        raise ValueError(f"limit must be in 1..{MAX_QUEUE}, not {limit}")
    done = _labelled(ledger, task, candidate, annotator)
    sampled = SamplingStore(ledger.engine).waiting(task or None, candidate or None, limit=limit)
    chosen = [(t, cand, "id:" + case_id) for t, cand, case_id in sampled]
    rows: list[Any] = []
    if chosen:
        rank = {key: i for i, key in enumerate(chosen)}
        keyed, keyed_params = _groups_sql(task, candidate, keys=[key for _, _, key in chosen])
        with ledger.engine.connect() as conn:
            found = conn.execute(text(keyed), keyed_params).mappings().all()
            conn.rollback()
        rows = sorted(
            (r for r in found if (r["task"], r["candidate_model"], r["case_key"]) in rank),
            key=lambda r: (rank[(r["task"], r["candidate_model"], r["case_key"])], r["baseline_model"]),
        )
    if len(rows) < limit:
        depth = limit + len(done) + len(rows)
        rest = ranked(depth) if ranked else ranked_cases(ledger, task=task, candidate=candidate, depth=depth)
        taken = set(chosen)
        rows += [r for r in rest if (r["task"], r["candidate_model"], r["case_key"]) not in taken]
    out: list[QueueItem] = []
    waiting = set(chosen)
    for row in rows:
        case_id = str(row["case_key"])[3:]
        if (row["task"], row["candidate_model"], case_id) in done:
            continue
        spread, unsure = float(row["spread"]), float(row["unsure"])
        out.append(
            QueueItem(
                task=row["task"],
                baseline=row["baseline_model"],
                candidate=row["candidate_model"],
                case_id=case_id,
                disagreement=round(max(spread, unsure), 12),
                spread=round(spread, 12),
                judges=int(row["judges"]),
                chosen=(row["task"], row["candidate_model"], row["case_key"]) in waiting,
            )
        )
        if len(out) == limit:
            break
    return out


def queue_total(ledger: QualityLedger, *, task: str | None = None, candidate: str | None = None) -> int:
    """Labellable entries (graded task, baseline, candidate, case id) within the filters."""
    from sqlalchemy import text

    where, params = _filters(task, candidate)
    sql = (
        "SELECT COUNT(*) FROM (SELECT DISTINCT task, baseline_model, candidate_model, case_key "
        f"FROM case_stats WHERE {' AND '.join(where)}) q"
    )
    with ledger.engine.connect() as conn:
        total = int(conn.execute(text(sql), params).scalar_one())
        conn.rollback()
    return total


def grades_mark(ledger: QualityLedger) -> tuple[int, int]:
    """The newest grade's id and the number of grades (``grade_stats``' running totals): the
    order and the count of the queue can only change when this does. The count catches a grade
    whose id is lower than one already seen (PostgreSQL writers may commit out of id order)."""
    from sqlalchemy import text

    sql = "SELECT (SELECT MAX(id) FROM grades), (SELECT SUM(n) FROM grade_stats)"
    with ledger.engine.connect() as conn:
        newest, count = conn.execute(text(sql)).one()
        conn.rollback()
    return int(newest or 0), int(count or 0)


def queue_size(
    ledger: QualityLedger,
    *,
    task: str | None = None,
    candidate: str | None = None,
    annotator: str,
    total: int | None = None,
) -> int:
    """About how many cases are left for ``annotator`` (queued cases minus their labels; exact
    unless a task has several baselines). ``total``: :func:`queue_total` of the same filters,
    when the caller kept it."""
    if total is None:
        total = queue_total(ledger, task=task, candidate=candidate)
    return max(0, total - len(_labelled(ledger, task, candidate, annotator)))


def chosen_waiting(ledger: QualityLedger, *, task: str | None = None, candidate: str | None = None) -> int:
    """Cases the label sampler chose that nobody has labelled yet (routing on what people would
    say waits for them), within the filters."""
    from llm_connect.ledger import SamplingStore

    return SamplingStore(ledger.engine).count_waiting(task or None, candidate or None)


def _messages(ledger: QualityLedger, digest: str | None) -> list[dict[str, str]] | None:
    if not digest:
        return None
    conversation = ledger.conversation(digest)
    if conversation is None:
        return None
    shown = []
    for message in conversation.messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        text = content if isinstance(content, str) else ""
        calls = _tools(message.get("tool_calls") and [c.get("function", c) for c in message["tool_calls"]])
        if calls:
            text = (text + "\n" if text else "") + "\n".join(f"tool call: {c}" for c in calls)
        shown.append({"role": str(message.get("role", "")), "content": text})
    return shown


def load_case(ledger: QualityLedger, item: QueueItem) -> LabelCase | None:
    """The answers of the latest grade of ``item`` (``None`` when it is gone)."""
    from sqlalchemy import text

    sql = (
        "SELECT run_id, prompt, prompt_sha256, baseline_text, candidate_text, baseline_tool_calls, "
        "candidate_tool_calls, run_config FROM grades WHERE task = :task AND case_id = :case AND "
        "baseline_model = :base AND candidate_model = :cand ORDER BY id DESC LIMIT 1"
    )
    params = {"task": item.task, "case": item.case_id, "base": item.baseline, "cand": item.candidate}
    with ledger.engine.connect() as conn:
        row = conn.execute(text(sql), params).mappings().first()
        conn.rollback()
    if row is None:
        return None
    messages = _messages(ledger, row["prompt_sha256"])
    own = messages is not None and any(m["role"] == "system" for m in messages)
    return LabelCase(
        item=item,
        run_id=row["run_id"],
        prompt=row["prompt"] or "",
        messages=messages,
        candidate_text=row["candidate_text"] or "",
        baseline_text=row["baseline_text"] or "",
        candidate_tools=_tools(row["candidate_tool_calls"]),
        baseline_tools=_tools(row["baseline_tool_calls"]),
        system_prompt=None if own else _system_prompt(row["run_config"]),
    )


def _system_prompt(config: Any) -> str | None:
    """The ``system_prompt`` of a grade's stored run config (JSON text, or decoded by the
    driver), ``None`` when it has none or cannot be read."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    value = config.get("system_prompt") if isinstance(config, Mapping) else None
    return value if isinstance(value, str) and value.strip() else None
