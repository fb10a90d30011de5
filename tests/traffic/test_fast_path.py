"""The fast path: orjson or not, the same suite; with --sample, drawing first draws what building all would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_connect.grading import load_suite
from llm_connect.traffic import ImportOptions, import_traffic
from llm_connect.traffic import _json as fastjson
from tests.fixtures.skips import DEV_EXTRA_ENV, skip_or_fail
from tests.traffic._otlp_attrs import chat_span, genai_messages, otlp_attr

ORJSON = fastjson.use_orjson(True)


@pytest.fixture(params=[True, False], ids=["orjson", "json"])
def parser(request: pytest.FixtureRequest) -> Iterator[bool]:
    if request.param and not ORJSON:
        skip_or_fail(
            DEV_EXTRA_ENV, "orjson is not installed: pip install -e '.[dev]'", tests="the orjson path"
        )
    fastjson.use_orjson(request.param)
    yield request.param
    fastjson.use_orjson(True)


def _span(i: int, *, feature: str, text: str | None = None, answer: str = "fine") -> dict[str, Any]:
    attrs = [
        otlp_attr("gen_ai.operation.name", "chat"),
        otlp_attr("gen_ai.request.model", "gpt-4o"),
        otlp_attr("gen_ai.request.temperature", 0.5),
        otlp_attr("gen_ai.usage.input_tokens", 3),
        otlp_attr("app.feature", feature),
    ]
    return chat_span(i, attrs + genai_messages(text or f"question {i}", answer))


def _http_span(i: int) -> dict[str, Any]:
    return {
        "traceId": f"{i:032x}",
        "spanId": f"f{i:015x}",
        "name": "GET /",
        "attributes": [otlp_attr("http.route", "/")],
    }


def _otlp(path: Path, spans: list[dict[str, Any]], per_line: int = 7) -> Path:
    with path.open("w") as fh:
        for start in range(0, len(spans), per_line):
            export = {"resourceSpans": [{"scopeSpans": [{"spans": spans[start : start + per_line]}]}]}
            fh.write(json.dumps(export) + "\n")
    return path


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    spans: list[dict[str, Any]] = []
    for i in range(120):
        spans.append(_span(i, feature="refunds" if i % 3 else "billing"))
        spans.append(_http_span(i))
    spans += [_span(1000 + i, feature="refunds", text=f"question {i}") for i in range(10)]  # duplicates
    spans.append(_span(2000, feature="refunds", answer=""))  # dropped: empty answer
    return _otlp(tmp_path / "traces.jsonl", spans)


def _cases(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_orjson_and_json_write_the_same_suite(traces: Path, tmp_path: Path) -> None:
    suites = []
    for on in (True, False):
        if on and not ORJSON:
            continue
        fastjson.use_orjson(on)
        try:
            out = tmp_path / f"{on}.jsonl"
            report = import_traffic([traces], out)
        finally:
            fastjson.use_orjson(True)
        assert (report.spans, report.written, report.duplicates) == (251, 120, 10)
        assert report.dropped == {"empty answer": 1}
        suites.append(_cases(out))
    assert all(s == suites[0] for s in suites)


@pytest.mark.parametrize("stratify", [None, "task", "app.feature"])
def test_drawing_first_draws_what_building_every_case_draws(
    parser: bool, traces: Path, tmp_path: Path, stratify: str | None
) -> None:
    options = ImportOptions(sample=25, seed=3, stratify_by=stratify)
    first = import_traffic([traces], tmp_path / "first.jsonl", options)
    every = import_traffic(
        [traces], tmp_path / "every.jsonl", ImportOptions(**{**vars(options), "strict": True})
    )
    assert _cases(tmp_path / "first.jsonl") == _cases(tmp_path / "every.jsonl")
    assert first.strata == every.strata and first.written == 25
    assert (first.calls, first.duplicates, first.eligible, first.dropped) == (
        every.calls,
        every.duplicates,
        every.eligible,
        every.dropped,
    )
    other = import_traffic([traces], tmp_path / "other.jsonl", ImportOptions(sample=25, seed=4))
    assert [c["id"] for c in _cases(tmp_path / "other.jsonl")] != [
        c["id"] for c in _cases(tmp_path / "first.jsonl")
    ]
    assert other.written == 25


def _log(i: int, *, refused: bool = False) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"question {i}"}]
    if refused:  # a tool result answering no call: Conversation refuses it
        messages.append({"role": "tool", "tool_call_id": "nope", "content": "42"})
    return {
        "id": f"r{i}",
        "request": {"model": "gpt-4o", "messages": messages},
        "response": {"model": "gpt-4o", "choices": [{"message": {"role": "assistant", "content": "ok"}}]},
    }


@pytest.mark.parametrize("refused", [40, 150])
def test_a_refused_conversation_drawn_is_replaced(parser: bool, tmp_path: Path, refused: int) -> None:
    """A few refusals: the spares replace them; many (past the spares): every case is built instead."""
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(_log(i, refused=i < refused)) + "\n" for i in range(200)))
    report = import_traffic([path], tmp_path / "s.jsonl", ImportOptions(sample=20, seed=1))
    suite = load_suite(tmp_path / "s.jsonl")
    assert report.written == len(suite.cases) == 20 and not report.warnings
    assert all(int(c.id[1:]) >= refused for c in suite.cases)
    assert 1 <= report.skipped["conversation refused"] <= refused
    if refused == 150:  # past the spares: every case built, every refusal counted
        assert report.skipped == {"conversation refused": 150}


def test_nan_is_read_and_its_case_skipped_either_way(parser: bool, tmp_path: Path) -> None:
    row = _log(1)
    line = json.dumps(row)[:-1] + ', "metadata": {"score": NaN}}'  # orjson refuses it, json reads it
    path = tmp_path / "log.jsonl"
    path.write_text(line + "\n" + json.dumps(_log(2)) + "\n")
    report = import_traffic([path], tmp_path / "s.jsonl")
    assert report.written == 1 and report.skipped == {"not JSON (NaN or infinity)": 1}
    assert fastjson.dumps_line({"a": [1.0, {"b": float("inf")}]}) is None
    assert (
        fastjson.dumps_line({"a": [1.5, "x", None, True, 2**70]})
        == b'{"a":[1.5,"x",null,true,1180591620717411303424]}\n'
    )


def test_lines_without_genai_are_counted_and_escaped_keys_still_found(parser: bool, tmp_path: Path) -> None:
    """A line with no ``gen_ai`` bytes is only counted; ``gen\\u005fai`` (escaped) is still a chat span."""
    plain = {"resourceSpans": [{"scopeSpans": [{"spans": [_http_span(i) for i in range(5)]}]}]}
    chat = {"resourceSpans": [{"scopeSpans": [{"spans": [_span(1, feature="x"), _http_span(9)]}]}]}
    escaped = json.dumps(chat).replace("gen_ai", "gen\\u005fai")  # valid JSON, the same keys
    assert "gen_ai" not in escaped and json.loads(escaped) == chat
    logs = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"eventName": "other", "spanId": "01"}]}]}]}
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join([json.dumps(plain), escaped, json.dumps(logs), json.dumps(plain), "{oops"]) + "\n"
    )
    report = import_traffic([path], tmp_path / "s.jsonl")
    assert (report.spans, report.calls, report.written) == (12, 1, 1)
    assert report.skipped == {"not valid JSON": 1}
    case = _cases(tmp_path / "s.jsonl")[0]
    assert case["messages"] == [{"role": "user", "content": "question 1"}]


class _Str(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        [{"role": "user", "content": "hi", "n": [1, 2.5, True, None, ("a", -0.0)]}],
        {"a": {"b": [{"c": float("nan")}]}},
        [1, [2, [float("inf")]]],
        {"k": {1: "int key"}},
        {"k": {_Str("sub"): _Str("x")}},
        [{"role": "user", "content": b"bytes"}],
        [{"role": "user", "content": object()}],
        __import__("collections").OrderedDict(a=[1, {"b": 2}]),
        [__import__("enum").IntEnum("E", "A").A, 1e308],
    ],
)
def test_conversation_copy_fast_path_is_the_slow_copy(value: Any) -> None:
    """``Conversation``'s plain-type copy gives the slow copy's value, or its error (same field, same words)."""
    from llm_connect import _conversation as conv

    def outcome(copy: Any) -> Any:
        try:
            got = copy(value, "messages")
        except conv.ConversationError as exc:
            return ("error", str(exc), exc.field)
        return ("value", got, json.dumps(got, default=repr), repr(got))

    assert outcome(conv._json_copy) == outcome(conv._slow_copy)


def test_the_garbage_collector_is_back_after_an_import(traces: Path, tmp_path: Path) -> None:
    """The import turns the cyclic GC off while it runs; on again afterwards, also after a failure."""
    import gc

    from llm_connect.errors import TrafficImportError

    assert gc.isenabled()
    import_traffic([traces], tmp_path / "s.jsonl")
    assert gc.isenabled()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": []}\n{oops\n')
    with pytest.raises(TrafficImportError):
        import_traffic([bad], tmp_path / "t.jsonl", ImportOptions(strict=True))
    assert gc.isenabled()
    gc.disable()
    try:
        import_traffic([traces], tmp_path / "u.jsonl")
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()
