"""Worker processes reading OTLP JSON in byte ranges write what one process writes (issue 25).

Small ``chunk_bytes`` force many ranges on small files: a range boundary falls
inside lines (one line longer than several ranges), a line that is not JSON and
chat spans without input messages fall in different ranges, and with log
records the parent reads on from the first line holding one.
"""

from __future__ import annotations

import json
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

from llm_connect.errors import TrafficImportError
from llm_connect.traffic import ImportOptions, import_traffic
from llm_connect.traffic._parallel import ParallelOtlp, _result, workers_for
from tests.cli._util import invoke
from tests.traffic._otlp_attrs import chat_span, genai_messages, otlp_attr


def _chat(i: int, *, text: str | None = None, answer: str = "fine", content: bool = True) -> dict[str, Any]:
    attrs = [
        otlp_attr("gen_ai.operation.name", "chat"),
        otlp_attr("gen_ai.request.model", "gpt-4o" if i % 4 else "gpt-4o-mini"),
        otlp_attr("gen_ai.usage.input_tokens", 3),
        otlp_attr("app.feature", ("refunds", "billing", "login")[i % 3]),
    ]
    if content:
        attrs += genai_messages(text or f"question {i}", answer)
    return chat_span(i, attrs)


def _http(i: int) -> dict[str, Any]:
    return {
        "traceId": f"{i:032x}",
        "spanId": f"f{i:015x}",
        "name": "GET /",
        "attributes": [otlp_attr("a", 1)],
    }


def _export(spans: list[dict[str, Any]], service: str = "bot") -> str:
    resource = {"attributes": [otlp_attr("service.name", service)]}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]})


