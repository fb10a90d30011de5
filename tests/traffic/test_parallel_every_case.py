"""Every case (no ``--sample``) built by worker processes: the same suite and sidecar (issue 25).

Small ``chunk_bytes`` force many ranges on small files, so that duplicates, repeated
ids, skips, refusals, NaN values and spans waiting for their log records fall in
different ranges than the cases they depend on.
"""

from __future__ import annotations

import json
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

from llm_connect.errors import TrafficImportError
from llm_connect.traffic import ImportOptions, _import, _json, import_traffic
from llm_connect.traffic import _parallel_cases as cases
from llm_connect.traffic._parallel import workers_for
from tests.traffic._otlp_attrs import otlp_attr
from tests.traffic.test_parallel import _chat, _export, _same, _traffic


@pytest.fixture
def traffic(tmp_path: Path) -> Path:
    return _traffic(tmp_path / "traces.jsonl")


def _odd(path: Path) -> Path:
    """Repeated span ids (ids ``#2``...), refused conversations, unreadable content, NaN
    attributes, ``redact``-able text and duplicates, spread over many lines."""
    lines = []
    for n in range(30):
        spans = [_chat(n % 5, text=f"ask {n} mail bob{n}@example.com")]  # span ids repeat
        if n % 7 == 3 or n % 10 == 5:  # refused (a role Conversation refuses), unreadable
            odd = _chat(900 + n)
            part = {"type": "text", "content": "hi"} if n % 7 == 3 else {"type": "text"}
            odd["attributes"][-2] = otlp_attr(
                "gen_ai.input.messages", json.dumps([{"role": "wizard", "parts": [part]}])
            )
            spans.append(odd)
        if n % 9 == 4:
            odd = _chat(950 + n)
            odd["attributes"].append({"key": "x.ratio", "value": {"doubleValue": float("nan")}})
            spans.append(odd)
        if n % 4 == 0:
            spans.append(_chat(10 + n, text="the same question"))  # duplicates across ranges
        lines.append(_export(spans))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("chunk_bytes", [700, 1500, 9000])
