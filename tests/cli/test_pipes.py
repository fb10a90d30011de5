"""``llm-connect ... | head``: a reader that goes away ends the command quietly, as a shell tool."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from llm_connect.ledger import QualityLedger, RecordItem
from tests.fixtures.databases import _make_result


def test_a_closed_stdout_pipe_ends_quietly_with_141(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    with QualityLedger(db) as ledger:
        ledger.record_batch(
            [RecordItem(_make_result(0.5, grader_id="vrty"), task=f"t{i}", case_id="c") for i in range(50)]
        )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    code = "from llm_connect.cli import main; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "labels", "status", "--db", db],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes its first line
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 141, err
    assert err == ""  # no "unexpected BrokenPipeError", no "Exception ignored" at exit
