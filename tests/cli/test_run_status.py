"""``llm-connect run status RUN_ID``: a shared run's cases and workers (PostgreSQL), refused on SQLite."""

from __future__ import annotations

import json

import pytest

from llm_connect.ledger import QualityLedger, RecordItem
from tests.cli._util import invoke
from tests.fixtures.databases import _make_result

RUN = "fleet-cli"


def _shared_run(url: str) -> None:
    with QualityLedger(url) as ledger:
        ledger.register_run_cases(RUN, [(f"c{i}", "qa", f"d{i}") for i in range(6)], suite_digest="s" * 64)
        ledger.register_worker(RUN, "w-one", host="host-a", pid=4242)
        got = ledger.claim_cases(RUN, "w-one", limit=3, lease_s=60)
        items = [RecordItem(_make_result(), "qa", run_id=RUN, case_id=c) for c in got[:2]]
        ledger.record_outcomes(RUN, records=items, worker_id="w-one")
        ledger.heartbeat(RUN, "w-one", calls=5, failures=1, cases_done=2)


@pytest.mark.postgres
def test_status_prints_cases_workers_and_totals(postgres_url: str) -> None:
    _shared_run(postgres_url)
    result = invoke("run", "status", RUN, "--db", postgres_url)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"run {RUN}: 2 of 6 cases finished, 4 left" in out
    assert "2 done, 0 failed, 1 claimed, 3 pending" in out
    assert "workers: 1 alive of 1" in out
    assert "w-one" in out and "host-a" in out and "pid 4242" in out and "heartbeat 0s ago" in out
    assert "calls 5" in out and "failures 1" in out
    assert "calls: 5, failures: 1, rate:" in out


@pytest.mark.postgres
def test_status_json(postgres_url: str) -> None:
    _shared_run(postgres_url)
    result = invoke("run", "status", RUN, "--db", postgres_url, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["total"], data["done"], data["claimed"], data["pending"], data["left"]) == (6, 2, 1, 3, 4)
    assert data["calls"] == 5 and data["failures"] == 1 and data["workers_alive"] == 1
    assert data["workers"][0]["host"] == "host-a" and data["workers"][0]["alive"] is True
    assert data["rate_per_min"] > 0


@pytest.mark.postgres
def test_unknown_run_exits_2_naming_it(postgres_url: str) -> None:
    result = invoke("run", "status", "no-such-run", "--db", postgres_url)
    assert result.exit_code == 2
    assert "no shared run 'no-such-run'" in result.stderr


def test_sqlite_exits_2_saying_shared_runs_need_postgresql(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/ledger.db"
    result = invoke("run", "status", RUN, "--db", url)
    assert result.exit_code == 2
    assert "shared runs need PostgreSQL" in result.stderr
    assert not (tmp_path / "ledger.db").exists()  # type: ignore[operator]  # nothing created
