"""Following traffic files as they grow (``traffic.Follower``, issue 38): new complete lines by
byte offset, a partial last line waiting, rotation and truncation picked up, positions that only
pass settled calls, and the per-call id, sample and task the watch keys on."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from llm_connect.errors import TrafficImportError
from llm_connect.traffic import FilePosition, Follower, TrafficCall, call_id, call_task, sampled, watch_case
from tests.traffic._otlp_attrs import chat_span, otlp_attr


def _line(i: int, *, task: str = "qa", ref: bool = True) -> str:
    obj: dict[str, Any] = {
        "request": {"model": "big", "messages": [{"role": "user", "content": f"question {i}"}]},
        "response": {
            "model": "big",
            "choices": [{"message": {"role": "assistant", "content": f"answer {i}"}}],
        },
        "metadata": {"task": task},
        "tags": [f"team:t{i % 2}"],
    }
    if ref:
        obj["id"] = f"req-{i}"
    return json.dumps(obj) + "\n"


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)


def _refs(follower: Follower, *, settle: bool = True) -> list[str | None]:
    poll = follower.poll()
    if settle:
        for item in poll.calls:
            follower.settle(item)
    return [item.call.ref for item in poll.calls]


def test_new_lines_are_read_once_and_a_partial_line_waits(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text(_line(0) + _line(1), encoding="utf-8")
    follower = Follower([str(log)])
    assert _refs(follower) == ["req-0", "req-1"]
    assert _refs(follower) == []
    whole = _line(2)
    _append(log, whole[:30])  # being written
    assert _refs(follower) == []
    _append(log, whole[30:] + _line(3))
    assert _refs(follower) == ["req-2", "req-3"]
    [pos] = follower.positions()
    assert (pos.offset, pos.line) == (log.stat().st_size, 4)
    follower.close()


def test_positions_stop_before_the_first_unsettled_call_and_a_restart_goes_on_there(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text("".join(_line(i) for i in range(4)), encoding="utf-8")
    follower = Follower([str(log)])
    poll = follower.poll()
    for item in poll.calls:
        if item.call.ref != "req-2":
            follower.settle(item)
    [pos] = follower.positions()
    assert pos.line == 2 and pos.offset == len((_line(0) + _line(1)).encode())
    follower.close()
    again = Follower([str(log)], positions={str(log): pos})
    assert _refs(again) == ["req-2", "req-3"]
    again.close()


def test_a_bad_line_is_a_skip_with_the_importers_reason_and_settles(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text(_line(0) + "not json\n" + _line(2), encoding="utf-8")
    follower = Follower([str(log)])
    poll = follower.poll()
    assert [s.reason for s in poll.skips] == ["not valid JSON"] and poll.skips[0].line == 2
    for item in poll.calls:
        follower.settle(item)
    assert follower.positions()[0].line == 3
    follower.close()


def test_a_rotated_file_is_read_to_its_end_then_the_new_one_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text(_line(0), encoding="utf-8")
    follower = Follower([str(log)])
    assert _refs(follower) == ["req-0"]
    _append(log, _line(1))  # written before the rotation, not read yet
    log.rename(tmp_path / "calls.jsonl.1")
    log.write_text(_line(2), encoding="utf-8")
    poll = follower.poll()
    assert [i.call.ref for i in poll.calls] == ["req-1"] and "rotated" in poll.notes[0]
    for item in poll.calls:
        follower.settle(item)
    [pos] = follower.positions()  # the old file settled: the new one takes its place
    assert pos.file_id == f"{log.stat().st_dev}:{log.stat().st_ino}" and pos.offset == 0
    assert _refs(follower) == ["req-2"]
    follower.close()


def test_a_file_rotated_while_nothing_followed_it_is_finished_from_its_sibling(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text(_line(0), encoding="utf-8")
    first = Follower([str(log)])
    assert _refs(first) == ["req-0"]
    [pos] = first.positions()
    first.close()
    _append(log, _line(1))
    log.rename(tmp_path / "calls.jsonl.1")
    log.write_text(_line(2), encoding="utf-8")
    second = Follower([str(log)], positions={str(log): pos})
    poll = second.poll()
    assert any("rest of" in n for n in poll.notes)
    got = [i.call.ref for i in poll.calls]
    for item in poll.calls:
        second.settle(item)
    second.positions()
    got += _refs(second) + _refs(second)
    assert got == ["req-1", "req-2"]
    second.close()


@pytest.mark.parametrize("how", ["shorter", "rewritten"])
def test_a_truncated_file_is_read_again_from_its_start(tmp_path: Path, how: str) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text(_line(0) + _line(1), encoding="utf-8")
    follower = Follower([str(log)])
    assert _refs(follower) == ["req-0", "req-1"]
    follower.positions()
    with log.open("r+b") as fh:  # copytruncate: the same inode, cut and written again
        fh.truncate(0)
    text = _line(7) if how == "shorter" else _line(7) + _line(8) + _line(9)
    log.write_text(text, encoding="utf-8")
    poll = follower.poll()
    assert any("truncated" in n for n in poll.notes)
    assert [i.call.ref for i in poll.calls] == (
        ["req-7"] if how == "shorter" else ["req-7", "req-8", "req-9"]
    )
    follower.close()


def _kv(**values: Any) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        return v if isinstance(v, dict) else {"stringValue": v}

    return {"kvlistValue": {"values": [{"key": k, "value": value(v)} for k, v in values.items()]}}


def test_otlp_spans_waiting_for_their_records_hold_the_position(tmp_path: Path) -> None:
    span = chat_span(
        1, [otlp_attr("gen_ai.operation.name", "chat"), otlp_attr("gen_ai.request.model", "big")]
    )
    spans = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    records = [
        {"eventName": "gen_ai.user.message", "spanId": span["spanId"], "body": _kv(content="hi")},
        {
            "eventName": "gen_ai.choice",
            "spanId": span["spanId"],
            "body": _kv(index={"intValue": "0"}, message=_kv(role="assistant", content="yo")),
        },
    ]
    logs = {"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}
    trace = tmp_path / "spans.jsonl"
    trace.write_text(json.dumps(spans) + "\n", encoding="utf-8")
    follower = Follower([str(trace)])
    assert _refs(follower) == []  # the span waits for its log records
    assert follower.positions()[0].offset == 0
    _append(trace, json.dumps(logs) + "\n")
    assert _refs(follower) == [span["spanId"]]
    assert follower.positions()[0].line == 2
    follower.close()


def test_a_compressed_file_or_a_whole_json_document_cannot_be_followed(tmp_path: Path) -> None:
    with pytest.raises(TrafficImportError, match="compressed"):
        Follower([str(tmp_path / "calls.jsonl.gz")])
    doc = tmp_path / "export.json"
    doc.write_text(json.dumps([{"type": "GENERATION", "input": "hi", "output": "yo"}]) + "\n")
    with Follower([str(doc)]) as follower, pytest.raises(TrafficImportError, match="whole JSON document"):
        follower.poll()


def test_a_file_not_there_yet_is_waited_for_and_start_at_end_skips_what_is_there(tmp_path: Path) -> None:
    later = tmp_path / "later.jsonl"
    follower = Follower([str(later)], start_at_end=True)
    poll = follower.poll()
    assert poll.calls == [] and "not there" in poll.notes[0]
    later.write_text(_line(0) + _line(1)[:20], encoding="utf-8")
    assert _refs(follower) == []  # it appeared holding req-0: skipped as "already there"
    _append(later, _line(1)[20:])
    assert _refs(follower) == ["req-1"]
    follower.close()


def test_a_pattern_follows_the_files_that_appear_later_from_their_start(tmp_path: Path) -> None:
    """``logs/app-*.jsonl``: a file there at the first look is a path like any (here from its
    end); one created while watching, or while the watch was down, holds only calls not seen
    and is read from its start; a restart from the stored positions reads nothing twice."""
    (tmp_path / "app-1.jsonl").write_text(_line(0), encoding="utf-8")
    pattern = str(tmp_path / "app-*.jsonl")
    follower = Follower([pattern], start_at_end=True)
    assert _refs(follower) == []  # req-0 was there before the watch
    _append(tmp_path / "app-1.jsonl", _line(1))
    (tmp_path / "app-2.jsonl").write_text(_line(2) + _line(3), encoding="utf-8")
    poll = follower.poll()
    assert [i.call.ref for i in poll.calls] == ["req-1", "req-2", "req-3"]
    assert any("app-2.jsonl: new, matches" in n for n in poll.notes)
    for item in poll.calls:
        follower.settle(item)
    positions = {p.path: p for p in follower.positions()}
    assert set(positions) == {str(tmp_path / "app-1.jsonl"), str(tmp_path / "app-2.jsonl")}
    follower.close()
    (tmp_path / "app-3.jsonl").write_text(_line(4), encoding="utf-8")  # while the watch was down
    _append(tmp_path / "app-2.jsonl", _line(5))
    again = Follower([pattern], positions=positions, start_at_end=True)
    poll = again.poll()
    assert sorted(i.call.ref or "" for i in poll.calls) == ["req-4", "req-5"]
    assert any("app-3.jsonl: new since the watch stopped" in n for n in poll.notes)
    for item in poll.calls:
        again.settle(item)
    assert _refs(again) == []
    (tmp_path / "app-4.jsonl").write_text(_line(6), encoding="utf-8")
    assert _refs(again) == ["req-6"]
    again.close()


def test_a_pattern_does_not_follow_a_rotated_file_a_second_time(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    log.write_text(_line(0), encoding="utf-8")
    follower = Follower([str(tmp_path / "calls.log*")])
    assert _refs(follower) == ["req-0"]
    _append(log, _line(1))  # written before the rotation
    log.rename(tmp_path / "calls.log.1")
    log.write_text(_line(2), encoding="utf-8")
    got = _refs(follower)
    follower.positions()  # the old file is settled: the new one takes its place
    got += _refs(follower) + _refs(follower)
    assert got == ["req-1", "req-2"]  # calls.log.1 matches the pattern but is the file read before
    assert [p.path for p in follower.positions()] == [str(log)]
    follower.close()


def test_a_pattern_resumed_after_a_rotation_reads_the_rest_of_the_old_file_once(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    log.write_text(_line(0), encoding="utf-8")
    pattern = str(tmp_path / "calls.log*")
    first = Follower([pattern])
    assert _refs(first) == ["req-0"]
    positions = {p.path: p for p in first.positions()}
    first.close()
    _append(log, _line(1))  # while the watch was down: written, then rotated
    log.rename(tmp_path / "calls.log.1")
    log.write_text(_line(2), encoding="utf-8")
    second = Follower([pattern], positions=positions)
    got = _refs(second)
    second.positions()
    got += _refs(second) + _refs(second)
    assert got == ["req-1", "req-2"]  # calls.log.1 is the file read before, not a new one
    second.close()


def test_a_pattern_that_matches_nothing_yet_says_so_and_waits(tmp_path: Path) -> None:
    follower = Follower([str(tmp_path / "*.jsonl")])
    poll = follower.poll()
    assert poll.calls == [] and poll.notes == [
        f"{tmp_path / '*.jsonl'}: no file matches (yet); waiting for one"
    ]
    (tmp_path / "a.jsonl").write_text(_line(0), encoding="utf-8")
    assert _refs(follower) == ["req-0"]
    follower.close()


def _call(ref: str | None, **kw: Any) -> TrafficCall:
    from llm_connect.traffic import Answer

    return TrafficCall(
        file="f",
        line=1,
        ref=ref,
        messages=[{"role": "user", "content": "hi"}],
        answer=Answer(text="yo"),
        **kw,
    )


def test_call_ids_samples_and_tasks_are_deterministic() -> None:
    assert call_id(_call("span-1")) == "span-1"
    anonymous = call_id(_call(None, metadata={"task": "qa"}))
    assert anonymous.startswith("h:") and anonymous == call_id(_call(None, metadata={"task": "qa"}))
    assert anonymous != call_id(_call(None, metadata={"task": "other"}))
    ids = [f"call-{i}" for i in range(4000)]
    chosen = [i for i in ids if sampled(i, 0.25)]
    assert chosen == [i for i in ids if sampled(i, 0.25)]  # the same calls every time
    assert 800 < len(chosen) < 1200 and all(sampled(i, 1.0) for i in ids)
    assert set(chosen) <= {i for i in ids if sampled(i, 0.5)}  # a larger share keeps the smaller one's
    call = _call("x", metadata={"task": "qa", "attributes": {"app.task": "otel"}}, tags=["lang:fr"])
    assert call_task(call, "meta", "task") == "qa" and call_task(call, "meta", "app.task") == "otel"
    assert call_task(call, "tag", "lang") == "fr" and call_task(call, "tag", "team") is None


def test_a_watched_call_becomes_the_case_suite_import_writes(tmp_path: Path) -> None:
    case = watch_case(_call("r1", requested_model="big"), format="openai-log", task="qa", case_id="r1")
    assert isinstance(case, dict)
    assert case["id"] == "r1" and case["task"] == "qa" and case["responses"]["production"]["text"] == "yo"
    empty = _call("r2")
    assert empty.answer is not None
    empty.answer.text = ""
    skip = watch_case(empty, format="openai-log", task="qa", case_id="r2")
    assert not isinstance(skip, dict) and skip.reason == "empty answer"


def test_positions_round_trip_through_their_fields(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text(_line(0), encoding="utf-8")
    follower = Follower([str(log)])
    _refs(follower)
    [pos] = follower.positions()
    follower.close()
    assert FilePosition(**{k: getattr(pos, k) for k in FilePosition.__dataclass_fields__}) == pos
    assert pos.fingerprint_bytes == min(256, os.path.getsize(log))
