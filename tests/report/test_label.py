"""``view``'s Label page without a browser: the queue's order, the blind order, and the write's guards.

The queue and the writes run on SQLite and PostgreSQL (``ledger_url``). Requests are sent with
``http.client`` so that the Origin and Host headers are exactly what each test says.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from llm_connect.errors import ConfigurationError
from llm_connect.ledger import QualityLedger, RecordItem, SampledCase, SamplingStore
from llm_connect.report import ReportServer, serve
from llm_connect.report._label_queue import candidate_first, chosen_waiting, label_queue, queue_size
from llm_connect.values import HumanLabel
from tests.fixtures.databases import _make_result
from tests.report.test_report import table_counts

PAIRWISE = "pairwise:openai:judge-model:pairwise-v1"

# case -> {judge: grade} for candidate "mini" of task "qa" (baseline gpt-4o).
QA_GRADES: dict[str, dict[str, float]] = {
    "c0": {"embedding": 0.9, "vrty": 0.9},  # the judges agree: disagreement 0
    "c1": {"embedding": 0.9, "vrty": 0.3},  # spread 0.6
    "c2": {"embedding": 0.8, "vrty": 0.7},  # spread 0.1
    "c3": {PAIRWISE: 0.5},  # one pairwise judge calling a tie: 1 - 2|0.5 - 0.5| = 1.0
    "c4": {"embedding": 0.5, "vrty": 0.5, PAIRWISE: 1.0},  # spread 0.5; the pairwise judge is sure
}
QA_ORDER = ["c3", "c1", "c4", "c2", "c0"]


def fill_queue_ledger(ledger: QualityLedger) -> None:
    """``QA_GRADES`` for ``mini``; ``llama`` on c0 with a spread of 0.8; a task ``other``; a grade
    without a case id (never queued); c1's embedding graded twice (its mean, 0.9, counts)."""
    items = []

    def add(task: str, case_id: str | None, cand: str, judge: str, score: float, text: str = "") -> None:
        result = _make_result(
            score,
            grader_id=judge,
            candidate_model=cand,
            prompt=f"question {case_id} of {task}",
            baseline_text=f"baseline answer to {case_id}",
            candidate_text=text or f"{cand} answer to {case_id}",
            asks_llm=judge.startswith("pairwise:"),
        )
        items.append(RecordItem(result, task=task, run_id="r1", case_id=case_id))

    for case_id, grades in QA_GRADES.items():
        for judge, score in grades.items():
            add("qa", case_id, "mini", judge, score)
    add("qa", "c1", "mini", "embedding", 0.9)
    add("qa", "c0", "llama", "embedding", 0.9)
    add("qa", "c0", "llama", "vrty", 0.1)
    add("other", "o1", "mini", "embedding", 0.2)
    add("other", "o1", "mini", "vrty", 0.25)
    add("qa", None, "mini", "embedding", 0.0)
    add("qa", None, "mini", "vrty", 1.0)
    ledger.record_batch(items)


@pytest.fixture
def queue_ledger(ledger_url: str) -> Iterator[QualityLedger]:
    with QualityLedger(ledger_url) as ledger:
        fill_queue_ledger(ledger)
        yield ledger


def test_the_queue_serves_the_cases_judges_disagree_on_most_first(queue_ledger: QualityLedger) -> None:
    ledger = queue_ledger
    mini = label_queue(ledger, task="qa", candidate="mini", annotator="ana", limit=10)
    assert [q.case_id for q in mini] == QA_ORDER
    assert [q.disagreement for q in mini] == pytest.approx([1.0, 0.6, 0.5, 0.1, 0.0])
    assert mini[2].spread == pytest.approx(0.5) and mini[2].judges == 3
    assert {(q.task, q.baseline, q.candidate) for q in mini} == {("qa", "gpt-4o", "mini")}

    everything = label_queue(ledger, annotator="ana", limit=100)
    assert len(everything) == 7  # 5 + llama's c0 + other's o1; the grades without a case id never
    assert [(q.task, q.candidate, q.case_id) for q in everything[:3]] == [
        ("qa", "mini", "c3"),
        ("qa", "llama", "c0"),
        ("qa", "mini", "c1"),
    ]
    assert [q.case_id for q in label_queue(ledger, task="other", annotator="ana", limit=5)] == ["o1"]
    assert queue_size(ledger, task="qa", candidate="mini", annotator="ana") == 5

    # The annotator's own labels leave the queue; another annotator's do not.
    ledger.record_labels(
        [
            HumanLabel("qa", "c3", "mini", "ana", preference="tie"),
            HumanLabel("qa", "c1", "openai:mini", "ana", preference="baseline"),  # adapter id spelling
            HumanLabel("qa", "c4", "mini", "bo", preference="candidate"),
        ]
    )
    assert [
        q.case_id for q in label_queue(ledger, task="qa", candidate="mini", annotator="ana", limit=10)
    ] == [
        "c4",
        "c2",
        "c0",
    ]
    assert [
        q.case_id for q in label_queue(ledger, task="qa", candidate="mini", annotator="ana", limit=1)
    ] == ["c4"]
    assert queue_size(ledger, task="qa", candidate="mini", annotator="ana") == 3
    bo = label_queue(ledger, task="qa", candidate="mini", annotator="bo", limit=10)
    assert [q.case_id for q in bo] == ["c3", "c1", "c2", "c0"]
    with pytest.raises(ValueError, match="limit"):
        label_queue(ledger, annotator="ana", limit=0)


