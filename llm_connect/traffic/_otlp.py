"""OTLP JSON as an OpenTelemetry Collector's file exporter writes it: one export per line.

A line is a ``TracesData`` (``{"resourceSpans": [...]}``) or a ``LogsData``
(``{"resourceLogs": [...]}``) in the OTLP JSON encoding (attribute values as
``AnyValue``: ``stringValue``, ``intValue`` as a decimal string, ``doubleValue``,
``boolValue``, ``arrayValue``, ``kvlistValue``; ids in hex). Chat spans are the
spans whose ``gen_ai.operation.name`` is ``chat`` (or ``text_completion``,
``generate_content``), or that carry ``gen_ai.request.model`` without an
operation name. Their content is read from, in order:

1. the span's attributes ``gen_ai.input.messages``, ``gen_ai.output.messages``,
   ``gen_ai.system_instructions``, ``gen_ai.tool.definitions`` (JSON strings;
   the semantic conventions' ``parts`` form);
2. the ``gen_ai.client.inference.operation.details`` event (the same attributes,
   structured), as a span event or as a log record of the span;
3. the per-message events of the v1.30 conventions that instrumentations emit by
   default (``gen_ai.system.message``, ``gen_ai.user.message``,
   ``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.choice``), as
   span events or as log records (``eventName``, body holding the content).

Log records reach their span by ``spanId``. Spans and log records are exported
by separate pipelines, so a span's records may come before or after it: a span
without content on its attributes waits until its answer event
(``gen_ai.choice`` or the details event) has arrived, and at most
``join_window`` spans (and as many spans' records) wait at once; the oldest is
then taken with what it has. Memory stays bounded however large the file.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from operator import itemgetter
from typing import Any

from llm_connect.traffic._call import (
    Answer,
    Deferred,
    Probe,
    Ready,
    Skip,
    TrafficCall,
    content_key,
    openai_message,
    openai_tool,
    parts_answer,
    parts_messages,
)
from llm_connect.traffic._json import loads

__all__ = ["DEFAULT_JOIN_WINDOW", "OtlpReader"]

DEFAULT_JOIN_WINDOW = 10_000
"""Spans waiting for their log records at most (and spans' records waiting for their span)."""

_CHAT_OPS = frozenset({"chat", "text_completion", "generate_content"})
_CHAT_MARKERS = frozenset({"gen_ai.operation.name", "gen_ai.request.model", "gen_ai.input.messages"})
"""A span with none of these attributes is not a chat span (tested before its attributes are decoded)."""
_GENAI = b"gen_ai"
"""In every key and event name a chat span or GenAI record is found by; a line holding neither it
nor a ``\\u`` escape (which could spell it) has no chat span or GenAI record."""
_key = itemgetter("key")
_CONTENT_KEYS = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
    }
)
_KEPT_ELSEWHERE = ("gen_ai.request.", "gen_ai.response.", "gen_ai.usage.")
"""Attributes the case holds elsewhere (run settings, the recorded answer): not repeated in its metadata."""
_KEY_SOURCES = ("gen_ai.input.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions")
"""The attributes a conversation is made of, in :meth:`_Span.content_key`'s order."""
_DETAILS = "gen_ai.client.inference.operation.details"
_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_CHOICE = "gen_ai.choice"
_EVENTS = frozenset({_DETAILS, _CHOICE, *_MESSAGE_EVENTS})
_SETTINGS = {
    "gen_ai.request.temperature": "temperature",
    "gen_ai.request.max_tokens": "max_tokens",
    "gen_ai.request.top_p": "top_p",
    "gen_ai.request.frequency_penalty": "frequency_penalty",
    "gen_ai.request.presence_penalty": "presence_penalty",
    "gen_ai.request.stop_sequences": "stop",
    "gen_ai.request.seed": "seed",
    "gen_ai.request.choice.count": "n",
}