def _traffic(path: Path, *, records: bool = False) -> Path:
    """About 330 spans over 70 lines, with every kind of bad input a range may hold."""
    lines: list[str] = []
    i = 0
    for n in range(60):
        spans = []
        for _ in range(1 + n % 4):
            i += 1
            spans.append(_chat(i, text=f"question {i % 97}" if i % 11 == 0 else None))  # some repeat
            spans.append(_http(i))
        lines.append(_export(spans, service=f"svc-{n % 2}"))
        if n == 7:
            lines.append("{this is not JSON")
        if n == 12:
            lines.append("")  # blank: counted as a line, not read
        if n == 20:  # a chat span without input messages, with a span id: it waits (for records)
            lines.append(_export([_chat(5000, content=False)]))
        if n == 50:  # another: with a join window of 1 the first is taken when this one comes
            lines.append(_export([_chat(5001, content=False)]))
        if n == 55:
            lines.append("[1, 2]")
        if n == 33:  # one long line: several ranges start inside it
            lines.append(_export([_chat(6000 + k) for k in range(40)]))
        if n == 40:
            errored = _chat(7000)
            errored["status"] = {"code": 2, "message": "boom"}
            nameless = _chat(7002, content=False)
            nameless["spanId"] = ""  # no span id: skipped at once
            lines.append(_export([errored, _chat(7001, answer=""), nameless]))
            lines.append(json.dumps({"something": "else"}))
        if records and n == 45:  # a log record for the waiting span, and a span answered by records
            waiting = _chat(8000, content=False)
            lines.append(_export([waiting]))
            logs = [
                {"eventName": "gen_ai.user.message", "spanId": f"{8000:016x}", "body": {"kvlistValue": {}}},
                {"eventName": "gen_ai.choice", "spanId": f"{20:016x}", "body": {}},  # taken: ignored
                {"eventName": "gen_ai.choice", "spanId": f"{9999:016x}", "body": {}},  # no such span
                {
                    "eventName": "gen_ai.user.message",
                    "spanId": f"{5000:016x}",
                    "body": {"kvlistValue": {"values": [{"key": "content", "value": {"stringValue": "hi"}}]}},
                },
                {
                    "eventName": "gen_ai.choice",
                    "spanId": f"{5000:016x}",
                    "body": {
                        "kvlistValue": {
                            "values": [
                                {"key": "index", "value": {"intValue": "0"}},
                                {
                                    "key": "message",
                                    "value": {
                                        "kvlistValue": {
                                            "values": [{"key": "content", "value": {"stringValue": "ok"}}]
                                        }
                                    },
                                },
                            ]
                        }
                    },
                },
            ]
            lines.append(json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": logs}]}]}))
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(
    files: list[Path], out: Path, options: ImportOptions, **kw: Any
) -> tuple[dict[str, Any], bytes, bytes]:
    report = import_traffic(files, out, options, **kw)
    meta = out.with_name(out.name.split(".")[0] + ".meta.json")
    return report.to_dict(), out.read_bytes(), meta.read_bytes()


def _same(
    files: list[Path], tmp_path: Path, options: ImportOptions, chunk_bytes: int = 1500
) -> dict[str, Any]:
    out = tmp_path / "suite.jsonl"
    one = _run(files, out, options, workers=1)
    two = _run(files, out, options, workers=2, chunk_bytes=chunk_bytes)
    assert two[0] == one[0]
    assert two[1] == one[1]  # the suite, byte for byte
    assert two[2] == one[2]  # the sidecar
    return one[0]


@pytest.fixture
def traffic(tmp_path: Path) -> Path:
    return _traffic(tmp_path / "traces.jsonl")


@pytest.mark.parametrize("chunk_bytes", [700, 1500, 9000])
def test_ranges_give_the_sequential_suite_meta_counts_and_named_skips(
    traffic: Path, tmp_path: Path, chunk_bytes: int
) -> None:
    assert traffic.stat().st_size > 20 * chunk_bytes  # many ranges; the 40-span line spans several
    report = _same([traffic], tmp_path, ImportOptions(sample=20, seed=5), chunk_bytes)
    assert report["written"] == 20
    assert report["skipped"] == {
        "not valid JSON": 1,
        "not an OTLP export (no resourceSpans or resourceLogs)": 2,
        "no input messages": 3,
    }
    assert report["examples"][0].startswith(f"{traffic}:9: not valid JSON")
    assert any(f"({5000:016x}): no input messages" in e for e in report["examples"])  # it waited
    assert report["dropped"] == {"errored call": 1, "empty answer": 1}
    assert report["duplicates"] > 0 and report["spans"] == 345


@pytest.mark.parametrize(
    "options",
    [
        ImportOptions(sample=7, seed=1),
        ImportOptions(sample=7, seed=2),
        ImportOptions(sample=500),  # more than there is: a warning
        ImportOptions(sample=9, stratify_by="app.feature", seed=3),
        ImportOptions(sample=4, stratify_by="task", per_stratum=True),
        ImportOptions(sample=12, stratify_by="service"),
        ImportOptions(sample=10, keep_duplicates=True, seed=4),
        ImportOptions(sample=10, task_from="app.feature", redact=True),
        ImportOptions(sample=6, join_window=1),
    ],
    ids=["seed1", "seed2", "more", "attr", "per-stratum", "service", "keep-dup", "task-from", "window1"],
)
def test_every_sampling_option_draws_the_same_cases(
    traffic: Path, tmp_path: Path, options: ImportOptions
) -> None:
    _same([traffic], tmp_path, options)


def test_seeds_still_differ_and_reproduce(traffic: Path, tmp_path: Path) -> None:
    a = _run([traffic], tmp_path / "a.jsonl", ImportOptions(sample=7, seed=1), workers=2, chunk_bytes=900)
    b = _run([traffic], tmp_path / "a.jsonl", ImportOptions(sample=7, seed=1), workers=2, chunk_bytes=3000)
    c = _run([traffic], tmp_path / "a.jsonl", ImportOptions(sample=7, seed=2), workers=2, chunk_bytes=900)
    assert a[1] == b[1] and a[1] != c[1]


def test_log_records_hand_the_rest_to_the_parent(tmp_path: Path) -> None:
    path = _traffic(tmp_path / "traces.jsonl", records=True)
    report = _same([path], tmp_path, ImportOptions(sample=400))
    assert report["skipped"]["no input messages"] == 3  # 8000's record has no content; 5000 joined
    assert report["notes"] == {"GenAI log records matching no chat span": 1}  # 9999's, not 20's
    _same([path], tmp_path, ImportOptions(sample=30, seed=9, stratify_by="app.feature"))


def test_several_files_and_a_compressed_one(traffic: Path, tmp_path: Path) -> None:
    second = _traffic(tmp_path / "more.jsonl", records=True)
    _same([traffic, second], tmp_path, ImportOptions(sample=15, seed=2))
    assert workers_for([traffic, second], "otlp-json", draw_first=True, workers=2, chunk_bytes=900) == 2
    assert workers_for([tmp_path / "x.jsonl.gz"], "otlp-json", draw_first=True, workers=2, chunk_bytes=9) == 1
    assert workers_for([traffic], "otlp-json", draw_first=False, workers=2, chunk_bytes=900) == 1
    assert workers_for([traffic], "otlp-json", draw_first=True, workers=2, chunk_bytes=None) == 1  # small
    assert workers_for([traffic], "openai-log", draw_first=True, workers=4, chunk_bytes=900) == 1


def test_strict_is_exit_2_with_nothing_written_either_way(traffic: Path, tmp_path: Path) -> None:
    out = tmp_path / "suite.jsonl"
    messages = []
    for workers in (1, 2):
        with pytest.raises(TrafficImportError) as exc:
            import_traffic(
                [traffic], out, ImportOptions(sample=5, strict=True), workers=workers, chunk_bytes=900
            )
        messages.append(str(exc.value))
        assert not out.exists() and not list(tmp_path.glob("*.meta.json"))
    assert messages[0] == messages[1] and ":9: not valid JSON" in messages[0]


def test_spans_cross_only_when_they_may_be_drawn(traffic: Path, tmp_path: Path) -> None:
    """Once the reservoir is full, a range sends back a span only if it could still enter it."""
    from llm_connect.traffic._draw import draw, spare
    from llm_connect.traffic._importer import _Importer
    from llm_connect.traffic._parallel import _Remote
    from llm_connect.traffic._sample import Sampler

    options = ImportOptions(sample=3)
    importer = _Importer("otlp-json", [traffic], options, tmp_path / "s.jsonl")
    sampler = Sampler(3, spare=spare(3))
    reader = ParallelOtlp([traffic], options, sampler, workers=2, chunk_bytes=700)
    seen = {"light": 0, "with span": 0, "without": 0}

    def items() -> Any:
        for item in reader.read():
            if type(item) is tuple:
                seen["light"] += 1
            elif isinstance(item, _Remote):
                seen["with span" if item.data is not None else "without"] += 1
            yield item

    assert len(draw(items(), importer, sampler)) == 3
    assert seen["light"] > seen["with span"] > 0
    assert reader.spans_seen == 345


def test_the_cli_takes_workers(traffic: Path, tmp_path: Path) -> None:
    help_text = invoke("suite", "import", "--help").stdout
    assert "--workers" in help_text
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}" / "s.jsonl"
        out.parent.mkdir()
        result = invoke(
            "suite", "import", str(traffic), "-o", str(out), "--sample", "5", "--workers", workers
        )
        assert result.exit_code == 0, result.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    bad = invoke("suite", "import", str(traffic), "-o", str(tmp_path / "x.jsonl"), "--workers", "0")
    assert bad.exit_code == 2


