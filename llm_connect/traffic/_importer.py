"""One production call into a suite case: :class:`_Importer` checks, masks, deduplicates and
counts (what ``import_traffic`` and the ``--workers`` readers share), with the options and the
report of an import.

Per call, in order: a reader's skip is counted by reason (the first few named); an errored
call or one with an empty answer is dropped (counted); credentials are masked
(:mod:`llm_connect._secrets`); with ``redact`` personal data is masked
(:mod:`llm_connect.traffic._redact`); the conversation is checked by
:class:`~llm_connect.types.Conversation` (refused: skipped); an exact duplicate of an earlier
conversation is removed unless duplicates are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llm_connect._secrets import mask_secrets
from llm_connect.errors import TrafficImportError
from llm_connect.traffic._call import Skip, TrafficCall
from llm_connect.traffic._otlp import DEFAULT_JOIN_WINDOW
from llm_connect.traffic._redact import Redactor, mask_all, mask_request
from llm_connect.types import Conversation, ConversationError

__all__ = ["EXAMPLES", "ImportOptions", "ImportReport", "meta_path"]

CHECKED = ("messages", "tools", "tool_choice")
"""Case keys :class:`Conversation` has checked for NaN and infinity (not walked again when written)."""

Checked = tuple[list[Any], "list[Any] | None", Conversation, "Redactor | None"]
"""A call's masked messages and tools, its conversation and redactor (:meth:`_Importer.check`)."""

EXAMPLES = 5
"""How many skipped records a report names (file, line, id)."""


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


def dropped(call: TrafficCall) -> str | None:
    """Why ``call`` is left out on purpose (``errored call``, ``empty answer``), or ``None``."""
    if call.error is not None:
        return "errored call"
    if call.answer is None or call.answer.empty:
        return "empty answer"
    return None


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
        reason = dropped(call)
        if reason is not None:
            r.dropped[reason] = r.dropped.get(reason, 0) + 1
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
        checked = self.check(call)
        if isinstance(checked, Skip):
            self.skip(checked)
            return None
        if self.duplicate(int(checked[2].digest[:16], 16)):
            return None
        return self.case(call, checked), checked[2].digest

    def check(self, call: TrafficCall) -> Checked | Skip:
        """An admitted call's masked messages and tools, its :class:`Conversation` and redactor,
        or the skip of a conversation refused (not counted here)."""
        assert call.answer is not None
        redactor = Redactor() if self.options.redact else None
        messages = _mask_messages(call.messages or [], redactor)
        tools = mask_all(call.tools) if call.tools else None
        try:
            conversation = Conversation(messages, tools=tools, tool_choice=call.tool_choice)
        except ConversationError as exc:
            return Skip("conversation refused", call.file, call.line, call.ref, detail=str(exc))
        return messages, tools, conversation, redactor

    def duplicate(self, key: int) -> bool:
        """Whether the conversation keyed ``key`` was seen before and is removed (counted)."""
        if key in self.seen:
            if not self.options.keep_duplicates:
                self.report.duplicates += 1
                return True
            return False
        self.seen.add(key)
        return False

    def case(self, call: TrafficCall, checked: Checked) -> dict[str, Any]:
        """The case of a checked call that is not a removed duplicate (its notes counted)."""
        r, opts = self.report, self.options
        messages, tools, conversation, redactor = checked
        assert call.answer is not None
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
        return case

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

    def unique(self, base: str) -> str:
        """``base``, or ``base#2``, ``base#3``... : the first id no earlier case has."""
        n, candidate = 1, base
        while hash(candidate) in self.ids:
            n += 1
            candidate = f"{base}#{n}"
        self.ids.add(hash(candidate))
        return candidate

    def unique_id(self, case: dict[str, Any]) -> None:
        """Give ``case`` an id no earlier case has (:meth:`unique`)."""
        case["id"] = self.unique(str(case["id"]))