def _value(v: Mapping[str, Any]) -> Any:
    """A decoded OTLP ``AnyValue``."""
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values") or ()]
    if "kvlistValue" in v:
        return {kv["key"]: _value(kv.get("value") or {}) for kv in v["kvlistValue"].get("values") or ()}
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attrs(items: Any) -> dict[str, Any]:
    if not items:
        return {}
    return {a["key"]: _value(a.get("value") or {}) for a in items}


def _json(value: Any) -> Any:
    """A content attribute: a JSON string on spans, already structured on events."""
    if isinstance(value, str):
        return loads(value)
    return value


def _raw_source(v: Any) -> Any:
    """A content attribute's source for :func:`content_key`: its JSON text, or its structured value."""
    if v is None:
        return None
    text = v.get("stringValue") if type(v) is dict or isinstance(v, Mapping) else None
    return text if isinstance(text, str) else _value(v)


def service_name(resource: Mapping[str, Any]) -> Any:
    """The ``service.name`` of a ``resourceSpans`` item (the last one given), or ``None``."""
    service = None
    for a in (resource.get("resource") or {}).get("attributes") or ():
        if a.get("key") == "service.name":
            service = _value(a.get("value") or {})
    return service


class _Span:
    """A chat span waiting to become a call; its attributes are decoded only when asked.

    ``raw`` maps each attribute key to its OTLP ``AnyValue``: deciding whether a
    span is a chat span, keying its conversation and checking its answer read a
    few keys; :attr:`attrs` decodes them all (once) when the call is built.
    """

    __slots__ = (
        "_attrs",
        "answered",
        "end",
        "events",
        "file",
        "line",
        "loc",
        "meta",
        "raw",
        "span_id",
        "start",
        "status",
    )

    def __init__(
        self, file: str, line: int, span: Mapping[str, Any], raw: dict[str, Any], service: Any
    ) -> None:
        self.file, self.line, self.raw = file, line, raw
        self._attrs: dict[str, Any] | None = None
        self.loc: tuple[int, int, int, Any, Any] | None = None
        """Where the span is in its line, when the reader was asked (:attr:`OtlpReader.locate`)."""
        self.span_id = span.get("spanId") or None
        self.start = span.get("startTimeUnixNano")
        self.end = span.get("endTimeUnixNano")
        self.status = span.get("status") or {}
        self.events: list[tuple[str, Any]] = []
        self.answered = "gen_ai.input.messages" in raw
        self.meta = {"trace_id": span.get("traceId"), "span_id": self.span_id, "span": span.get("name")}
        if service is not None:
            self.meta["service"] = service
        for event in span.get("events") or ():
            name = event.get("name")
            if name in _EVENTS:
                self.add(name, _attrs(event.get("attributes")))

    @classmethod
    def read_again(cls, file: str, line: int, span: Mapping[str, Any], service: Any) -> _Span:
        """The record of a chat span parsed again from its JSON (``_parallel``'s workers send spans)."""
        raw = {a["key"]: a.get("value") for a in span.get("attributes") or ()}
        return cls(file, line, span, raw, service)

    @property
    def attrs(self) -> dict[str, Any]:
        """Every attribute, decoded."""
        if self._attrs is None:
            self._attrs = {k: _value(v or {}) for k, v in self.raw.items()}
        return self._attrs

    def add(self, name: str, body: Any) -> None:
        self.events.append((name, body))
        if name in (_DETAILS, _CHOICE):
            self.answered = True

    def _get(self, key: str) -> Any:
        v = self.raw.get(key)
        return None if v is None else _value(v)

    def content_key(self) -> bytes | None:
        """:func:`content_key` of the content attributes' source text (``None``: content is on events)."""
        raw = self.raw
        if "gen_ai.input.messages" not in raw:
            return None
        return content_key(*(_raw_source(raw.get(k)) for k in _KEY_SOURCES))

    def error(self) -> str | None:
        """Why the call failed, when the span says it did."""
        status = self.status
        if status.get("code") in (2, "STATUS_CODE_ERROR") or "error.type" in self.raw:
            return status.get("message") or str(self._get("error.type") or "error")
        return None

    # -- Deferred (sampling decides before the case is built) ----------------------

    def probe(self) -> Probe | Skip:
        """Key, error and answer from the content attributes; spans with content on events are built."""
        key = self.content_key()
        if key is not None:
            try:
                output = self.raw.get("gen_ai.output.messages")
                text, calls, _ = parts_answer(_json(_value(output))) if output is not None else ("", [], None)
                requested = self._get("gen_ai.request.model")
                return Probe(
                    key,
                    self.error() is not None,
                    not text.strip() and not calls,
                    requested,
                    self._get("gen_ai.response.model") or requested,
                )
            except (ValueError, TypeError, KeyError, AttributeError):
                pass  # build() names the problem
        call = self.build()
        return call if isinstance(call, Skip) else Ready(call).probe()

    def build(self) -> TrafficCall | Skip:
        """The call (or the skip its content earns)."""
        return _finish(self)

    def metadata(self) -> dict[str, Any]:
        """The metadata the call gets."""
        meta = dict(self.meta)
        meta["attributes"] = {
            k: v
            for k, v in self.attrs.items()
            if k not in _CONTENT_KEYS and not k.startswith(_KEPT_ELSEWHERE)
        }
        return meta

    def tags(self) -> list[str]:
        """Spans carry no tags."""
        return []