def test_every_case_from_ranges_is_the_sequential_suite_and_meta(
    traffic: Path, tmp_path: Path, chunk_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert workers_for([traffic], "otlp-json", draw_first=True, workers=2, chunk_bytes=chunk_bytes) == 2
    replayed: list[Any] = []  # the workers' cases, replayed in this process
    monkeypatch.setattr(_import, "replay", lambda *a: replayed.append(a) or cases.replay(*a))
    report = _same([traffic], tmp_path, ImportOptions(), chunk_bytes)
    assert report["skipped"] == {
        "not valid JSON": 1,
        "not an OTLP export (no resourceSpans or resourceLogs)": 2,
        "no input messages": 3,
    }
    assert report["examples"][0].startswith(f"{traffic}:9: not valid JSON")
    assert report["dropped"] == {"errored call": 1, "empty answer": 1}
    assert report["duplicates"] > 0 and report["spans"] == 345
    assert report["written"] == report["eligible"] > 150
    assert len(replayed) == report["calls"]  # every call (the spans that waited had no content)


@pytest.mark.parametrize(
    "options",
    [
        ImportOptions(keep_duplicates=True),
        ImportOptions(task_from="app.feature", redact=True),
        ImportOptions(task_from="missing.key"),
        ImportOptions(task="triage", response_name="prod"),
        ImportOptions(join_window=1),
    ],
    ids=["keep-dup", "task-from-redact", "task-from-missing", "task", "window1"],
)
def test_every_option_builds_the_same_cases(traffic: Path, tmp_path: Path, options: ImportOptions) -> None:
    _same([traffic], tmp_path, options, chunk_bytes=1100)


@pytest.mark.parametrize("options", [ImportOptions(), ImportOptions(keep_duplicates=True, redact=True)])
def test_ids_refusals_nan_and_notes_across_ranges(tmp_path: Path, options: ImportOptions) -> None:
    path = _odd(tmp_path / "odd.jsonl")
    report = _same([path], tmp_path, options, chunk_bytes=600)
    assert report["skipped"] == {
        "unreadable GenAI content": 3,
        "conversation refused": 4,
        "not JSON (NaN or infinity)": 3,
    }
    if options.keep_duplicates:
        suite = (tmp_path / "suite.jsonl").read_text().splitlines()
        ids = [json.loads(line)["id"] for line in suite]
        assert f"{1:016x}#2" in ids and len(set(ids)) == len(ids)  # renamed in the line itself
        assert report["notes"]["redacted email values"] == 30
    else:
        assert report["duplicates"] > 0


def test_log_records_hand_the_rest_to_the_parent(tmp_path: Path) -> None:
    path = _traffic(tmp_path / "traces.jsonl", records=True)
    report = _same([path], tmp_path, ImportOptions())
    assert report["skipped"]["no input messages"] == 3  # 8000's record has no content; 5000 joined
    assert report["notes"] == {"GenAI log records matching no chat span": 1}
    _same([path], tmp_path, ImportOptions(join_window=1), chunk_bytes=800)


def test_the_parents_json_encoder_is_the_workers(traffic: Path, tmp_path: Path) -> None:
    was = _json.FAST
    try:
        _json.use_orjson(False)  # the workers are told: the same bytes as one process without orjson
        _same([_odd(tmp_path / "odd.jsonl"), traffic], tmp_path, ImportOptions(), chunk_bytes=1300)
    finally:
        _json.use_orjson(was)


def test_several_files(traffic: Path, tmp_path: Path) -> None:
    second = _traffic(tmp_path / "more.jsonl")
    third = _odd(tmp_path / "odd.jsonl")
    report = _same([traffic, second, third], tmp_path, ImportOptions(), chunk_bytes=1000)
    assert any(e.startswith(f"{traffic}:") for e in report["examples"])


def test_ranges_starting_exactly_at_lines_and_blank_lines(tmp_path: Path) -> None:
    lines = [_export([_chat(i)]) for i in range(30)]
    width = max(len(x) for x in lines)
    lines = [x + " " * (width - len(x)) for x in lines]  # equal lengths: every range starts a line
    path = tmp_path / "even.jsonl"
    path.write_text("\n".join(lines[:10]) + "\n\n\n" + "\n".join(lines[10:]))  # no final newline
    for chunk in (width, width + 1, width + 2, 1):
        report = _same([path], tmp_path, ImportOptions(), chunk_bytes=chunk)
    assert report["written"] == 30
    sources = [
        json.loads(x)["metadata"]["source"]["line"]
        for x in (tmp_path / "suite.jsonl").read_text().splitlines()
    ]
    assert sources == list(range(1, 11)) + list(range(13, 33))


def test_strict_fails_at_the_same_first_skip(traffic: Path, tmp_path: Path) -> None:
    out = tmp_path / "suite.jsonl"
    messages = []
    for workers in (1, 2):
        with pytest.raises(TrafficImportError) as exc:
            import_traffic([traffic], out, ImportOptions(strict=True), workers=workers, chunk_bytes=900)
        messages.append(str(exc.value))
        assert not out.exists() and not list(tmp_path.glob("*.meta.json"))
        assert not list(tmp_path.glob(".suite.jsonl.*"))
    assert messages[0] == messages[1] and ":9: not valid JSON" in messages[0]


def test_progress_is_reported_as_cases_are_written(traffic: Path, tmp_path: Path) -> None:
    seen: list[int] = []
    import_traffic(
        [traffic], tmp_path / "s.jsonl", ImportOptions(), workers=2, chunk_bytes=900, on_progress=seen.append
    )
    assert seen == []  # fewer than 10,000 cases: never called, as with one process


class _DeadPool:
    """A pool whose every worker has died."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def submit(self, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_exception(BrokenProcessPool("A child process terminated abruptly"))
        return future

    def shutdown(self, **kwargs: Any) -> None:
        pass


def test_a_dead_worker_is_an_import_error_naming_workers_1(
    traffic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cases, "ProcessPoolExecutor", _DeadPool)
    out = tmp_path / "suite.jsonl"
    with pytest.raises(TrafficImportError, match=r"traces\.jsonl: a worker process .* --workers 1"):
        import_traffic([traffic], out, ImportOptions(), workers=2, chunk_bytes=900)
    assert not out.exists() and not list(tmp_path.glob(".suite.jsonl.*"))
