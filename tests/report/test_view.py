"""``view``: the page and /api/cases from SQL with filters and paging, read-only, both backends."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from llm_connect.ledger import QualityLedger
from llm_connect.report import ReportServer, serve
from tests.report.test_report import EVIL, fill_ledger, table_counts


@pytest.fixture
def served(ledger_url: str) -> Iterator[tuple[QualityLedger, ReportServer]]:
    with QualityLedger(ledger_url) as ledger:
        fill_ledger(ledger, cases=35)
        server = serve(ledger, port=0)
        try:
            yield ledger, server
        finally:
            server.shutdown()


def get(server: ReportServer, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(server.url + path.lstrip("/"), method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def cases(server: ReportServer, query: str) -> dict[str, Any]:
    status, headers, body = get(server, "/api/cases?" + query)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    data: dict[str, Any] = json.loads(body)
    return data


def test_the_page_is_the_report_without_embedded_cases(served: tuple[QualityLedger, ReportServer]) -> None:
    _, server = served
    assert server.url.startswith("http://127.0.0.1:")
    status, headers, body = get(server, "/")
    html = body.decode("utf-8")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    for section in ("routing", "evidence", "charts", "distributions", "cases"):
        assert f'<section id="{section}"' in html
    assert 'id="case-data"' not in html and 'id="truncated"' not in html
    assert "280 grades" in html
    status, _, body = get(server, "/", method="HEAD")
    assert status == 200 and body == b""
    assert get(server, "/nothing")[0] == 404


def test_cases_are_filtered_sorted_and_paged(served: tuple[QualityLedger, ReportServer]) -> None:
    _, server = served
    everything = cases(server, "limit=500")
    assert everything["total"] == 280 and len(everything["rows"]) == 280
    scores = [r["score"] for r in everything["rows"]]
    assert scores == sorted(scores)
    one = cases(server, "task=billing&candidate=llama&judge=vrty&sort=score-desc&limit=10")
    assert one["total"] == 35 and len(one["rows"]) == 10
    assert {(r["task"], r["cand"], r["judge"]) for r in one["rows"]} == {("billing", "llama", "vrty")}
    assert [r["score"] for r in one["rows"]] == sorted((r["score"] for r in one["rows"]), reverse=True)
    page2 = cases(server, "task=billing&candidate=llama&judge=vrty&sort=score-desc&limit=10&offset=10")
    assert not {r["id"] for r in page2["rows"]} & {r["id"] for r in one["rows"]}
    fails = cases(server, "failures=1&limit=500")
    assert fails["total"] == 140 and all(r["fail"] and r["score"] < 0.9 for r in fails["rows"])
    ranged = cases(server, "min=0.58&max=0.6&limit=500")
    assert ranged["total"] > 0 and all(0.58 <= r["score"] <= 0.6 for r in ranged["rows"])
    found = cases(server, "q=%3C/SCRIPT%3E&limit=500")  # case-insensitive, in the answers
    assert found["total"] == 8
    row = found["rows"][0]
    assert "".join(t for op, t in row["diff"] if op != "-") == EVIL
    assert row["prompt"].startswith("question 0") and row["meta"] == {"n": 0}
    assert cases(server, "q=100%25&limit=5")["total"] == 0  # % is literal, not a wildcard
    assert get(server, "/api/cases?sort=sideways")[0] == 400
    assert get(server, "/api/cases?limit=100000")[0] == 400


def test_the_server_is_read_only(served: tuple[QualityLedger, ReportServer]) -> None:
    ledger, server = served
    before = table_counts(ledger)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, headers, _ = get(server, "/api/cases", method=method)
        assert status == 405 and headers["Allow"] == "GET, HEAD"
    get(server, "/")
    cases(server, "failures=1&q=answer&sort=score-desc")
    assert table_counts(ledger) == before


def test_paging_by_group_is_the_same_page_as_sorting_every_grade(
    served: tuple[QualityLedger, ReportServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unfiltered pages read group by group from the routing index (what a large ledger's first
    pages do) equal the ``ORDER BY quality_score, id`` of every grade, ties (11 scores per group)
    broken by id, in both directions, at every offset, narrowed by task, candidate or judge."""
    from llm_connect.report import _server

    ledger, _ = served

    def page(*, by_group: bool, **kw: Any) -> tuple[int, list[dict[str, Any]]]:
        monkeypatch.setattr(_server, "GROUP_SHARE", 0 if by_group else 1)
        monkeypatch.setattr(_server, "MAX_GROUPS", 256 if by_group else 0)
        return _server.page_cases(ledger, **kw)

    seen_tie = False
    for filters in ({}, {"task": "billing"}, {"candidate": "llama", "judge": "vrty"}, {"task": "nothing"}):
        for sort in ("score-asc", "score-desc"):
            for offset, limit in ((0, 200), (0, 7), (33, 50), (270, 20), (400, 5)):
                kw: dict[str, Any] = {**filters, "sort": sort, "offset": offset, "limit": limit}
                grouped, scanned = page(by_group=True, **kw), page(by_group=False, **kw)
                assert grouped == scanned, kw
                scores = [r["score"] for r in grouped[1]]
                seen_tie = seen_tie or len(set(scores)) < len(scores)
    assert seen_tie
    monkeypatch.undo()
    assert _server._by_group([("t", "b", "j", "c", 41_666)] * 24, 200, 999_984)  # the first page of 1M
    assert not _server._by_group([("t", "b", "j", "c", 41_666)] * 24, 10_200, 999_984)  # deep: the scan