class OtlpReader:
    """Reads OTLP JSON lines into :class:`TrafficCall` and :class:`Skip` values (see the module docstring)."""

    def __init__(self, join_window: int = DEFAULT_JOIN_WINDOW, *, defer: bool = False) -> None:
        self.join_window = max(1, join_window)
        self.defer = defer
        """Yield each chat span as a :class:`~llm_connect.traffic._call.Deferred` instead of its call."""
        self.spans_seen = 0
        """Every span read, chat or not."""
        self.notes: dict[str, int] = {}
        """Things worth saying that are not skips (records matching no chat span)."""
        self._pending: OrderedDict[str, _Span] = OrderedDict()
        self._orphans: OrderedDict[str, list[tuple[str, Any]]] = OrderedDict()
        self._done: OrderedDict[str, None] = OrderedDict()
        self.genai_records = 0
        """GenAI log records read (joined to their span or not)."""
        self.locate = False
        """Give each chat span its place (:attr:`_Span.loc`: resource, scope and span index, the
        span, the service), and yield a span that would wait for its records (unanswered, with
        a span id) instead of keeping it: for :mod:`llm_connect.traffic._parallel`."""

    def prime(self, spans_seen: int, done: Iterable[str], waiting: Iterable[tuple[str, _Span]]) -> None:
        """Continue another reader that stopped between lines with no log record read.

        ``spans_seen`` spans were read before; the chat spans ``done`` (their span ids,
        oldest first) were taken, so records arriving for them now are ignored; the
        spans ``waiting`` (span id and span, oldest first) wait for their records.
        """
        self.spans_seen = spans_seen
        for key in done:
            self._mark_done(key)
        self._pending.update(waiting)

    def read(self, lines: Iterable[tuple[str, int, bytes]]) -> Iterator[TrafficCall | Skip | Deferred]:
        """Calls and skips of ``(file, line number, raw line)`` items, then of spans still waiting.

        With :attr:`defer`, chat spans come as :class:`~llm_connect.traffic._call.Deferred`
        values (decoded only when built) instead of calls.
        """
        for file, lineno, raw in lines:
            yield from self.read_line(file, lineno, raw)
        yield from self.finish()

    def read_line(self, file: str, lineno: int, raw: bytes) -> Iterator[TrafficCall | Skip | Deferred]:
        """The calls and skips one line completes (:meth:`read` is this per line, then :meth:`finish`)."""
        try:
            obj = loads(raw)
        except ValueError as exc:
            yield Skip("not valid JSON", file, lineno, detail=str(exc))
            return
        if not isinstance(obj, dict) or not ("resourceSpans" in obj or "resourceLogs" in obj):
            yield Skip("not an OTLP export (no resourceSpans or resourceLogs)", file, lineno)
            return
        if _GENAI not in raw and b"\\u" not in raw:
            # no GenAI attribute, event or record anywhere in the line: count its spans
            self._count(obj)
            return
        for index, resource in enumerate(obj.get("resourceSpans") or ()):
            yield from self._spans(file, lineno, resource, index)
        for resource in obj.get("resourceLogs") or ():
            yield from self._logs(resource)

    def finish(self) -> Iterator[TrafficCall | Skip | Deferred]:
        """The spans still waiting, taken with what they have (after the last line)."""
        while self._pending:
            yield self._out(self._pending.popitem(last=False)[1])
        orphans = sum(len(v) for v in self._orphans.values())
        if orphans:
            self._note("GenAI log records matching no chat span", orphans)
        self._orphans.clear()

    def _count(self, obj: Mapping[str, Any]) -> None:
        for resource in obj.get("resourceSpans") or ():
            for scope in resource.get("scopeSpans") or ():
                self.spans_seen += len(scope.get("spans") or ())

    def _note(self, what: str, n: int = 1) -> None:
        self.notes[what] = self.notes.get(what, 0) + n

    def _out(self, span: _Span) -> TrafficCall | Skip | Deferred:
        return span if self.defer else _finish(span)

    def _spans(
        self, file: str, lineno: int, resource: Mapping[str, Any], index: int = 0
    ) -> Iterator[TrafficCall | Skip | Deferred]:
        service = service_name(resource)
        for scope_index, scope in enumerate(resource.get("scopeSpans") or ()):
            spans = scope.get("spans") or ()
            self.spans_seen += len(spans)
            for span_index, span in enumerate(spans):
                items = span.get("attributes")
                if not items or _CHAT_MARKERS.isdisjoint(map(_key, items)):
                    continue
                raw = {a["key"]: a.get("value") for a in items}  # decoded only for chat spans
                op = raw.get("gen_ai.operation.name")
                if op is not None:
                    op = _value(op)
                if op is None:
                    if "gen_ai.request.model" not in raw and "gen_ai.input.messages" not in raw:
                        continue
                elif op not in _CHAT_OPS:
                    continue
                record = _Span(file, lineno, span, raw, service)
                if self.locate:
                    record.loc = (index, scope_index, span_index, span, service)
                key = record.span_id
                if key and key in self._orphans:
                    for name, body in self._orphans.pop(key):
                        record.add(name, body)
                if record.answered or not key:
                    if key:
                        self._mark_done(key)
                    yield self._out(record)
                    continue
                if self.locate:  # the caller keeps the spans waiting (their place in the stream matters)
                    yield record
                    continue
                self._pending[key] = record
                if len(self._pending) > self.join_window:
                    yield self._out(self._pending.popitem(last=False)[1])

    def _mark_done(self, key: str) -> None:
        self._done[key] = None
        if len(self._done) > self.join_window:
            self._done.popitem(last=False)

    def _logs(self, resource: Mapping[str, Any]) -> Iterator[TrafficCall | Skip | Deferred]:
        for scope in resource.get("scopeLogs") or ():
            for record in scope.get("logRecords") or ():
                name = record.get("eventName")
                if name is None:  # SDKs before eventName put the name in an attribute
                    for a in record.get("attributes") or ():
                        if a.get("key") == "event.name":
                            name = _value(a.get("value") or {})
                if name not in _EVENTS:
                    continue
                self.genai_records += 1
                key = record.get("spanId")
                if not key or key in self._done:
                    continue
                body = (
                    _attrs(record.get("attributes")) if name == _DETAILS else _value(record.get("body") or {})
                )
                span = self._pending.get(key)
                if span is not None:
                    span.add(name, body)
                    if span.answered:
                        del self._pending[key]
                        self._mark_done(key)
                        yield self._out(span)
                    continue
                self._orphans.setdefault(key, []).append((name, body))
                if len(self._orphans) > self.join_window:
                    _, dropped = self._orphans.popitem(last=False)
                    self._note("GenAI log records matching no chat span", len(dropped))