def test_ranges_starting_exactly_at_lines_and_no_final_newline(tmp_path: Path) -> None:
    line = _export([_chat(1)])
    lines = [_export([_chat(i)]) for i in range(40)]
    width = max(len(x) for x in lines)
    lines = [x + " " * (width - len(x)) for x in lines]  # equal lengths: every range starts a line
    path = tmp_path / "even.jsonl"
    path.write_text("\n".join(lines))  # no newline after the last line
    assert len(line) <= width
    report = _same([path], tmp_path, ImportOptions(sample=5, seed=1), chunk_bytes=width + 1)
    assert report["spans"] == 40 and report["written"] == 5
    _same([path], tmp_path, ImportOptions(sample=5, seed=1), chunk_bytes=width)
    _same([path], tmp_path, ImportOptions(sample=5, seed=1), chunk_bytes=width + 2)


def test_a_worker_that_dies_is_an_import_error_naming_the_file_and_the_way_round() -> None:
    # A worker killed (the OOM killer, a signal) breaks the pool: the user gets the file and
    # --workers 1, not a BrokenProcessPool traceback.
    future: Future[int] = Future()
    future.set_exception(BrokenProcessPool("A child process terminated abruptly"))
    with pytest.raises(TrafficImportError, match=r"traces\.jsonl: a worker process .* --workers 1"):
        _result(future, "traces.jsonl")
    done: Future[int] = Future()
    done.set_result(7)
    assert _result(done, "traces.jsonl") == 7
