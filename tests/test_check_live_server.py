"""scripts/check_live_server.sh against the loopback server imitating llama-cpp-python (issue 21):
the ladder grades every case (exit 0); a pinned json_schema fails every case, printed whole (exit 1);
no server is exit 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_live_server.sh"


@pytest.fixture
def llama_cpp_url() -> Iterator[str]:
    """A loopback server in a child process, answering response_format as llama-cpp-python does."""
    command = [sys.executable, "-m", "tests.fixtures.openai_server", "--port", "0"]
    proc = subprocess.Popen(
        [*command, "--imitate", "llama-cpp", "--judge-score", "0.75"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()  # not left to the garbage collector ("unclosed file")


def _run(url: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        **os.environ,
        "PYTHON": sys.executable,
        "LLM_CONNECT_LIVE_BASE_URL": url,
        "LLM_CONNECT_LIVE_CASES": "3",
    }
    return subprocess.run(
        ["bash", str(SCRIPT)], env={**environ, **env}, capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_the_ladder_grades_every_case_against_llama_cpp(llama_cpp_url: str) -> None:
    result = _run(llama_cpp_url)
    assert result.returncode == 0, result.stderr
    # every request counts, the response-format rungs the server refused too
    assert re.search(
        r"ok, 3 case\(s\) graded with the llm judge \([3-9] judge calls\), none failed", result.stdout
    )


def test_the_judge_is_llm_or_pairwise() -> None:
    bad = _run("http://127.0.0.1:9/v1", LLM_CONNECT_LIVE_JUDGE="vrty")
    assert bad.returncode == 2 and "must be llm or pairwise, not 'vrty'" in bad.stderr


def test_a_pinned_json_schema_fails_and_prints_the_whole_error(llama_cpp_url: str) -> None:
    result = _run(llama_cpp_url, LLM_CONNECT_LIVE_RESPONSE_FORMAT="json_schema")
    assert result.returncode == 1
    assert result.stderr.count("FAILED ") == 3
    assert "Input should be 'text' or 'json_object'" in result.stderr
    assert "3 failed case(s) of 3 (grade exit 3)" in result.stderr


def test_no_server_is_exit_2() -> None:
    result = _run("http://127.0.0.1:9/v1")
    assert result.returncode == 2 and "no OpenAI-compatible server" in result.stderr