# -- one span -> one call ---------------------------------------------------------------


def _finish(span: _Span) -> TrafficCall | Skip:
    try:
        return _call(span)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return Skip("unreadable GenAI content", span.file, span.line, span.span_id, detail=str(exc))


def _call(span: _Span) -> TrafficCall | Skip:
    attrs = span.attrs
    content = attrs if "gen_ai.input.messages" in attrs else None
    if content is None:
        content = next((body for name, body in span.events if name == _DETAILS), None)
    answer = Answer()
    tools = None
    if content is not None and "gen_ai.input.messages" in content:
        messages = parts_messages(
            _json(content["gen_ai.input.messages"]), _json(content.get("gen_ai.system_instructions"))
        )
        if "gen_ai.tool.definitions" in content:
            tools = [openai_tool(t) for t in _json(content["gen_ai.tool.definitions"])]
        if "gen_ai.output.messages" in content:
            answer.text, answer.tool_calls, answer.finish_reason = parts_answer(
                _json(content["gen_ai.output.messages"])
            )
    else:
        messages, answered = _event_messages(span.events, answer)
        if not messages:
            return Skip("no input messages", span.file, span.line, span.span_id)
        if not any("content" in m or "tool_calls" in m for m in messages):
            return Skip(
                "no input messages",
                span.file,
                span.line,
                span.span_id,
                detail="the message events carry no content (content capture off?)",
            )
        if not answered:
            answer = Answer()
    _span_answer(span, answer)
    return TrafficCall(
        file=span.file,
        line=span.line,
        ref=span.span_id,
        messages=messages,
        tools=tools,
        requested_model=attrs.get("gen_ai.request.model"),
        settings={_SETTINGS[k]: v for k, v in attrs.items() if k in _SETTINGS},
        answer=answer,
        error=span.error(),
        metadata=span.metadata(),
        content_key=span.content_key(),
    )


