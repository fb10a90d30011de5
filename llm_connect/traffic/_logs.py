"""OpenAI-style request/response logs and Langfuse exports.

**OpenAI-style logs** (``openai-log``): one JSON object per line, in one of
these shapes:

* ``{"request": BODY, "response": BODY, ...}`` (also ``request_body`` /
  ``response_body``; a BODY may be a JSON string; a ``request``/``response``
  holding ``{"body": BODY}`` is unwrapped, as gateways that log HTTP exchanges
  write them): BODY is a chat-completions request (``model``, ``messages``,
  ``tools``, ``tool_choice``, settings) and response (``choices``, ``usage``,
  ``model``). Optional: ``id``, ``latency_ms`` / ``duration_ms``, ``cost_usd``,
  ``metadata`` (an object), ``tags`` (strings), ``error``, ``status_code``.
* LiteLLM's ``StandardLoggingPayload`` (what its proxy's loggers write):
  ``messages``, ``response``, ``model``, ``model_parameters`` (the settings,
  tools included), ``status`` (``success``/``failure``), ``error_str``,
  ``response_cost`` (unknown when ``response_cost_failure_debug_info`` says LiteLLM
  could not price the model), ``startTime``/``endTime`` (seconds), ``request_tags``,
  ``metadata`` (its null slots left out; the client's ``requester_metadata`` and
  ``spend_logs_metadata`` lifted to the top level), ``id``, ``trace_id``,
  ``prompt_tokens``, ``completion_tokens``.

**Langfuse** (``langfuse``): observations (``ObservationsView``: ``type``
``GENERATION``, ``input``, ``output``, ``model``, ``modelParameters``,
``usageDetails``/``usage``, ``costDetails``/``calculatedTotalCost``,
``startTime``/``endTime``, ``level``, ``statusMessage``, ``metadata``) or traces
holding them (``observations``, with the trace's ``tags``, ``name``,
``userId``, ``sessionId``, ``metadata``). JSON Lines (one observation or trace
per line), or one JSON document: a list, ``{"data": [...]}``, or one trace.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from llm_connect.traffic._call import Answer, Skip, TrafficCall, choice_answer, openai_message, openai_tool
from llm_connect.traffic._json import loads

__all__ = ["read_langfuse", "read_openai_log"]

_NOT_SETTINGS = frozenset(
    {"model", "messages", "tools", "tool_choice", "stream", "stream_options", "user", "metadata", "store"}
)


def _body(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = loads(value)
        except ValueError:
            return value
    if isinstance(value, Mapping) and "body" in value and "messages" not in value and "choices" not in value:
        return _body(value["body"])
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _tokens(value: Any) -> int | None:
    n = _number(value)
    return None if n is None else int(n)


def _response_answer(response: Any, answer: Answer) -> None:
    """Fill ``answer`` from a chat-completions response body (or a plain text)."""
    if isinstance(response, str):
        answer.text = response
        return
    if not isinstance(response, Mapping):
        return
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        answer.text, answer.tool_calls = choice_answer(choices[0].get("message"))
        finish = choices[0].get("finish_reason")
        answer.finish_reason = finish if isinstance(finish, str) else None
    if isinstance(response.get("model"), str):
        answer.model = response["model"]
    usage = response.get("usage")
    if isinstance(usage, Mapping):
        answer.prompt_tokens = _tokens(usage.get("prompt_tokens"))
        answer.completion_tokens = _tokens(usage.get("completion_tokens"))


# LiteLLM's metadata slots that hold no fact about the call (the usage is the answer's own)
_LITELLM_NOT_METADATA = frozenset({"usage_object", "requester_metadata", "spend_logs_metadata"})


def _litellm_metadata(raw: Any) -> dict[str, Any]:
    """A ``StandardLoggingPayload``'s ``metadata`` as case metadata.

    LiteLLM fills every slot of its ``StandardLoggingMetadata`` (``user_api_key_*``, ``team_id``,
    ...), null when unknown: the null and empty ones are left out. The client's own request
    metadata (``requester_metadata``, as the proxy copies it; ``spend_logs_metadata``) is lifted
    to the top level, where ``--task-from`` and ``--stratify-by`` look; its ``tags`` are the
    payload's ``request_tags`` already.
    """
    if not isinstance(raw, Mapping):
        return {}
    out = {
        k: v
        for k, v in raw.items()
        if k not in _LITELLM_NOT_METADATA and v is not None and not (isinstance(v, (list, dict)) and not v)
    }
    for key in ("spend_logs_metadata", "requester_metadata"):
        own = raw.get(key)
        if isinstance(own, Mapping):
            out.update((k, v) for k, v in own.items() if k != "tags" and v is not None)
        elif own is not None:
            out[key] = own
    return out


def _openai_call(obj: Mapping[str, Any], file: str, lineno: int) -> TrafficCall | Skip:
    ref = obj.get("id") if isinstance(obj.get("id"), str) else None
    answer = Answer()
    metadata: dict[str, Any] = {}
    if "request" in obj or "request_body" in obj:
        request = _body(obj.get("request", obj.get("request_body")))
        response = _body(obj.get("response", obj.get("response_body")))
        if not isinstance(request, Mapping):
            return Skip("no input messages", file, lineno, ref, detail="the request is not an object")
        messages = request.get("messages")
        tools, tool_choice = request.get("tools"), request.get("tool_choice")
        settings = {k: v for k, v in request.items() if k not in _NOT_SETTINGS}
        requested = request.get("model")
        _response_answer(response, answer)
        latency = obj.get("latency_ms", obj.get("duration_ms"))
        if latency is None and isinstance(obj.get("response"), Mapping):
            latency = obj["response"].get("response_time")
        answer.latency_ms = _number(latency)
        answer.cost_usd = _number(obj.get("cost_usd"))
        status = _tokens(obj.get("status_code"))
        if status is None and isinstance(obj.get("response"), Mapping):
            status = _tokens(obj["response"].get("status"))
        error = obj.get("error") or (response.get("error") if isinstance(response, Mapping) else None)
        if error is None and status is not None and status >= 400:
            error = f"HTTP {status}"
        tags = obj.get("tags") or []
        if isinstance(obj.get("metadata"), Mapping):
            metadata.update(obj["metadata"])
    elif "messages" in obj:  # LiteLLM's StandardLoggingPayload
        messages = obj.get("messages")
        raw_params = obj.get("model_parameters")
        params: Mapping[str, Any] = raw_params if isinstance(raw_params, Mapping) else {}
        tools, tool_choice = params.get("tools"), params.get("tool_choice")
        settings = {k: v for k, v in params.items() if k not in _NOT_SETTINGS}
        requested = obj.get("model")
        _response_answer(_body(obj.get("response")), answer)
        if answer.prompt_tokens is None and obj.get("prompt_tokens") is not None:
            answer.prompt_tokens = _tokens(obj.get("prompt_tokens"))
            answer.completion_tokens = _tokens(obj.get("completion_tokens")) or 0
        start, end = _number(obj.get("startTime")), _number(obj.get("endTime"))
        if start is not None and end is not None:
            answer.latency_ms = max(0.0, end - start) * 1000.0
        # LiteLLM logs a cost of 0.0 with the reason beside it when it cannot price the model
        if obj.get("response_cost_failure_debug_info") is None:
            answer.cost_usd = _number(obj.get("response_cost"))
        error = obj.get("error_str") or ("failed" if obj.get("status") == "failure" else None)
        tags = obj.get("request_tags") or []
        metadata.update(_litellm_metadata(obj.get("metadata")))
        for key in ("trace_id", "call_type", "end_user", "model_group", "api_base"):
            if obj.get(key) is not None:
                metadata[key] = obj[key]
    else:
        return Skip("no input messages", file, lineno, ref, detail="neither 'request' nor 'messages'")
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, list) or not messages:
        return Skip("no input messages", file, lineno, ref)
    return TrafficCall(
        file=file,
        line=lineno,
        ref=ref,
        messages=[openai_message(m) for m in messages],
        tools=[openai_tool(t) for t in tools] if isinstance(tools, list) else tools,
        tool_choice=tool_choice,
        requested_model=requested if isinstance(requested, str) else None,
        settings=settings,
        answer=answer,
        error=None if not error else str(error)[:500],
        tags=[str(t) for t in tags] if isinstance(tags, list) else [],
        metadata=metadata,
    )


def read_openai_log(lines: Iterable[tuple[str, int, bytes]]) -> Iterator[TrafficCall | Skip]:
    """Calls and skips of OpenAI-style log lines (see the module docstring)."""
    for file, lineno, raw in lines:
        try:
            obj = loads(raw)
        except ValueError as exc:
            yield Skip("not valid JSON", file, lineno, detail=str(exc))
            continue
        if not isinstance(obj, Mapping):
            yield Skip("not a JSON object", file, lineno)
            continue
        yield _openai_call(obj, file, lineno)


# -- Langfuse --------------------------------------------------------------------------


def _iso_ms(start: Any, end: Any) -> float | None:
    if not isinstance(start, str) or not isinstance(end, str):
        return None
    try:
        a = datetime.fromisoformat(start.replace("Z", "+00:00"))
        b = datetime.fromisoformat(end.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, (b - a).total_seconds() * 1000.0)


def _langfuse_call(
    obs: Mapping[str, Any], trace: Mapping[str, Any], file: str, lineno: int
) -> TrafficCall | Skip:
    ref = obs.get("id") if isinstance(obs.get("id"), str) else None
    raw_input = obs.get("input")
    tools = tool_choice = None
    if isinstance(raw_input, Mapping):
        tools, tool_choice = raw_input.get("tools"), raw_input.get("tool_choice")
        raw_input = raw_input.get("messages", raw_input.get("input"))
    if isinstance(raw_input, str):
        raw_input = [{"role": "user", "content": raw_input}]
    if not isinstance(raw_input, list) or not raw_input:
        return Skip("no input messages", file, lineno, ref)
    answer = Answer()
    output = obs.get("output")
    if isinstance(output, Mapping) and "choices" in output:
        _response_answer(output, answer)
    elif isinstance(output, Mapping):
        answer.text, answer.tool_calls = choice_answer(output)
    elif isinstance(output, str):
        answer.text = output
    answer.model = obs.get("model") if isinstance(obs.get("model"), str) else None
    usage = obs.get("usageDetails") or obs.get("usage") or {}
    if isinstance(usage, Mapping) and usage:
        p = usage.get("input", usage.get("promptTokens", usage.get("prompt_tokens")))
        c = usage.get("output", usage.get("completionTokens", usage.get("completion_tokens")))
        if p is not None or c is not None:
            answer.prompt_tokens, answer.completion_tokens = _tokens(p) or 0, _tokens(c) or 0
    cost = obs.get("costDetails")
    answer.cost_usd = _number(cost.get("total")) if isinstance(cost, Mapping) and "total" in cost else None
    if answer.cost_usd is None:
        answer.cost_usd = _number(obs.get("calculatedTotalCost", obs.get("totalPrice")))
    answer.latency_ms = _iso_ms(obs.get("startTime"), obs.get("endTime"))
    if answer.latency_ms is None and _number(obs.get("latency")) is not None:
        answer.latency_ms = float(obs["latency"]) * 1000.0  # Langfuse's latency is in seconds
    raw_params = obs.get("modelParameters")
    params: Mapping[str, Any] = raw_params if isinstance(raw_params, Mapping) else {}
    settings = {
        k: (_number(v) if _number(v) is not None and isinstance(v, str) else v) for k, v in params.items()
    }
    metadata: dict[str, Any] = {}
    for source in (trace.get("metadata"), obs.get("metadata")):
        if isinstance(source, Mapping):
            metadata.update(source)
    for key, value in (
        ("trace_id", obs.get("traceId") or trace.get("id")),
        ("trace_name", trace.get("name")),
        ("name", obs.get("name")),
        ("user_id", trace.get("userId")),
        ("session_id", trace.get("sessionId")),
        ("prompt_name", obs.get("promptName")),
        ("environment", obs.get("environment")),
    ):
        if value is not None:
            metadata[key] = value
    error = (obs.get("statusMessage") or "error") if obs.get("level") == "ERROR" else None
    tags = trace.get("tags") or obs.get("tags") or []
    return TrafficCall(
        file=file,
        line=lineno,
        ref=ref,
        messages=[openai_message(m) for m in raw_input],
        tools=[openai_tool(t) for t in tools] if isinstance(tools, list) else None,
        tool_choice=tool_choice,
        requested_model=answer.model,
        settings=settings,
        answer=answer,
        error=error,
        tags=[str(t) for t in tags] if isinstance(tags, list) else [],
        metadata=metadata,
    )


def _langfuse_items(obj: Any, file: str, lineno: int) -> Iterator[TrafficCall | Skip]:
    if isinstance(obj, list):
        for item in obj:
            yield from _langfuse_items(item, file, lineno)
        return
    if not isinstance(obj, Mapping):
        yield Skip("not a Langfuse observation or trace", file, lineno)
        return
    if isinstance(obj.get("data"), list):
        yield from _langfuse_items(obj["data"], file, lineno)
        return
    if isinstance(obj.get("observations"), list):  # a trace with its observations
        for obs in obj["observations"]:
            if isinstance(obs, Mapping) and obs.get("type") == "GENERATION":
                yield _langfuse_call(obs, obj, file, lineno)
        return
    if obj.get("type") == "GENERATION":
        yield _langfuse_call(obj, {}, file, lineno)


def read_langfuse(
    lines: Iterable[tuple[str, int, bytes]], whole: Iterable[tuple[str, bytes]] = ()
) -> Iterator[TrafficCall | Skip]:
    """Calls and skips of Langfuse JSON Lines, then of whole JSON documents ``(file, text)``."""
    for file, lineno, raw in lines:
        try:
            obj = loads(raw)
        except ValueError as exc:
            yield Skip("not valid JSON", file, lineno, detail=str(exc))
            continue
        yield from _langfuse_items(obj, file, lineno)
    for file, text in whole:
        try:
            obj = loads(text)
        except ValueError as exc:
            yield Skip("not valid JSON", file, 1, detail=str(exc))
            continue
        yield from _langfuse_items(obj, file, 1)