def test_the_samplers_chosen_cases_come_first_in_its_order(queue_ledger: QualityLedger) -> None:
    # The bound on what people would say waits for the earliest chosen case without a label, so
    # the page serves the sampler's chosen cases first, in its order, before any disagreement.
    ledger = queue_ledger
    SamplingStore(ledger.engine).record(
        "qa", "mini", "embedding",
        [SampledCase("c2", 0.5, True), SampledCase("c3", 0.5, False), SampledCase("c0", 0.5, True)],
        strategy="uniform", rate=0.5, floor=0.5, seed=1,
    )  # fmt: skip
    mini = label_queue(ledger, task="qa", candidate="mini", annotator="ana", limit=10)
    assert [(q.case_id, q.chosen) for q in mini] == [
        ("c2", True), ("c0", True), ("c3", False), ("c1", False), ("c4", False),
    ]  # fmt: skip
    everything = label_queue(ledger, annotator="ana", limit=3)
    assert [(q.candidate, q.case_id) for q in everything] == [("mini", "c2"), ("mini", "c0"), ("mini", "c3")]
    assert chosen_waiting(ledger, task="qa", candidate="mini") == 2
    assert chosen_waiting(ledger, task="other") == 0

    # Another annotator's label settles a chosen case for routing: it goes back to the
    # disagreement order for ana (she may still label it, for agreement); her own leaves it out.
    ledger.record_labels([HumanLabel("qa", "c2", "mini", "bo", preference="tie")])
    ana = label_queue(ledger, task="qa", candidate="mini", annotator="ana", limit=10)
    assert [(q.case_id, q.chosen) for q in ana][:2] == [("c0", True), ("c3", False)]
    assert ("c2", False) in [(q.case_id, q.chosen) for q in ana]
    assert chosen_waiting(ledger, task="qa") == 1
    ledger.record_labels([HumanLabel("qa", "c0", "mini", "ana", preference="candidate")])
    assert [q.case_id for q in label_queue(ledger, task="qa", candidate="mini", annotator="ana", limit=10)] == [
        "c3", "c1", "c4", "c2",
    ]  # fmt: skip
    assert chosen_waiting(ledger) == 0


def test_the_page_marks_chosen_cases_and_counts_them(label_server: ReportServer) -> None:
    server = label_server
    SamplingStore(server.ledger.engine).record(
        "qa", "mini", "vrty", [SampledCase("c0", 1.0, True)], strategy="uniform", rate=1.0, floor=1.0, seed=1
    )
    first = next_case(server, query="&task=qa&candidate=mini")
    assert first["case"]["case_id"] == "c0" and first["case"]["chosen"] is True
    assert first["chosen_left"] == 1 and first["left"] == 5
    assert set(first["case"]) == {
        "ref",
        "task",
        "case_id",
        "system_prompt",
        "prompt",
        "messages",
        "answers",
        "chosen",
    }  # blind
    token = own(server, server.labels.token if server.labels else None)
    write = {"ref": first["case"]["ref"], "choice": "tie", "annotator": "ana"}
    assert request(server, "POST", "/api/label", write, token)[0] == 200
    second = next_case(server, query="&task=qa&candidate=mini")
    assert second["case"]["case_id"] == "c3" and second["case"]["chosen"] is False
    assert second["chosen_left"] == 0