def _span_answer(span: _Span, answer: Answer) -> None:
    attrs = span.attrs
    answer.model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
    prompt, completion = attrs.get("gen_ai.usage.input_tokens"), attrs.get("gen_ai.usage.output_tokens")
    if prompt is not None or completion is not None:  # an instrumentation leaves out a zero count
        answer.prompt_tokens, answer.completion_tokens = int(prompt or 0), int(completion or 0)
    if answer.finish_reason is None:
        reasons = attrs.get("gen_ai.response.finish_reasons")
        if isinstance(reasons, list) and reasons and isinstance(reasons[0], str):
            answer.finish_reason = reasons[0]
    if span.start is not None and span.end is not None:
        answer.latency_ms = max(0, int(span.end) - int(span.start)) / 1e6


def _event_messages(events: list[tuple[str, Any]], answer: Answer) -> tuple[list[dict[str, Any]], bool]:
    """OpenAI messages from per-message events, and whether a ``gen_ai.choice`` filled ``answer``."""
    from llm_connect.traffic._call import choice_answer

    messages: list[dict[str, Any]] = []
    answered = False
    for name, body in events:
        body = body if isinstance(body, Mapping) else {}
        role = _MESSAGE_EVENTS.get(name)
        if role is not None:
            message: dict[str, Any] = {"role": role}
            if body.get("content") is not None:
                message["content"] = body["content"]
            if role == "assistant" and body.get("tool_calls"):
                message["tool_calls"] = body["tool_calls"]
            if role == "tool" and body.get("id") is not None:
                message["tool_call_id"] = body["id"]
            messages.append(openai_message(message))
        elif name == _CHOICE and not answered and int(body.get("index") or 0) == 0:
            answer.text, answer.tool_calls = choice_answer(body.get("message"))
            finish = body.get("finish_reason")
            answer.finish_reason = finish if isinstance(finish, str) else None
            answered = True
    return messages, answered