def test_the_blind_order_is_a_seeded_hash_about_half_each_way() -> None:
    draws = [candidate_first("qa", f"c{i}", "mini") for i in range(400)]
    assert draws == [candidate_first("qa", f"c{i}", "mini") for i in range(400)]  # a reload: the same
    assert 160 <= sum(draws) <= 240
    other = [candidate_first("qa", f"c{i}", "mini", seed="another") for i in range(400)]
    assert other != draws


# -- the server ---------------------------------------------------------------------------------


@pytest.fixture
def label_server(queue_ledger: QualityLedger) -> Iterator[ReportServer]:
    server = serve(queue_ledger, port=0, label=True)
    try:
        yield server
    finally:
        server.shutdown()


def request(
    server: ReportServer,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """``(status, JSON or text)`` of one request with exactly ``headers`` (plus Host unless given)."""
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    payload = body if isinstance(body, bytes) or body is None else json.dumps(body).encode("utf-8")
    given = dict(headers or {})
    try:
        conn.putrequest(method, path, skip_host="Host" in given, skip_accept_encoding=True)
        for name, value in given.items():
            conn.putheader(name, value)
        if payload is not None:
            conn.putheader("Content-Length", str(len(payload)))
        conn.endheaders(payload)
        resp = conn.getresponse()
        raw = resp.read().decode("utf-8")
    finally:
        conn.close()
    try:
        return resp.status, json.loads(raw)
    except ValueError:
        return resp.status, raw


def next_case(server: ReportServer, annotator: str = "ana", query: str = "") -> dict[str, Any]:
    status, data = request(server, "GET", f"/api/label/next?annotator={annotator}{query}")
    assert status == 200, data
    return data  # type: ignore[no-any-return]


def own(server: ReportServer, token: str | None = None, **extra: str) -> dict[str, str]:
    headers = {"Origin": server.url.rstrip("/"), "Content-Type": "application/json", **extra}
    if token is not None:
        headers["X-LLM-Connect-Token"] = token
    return headers


def test_the_left_count_is_counted_again_only_after_a_new_grade(
    label_server: ReportServer, queue_ledger: QualityLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The page asks for the count after every label; the count over every graded case is kept
    # per filter and counted again only when the newest grade changed. It stays exact.
    from llm_connect.report import _label

    counted: list[tuple[str | None, str | None]] = []
    real = _label.queue_total

    def counting(ledger: QualityLedger, *, task: str | None = None, candidate: str | None = None) -> int:
        counted.append((task, candidate))
        return real(ledger, task=task, candidate=candidate)

    monkeypatch.setattr(_label, "queue_total", counting)
    server = label_server
    assert server.labels is not None
    first = next_case(server, query="&task=qa")
    assert first["left"] == queue_size(queue_ledger, task="qa", annotator="ana") == 6
    write = {"ref": first["case"]["ref"], "choice": "tie", "annotator": "ana"}
    assert request(server, "POST", "/api/label", write, own(server, server.labels.token))[0] == 200
    assert next_case(server, query="&task=qa")["left"] == 5
    assert next_case(server, annotator="bo", query="&task=qa")["left"] == 6
    assert counted == [("qa", None)]  # one count for three pages
    queue_ledger.record_batch(
        [RecordItem(_make_result(0.5, grader_id="vrty", candidate_model="mini"), task="qa", case_id="c9")]
    )
    assert next_case(server, query="&task=qa")["left"] == 6  # the new case
    assert next_case(server, query="&task=other")["left"] == 1
    assert counted == [("qa", None), ("qa", None), ("other", None)]


def test_the_page_keeps_the_disagreement_order_until_a_new_grade(
    label_server: ReportServer, queue_ledger: QualityLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After the sampler's cases, the page serves the cases by disagreement, read once and kept
    # (a small kept depth here, so that it reads deeper as the annotator goes): every next case
    # is the one label_queue reads afresh, and a new grade makes the page read again.
    from llm_connect.report import _label

    reads: list[int] = []
    real = _label.ranked_cases

    def counting(ledger: QualityLedger, **kwargs: Any) -> Any:
        reads.append(kwargs["depth"])
        return real(ledger, **kwargs)

    monkeypatch.setattr(_label, "ranked_cases", counting)
    monkeypatch.setattr(_label, "_RANKED", 2)
    server = label_server
    assert server.labels is not None
    served = []
    for step in range(8):
        if step == 3:  # a new case the judges disagree on most: it comes next
            queue_ledger.record_batch(
                [
                    RecordItem(_make_result(s, grader_id=g, candidate_model="mini"), task="qa", case_id="c9")
                    for g, s in (("embedding", 0.0), ("vrty", 1.0))
                ]
            )
        want = label_queue(queue_ledger, annotator="ana")
        case = next_case(server)["case"]
        if not want:
            assert case is None
            break
        assert (case["task"], case["case_id"]) == (want[0].task, want[0].case_id)
        served.append(case["case_id"])
        write = {"ref": case["ref"], "choice": "tie", "annotator": "ana"}
        assert request(server, "POST", "/api/label", write, own(server, server.labels.token))[0] == 200
    assert served[3] == "c9" and len(served) == 8  # c0 twice: mini and llama
    assert len(reads) < len(served)  # kept between labels, not read for each
    assert reads[0] == 2 and max(reads) >= 4  # read deeper as the annotator's labels grew


def test_a_write_needs_the_token_and_the_servers_own_origin(
    label_server: ReportServer, queue_ledger: QualityLedger
) -> None:
    server, ledger = label_server, queue_ledger
    assert server.labels is not None and server.label_url is not None
    token = server.labels.token
    assert server.label_url == f"{server.url}label?token={token}" and len(token) >= 32
    case = next_case(server, query="&task=qa&candidate=mini")["case"]
    write = {"ref": case["ref"], "choice": "first", "annotator": "ana", "note": "clearer"}
    before = table_counts(ledger)
    refused = {
        "no token": request(server, "POST", "/api/label", write, own(server)),
        "a wrong token": request(server, "POST", "/api/label", write, own(server, token[:-1] + "x")),
        "a wrong body token": request(server, "POST", "/api/label", {**write, "token": "nope"}, own(server)),
        "a foreign Origin": request(
            server, "POST", "/api/label", write, own(server, token, Origin="http://evil.example")
        ),
        "another port": request(
            server, "POST", "/api/label", write, own(server, token, Origin="http://127.0.0.1:1")
        ),
        "no Origin": request(
            server,
            "POST",
            "/api/label",
            write,
            {"Content-Type": "application/json", "X-LLM-Connect-Token": token},
        ),
        "a rebound Host": request(
            server, "POST", "/api/label", write, own(server, token, Host="evil.example:80")
        ),
    }
    for why, (status, data) in refused.items():
        assert status == 403, (why, data)
    assert table_counts(ledger) == before

    status, data = request(server, "POST", "/api/label", write, own(server, token))
    assert (status, data) == (200, {"saved": True, "written": 1, "replaced": 0})  # never says which side
    (label,) = ledger.labels()
    first_is_candidate = candidate_first("qa", case["case_id"], "mini")
    assert case["answers"][0]["text"] == (
        f"mini answer to {case['case_id']}" if first_is_candidate else f"baseline answer to {case['case_id']}"
    )
    assert (label.task, label.case_id, label.candidate, label.annotator, label.note, label.run_id) == (
        "qa",
        case["case_id"],
        "mini",
        "ana",
        "clearer",
        "r1",
    )
    assert label.preference == ("candidate" if first_is_candidate else "baseline")
    first_pref = label.preference

    # The same label again changes nothing; a different one for the same case is 409, unless the
    # annotator changes their own label ("replace": the page's "change my last label").
    assert request(server, "POST", "/api/label", write, own(server, token)) == (
        200,
        {"saved": True, "written": 0, "replaced": 0},
    )
    assert request(server, "POST", "/api/label", {**write, "choice": "tie"}, own(server, token))[0] == 409
    assert ledger.labels()[0].preference == label.preference
    changed = {**write, "choice": "tie", "note": "on second thought", "replace": True}
    assert request(server, "POST", "/api/label", changed, own(server, token)) == (
        200,
        {"saved": True, "written": 0, "replaced": 1},
    )
    (label,) = ledger.labels()
    assert (label.preference, label.note, label.annotator) == ("tie", "on second thought", "ana")
    assert request(server, "POST", "/api/label", {**write, "replace": "yes"}, own(server, token))[0] == 400
    # Another annotator's replace writes their own label; ana's stays as it is.
    other = {**write, "annotator": "bo", "replace": True}
    assert request(server, "POST", "/api/label", other, own(server, token))[1]["written"] == 1
    assert {(lb.annotator, lb.preference) for lb in ledger.labels()} == {("ana", "tie"), ("bo", first_pref)}

    # The token in the body works too; "second" un-blinds to the other side, "tie" to tie.
    for choice in ("second", "tie"):
        case = next_case(server, query="&task=qa&candidate=mini")["case"]
        assert request(
            server, "POST", "/api/label", {"ref": case["ref"], "choice": choice, "annotator": "ana", "token": token},
            own(server),
        )[0] == 200  # fmt: skip
        (stored,) = [lb for lb in ledger.labels() if lb.case_id == case["case_id"]]
        first_is_candidate = candidate_first("qa", case["case_id"], "mini")
        expected = "tie" if choice == "tie" else ("baseline" if first_is_candidate else "candidate")
        assert stored.preference == expected and stored.note is None
    assert next_case(server, query="&task=qa&candidate=mini")["left"] == 2


def test_bad_writes_are_refused_and_reads_stay_open(label_server: ReportServer) -> None:
    server = label_server
    assert server.labels is not None
    token = server.labels.token
    case = next_case(server)["case"]
    good = {"ref": case["ref"], "choice": "tie", "annotator": "ana"}
    assert (
        request(server, "POST", "/api/label", {**good, "choice": "first-ish"}, own(server, token))[0] == 400
    )
    assert request(server, "POST", "/api/label", {**good, "annotator": " "}, own(server, token))[0] == 400
    assert request(server, "POST", "/api/label", {**good, "note": "x" * 5000}, own(server, token))[0] == 400
    assert request(server, "POST", "/api/label", {**good, "ref": "0" * 32}, own(server, token))[0] == 410
    assert request(server, "POST", "/api/label", b"[1, 2]", own(server, token))[0] == 400
    assert request(server, "POST", "/api/label", b"x" * 70_000, own(server, token))[0] == 413
    assert request(server, "POST", "/api/cases", good, own(server, token))[0] == 405
    assert request(server, "PUT", "/api/label", good, own(server, token))[0] == 405
    assert request(server, "GET", "/api/label/next")[0] == 400  # who is labelling?
    status, page = request(server, "GET", "/label?task=qa")
    assert status == 200 and 'id="label-case"' in page and token not in page
    assert '<option value="qa" selected>' in page
    status, report = request(server, "GET", "/")
    assert status == 200 and '<a href="label" id="label-link">Label</a>' in report and token not in report
    # A skipped case is passed over.
    skipped = next_case(server, query=f"&skip={case['ref']}")["case"]
    assert skipped["case_id"] != case["case_id"] or skipped["task"] != case["task"]


def test_without_labelling_there_is_no_label_route_and_no_link(queue_ledger: QualityLedger) -> None:
    server = serve(queue_ledger, port=0)
    try:
        assert server.labels is None and server.label_url is None
        for path in ("/label", "/api/label/next?annotator=ana"):
            assert request(server, "GET", path)[0] == 404
        status, _ = request(server, "POST", "/api/label", {"choice": "tie"}, own(server, "anything"))
        assert status == 405
        status, report = request(server, "GET", "/")
        assert status == 200 and "label-link" not in report and 'href="label"' not in report
    finally:
        server.shutdown()


def _refused(server: ReportServer, method: str, path: str) -> tuple[int, str, str]:
    """``(status, Allow, error)`` of a request the server does not take."""
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Allow") or "", json.loads(resp.read())["error"]
    finally:
        conn.close()


def test_a_refused_method_says_what_the_server_takes(
    label_server: ReportServer, queue_ledger: QualityLedger
) -> None:
    status, allow, error = _refused(label_server, "DELETE", "/api/cases")
    assert (status, allow) == (405, "GET, HEAD") and "read-only" not in error
    assert error == (
        "DELETE /api/cases is not allowed: the report answers GET and HEAD only; "
        "labels are written with POST /api/label and the Label page's token"
    )
    status, allow, error = _refused(label_server, "PUT", "/api/label")
    assert (status, allow) == (405, "POST") and "written with POST /api/label" in error
    server = serve(queue_ledger, port=0)  # labelling off: no write at all
    try:
        status, allow, error = _refused(server, "DELETE", "/")
        assert (status, allow) == (405, "GET, HEAD") and "labelling is off: nothing is written" in error
    finally:
        server.shutdown()


def test_labelling_listens_on_loopback_only(queue_ledger: QualityLedger) -> None:
    with pytest.raises(ConfigurationError, match=r"127\.0\.0\.1 only"):
        serve(queue_ledger, host="0.0.0.0", port=0, label=True)


def _view(*args: str, db: str) -> tuple[int, str, str]:
    """Run ``llm-connect view`` until it printed what it serves (or exited), then stop it with SIGINT."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "llm_connect", "view", "--port", "0", "--db", db, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("label cases at") or "read-only" in line:
                break
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    return proc.returncode, "".join(lines) + rest, err


def test_view_prints_the_label_url_with_its_token_and_no_label_serves_read_only(tmp_path: Any) -> None:
    db = f"sqlite:///{tmp_path / 'view.db'}"
    with QualityLedger(db) as ledger:
        fill_queue_ledger(ledger)
    _, out, err = _view(db=db)
    assert re.search(
        r"^label cases at http://127\.0\.0\.1:\d+/label\?token=[A-Za-z0-9_-]{40,}$", out, re.M
    ), out + err
    _, out, err = _view("--no-label", db=db)
    assert "(read-only; Ctrl-C to stop)" in out and "label" not in out, out + err
    code, out, err = _view("--host", "0.0.0.0", db=db)
    assert code == 2 and "--no-label" in err


TOOL_CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "where is order 7?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "lookup", "arguments": '{"id":7}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "1", "content": "shipped"},
    {"role": "user", "content": [{"type": "text", "text": "and when?"}]},
]
"""A conversation with a tool call, a tool answer and a multi-part user turn (what labelling shows)."""


def test_a_conversation_case_shows_its_messages_and_tool_calls(tmp_path: Any) -> None:
    import dataclasses

    from llm_connect.report._label_queue import load_case
    from llm_connect.types import Conversation

    conversation = Conversation(TOOL_CONVERSATION)
    result = dataclasses.replace(_make_result(0.5, prompt="and when?"), conversation=conversation)
    with QualityLedger(f"sqlite:///{tmp_path / 'conv.db'}") as ledger:
        ledger.record_batch([RecordItem(result, task="t", run_id="r", case_id="c")])
        (item,) = label_queue(ledger, annotator="ana")
        case = load_case(ledger, item)
    assert case is not None and case.prompt == "and when?"
    assert case.messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "where is order 7?"},
        {"role": "assistant", "content": 'tool call: lookup({"id":7})'},
        {"role": "tool", "content": "shipped"},
        {"role": "user", "content": "and when?"},
    ]


def test_the_label_page_shows_the_cases_system_prompt(tmp_path: Any) -> None:
    import dataclasses

    from llm_connect.types import Conversation, RunConfig

    french = RunConfig(temperature=0.0, max_tokens=64, system_prompt="Answer in French.")
    items = [
        RecordItem(
            _make_result(0.5, prompt="hello?", run_config=french), task="t", run_id="r", case_id="sys"
        ),
        RecordItem(_make_result(0.5, prompt="plain?"), task="t", run_id="r", case_id="plain"),
        RecordItem(  # the conversation's own system message is shown in it, not twice
            dataclasses.replace(
                _make_result(0.5, prompt="and when?", run_config=french),
                conversation=Conversation(TOOL_CONVERSATION),
            ),
            task="t",
            run_id="r",
            case_id="conv",
        ),
    ]
    with QualityLedger(f"sqlite:///{tmp_path / 'sys.db'}") as ledger:
        ledger.record_batch(items)
        server = serve(ledger, port=0, label=True)
        try:
            shown: dict[str, Any] = {}
            for _ in range(3):
                skip = ",".join(c["ref"] for c in shown.values())
                case = next_case(server, query=f"&skip={skip}" if skip else "")["case"]
                shown[case["case_id"]] = case
            status, page = request(server, "GET", "/label")
        finally:
            server.shutdown()
    assert shown["sys"]["system_prompt"] == "Answer in French." and shown["sys"]["prompt"] == "hello?"
    assert shown["plain"]["system_prompt"] is None
    assert shown["conv"]["system_prompt"] is None
    assert {"role": "system", "content": "be brief"} in shown["conv"]["messages"]
    # the page has the place for it above the conversation, and its script fills it
    assert status == 200 and page.index('id="system-prompt"') < page.index('id="prompt"')
    assert 'byId("system-prompt").textContent = c.system_prompt' in page
