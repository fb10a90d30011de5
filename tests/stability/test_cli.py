"""``llm-connect stability``: the verdicts as the CLI's exit codes, output and errors (real server, real MiniLM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_connect.cli._common import exit_code_for
from llm_connect.cli._exit import ERRORS, STABILITY_VERDICT_CODES, VERDICTS, ExitCode
from llm_connect.errors import (
    AdapterError,
    ConfigurationError,
    InsufficientRunsError,
    InvalidJSONInputError,
    StabilityEmbeddingError,
    StabilityInputError,
    ToolDefinitionError,
)
from tests.cli._util import invoke
from tests.fixtures.skips import skip_or_fail
from tests.stability.conftest import (
    ANSWER,
    ORDER_TOOLS,
    identical,
    json_or_prose,
    script,
    short_or_long,
    tool_or_prose,
    write_json,
)

pytestmark = pytest.mark.embeddings


@pytest.fixture
def query(tmp_path: Path) -> Path:
    return write_json(
        tmp_path / "query.json", {"system_prompt": "You track orders.", "user_input": "Order 42?"}
    )


def stability(server, *args: str):  # type: ignore[no-untyped-def]
    return invoke("stability", "--model", "openai:gpt-test", "--base-url", server.base_url, *args)


def test_an_identical_model_is_safe_exit_0(openai_server, minilm, query):
    script(openai_server, identical)
    result = stability(openai_server, "--input", str(query), "--runs", "20")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Verdict: SAFE" in out and "Fingerprints: none" in out
    for label in ("semantic consistency", "tool consistency", "structural consistency", "length consistency"):
        assert label in out
    assert "claims: guarantees 0" in out and "exact agreement: raw text 100%" in out
    assert len(openai_server.requests) == 20


def test_risky_exits_6_and_do_not_ship_exits_1(openai_server, minilm, query, tmp_path):
    script(openai_server, short_or_long)
    risky = stability(openai_server, "--input", str(query), "--runs", "10")
    assert risky.exit_code == 6 and "Verdict: RISKY" in risky.stdout and "VERBOSITY_DRIFT" in risky.stdout
    tools = write_json(tmp_path / "tools.json", ORDER_TOOLS)
    script(openai_server, tool_or_prose)
    bad = stability(openai_server, "--input", str(query), "--tools", str(tools), "--runs", "10")
    assert bad.exit_code == 1 and "Verdict: DO_NOT_SHIP" in bad.stdout
    assert "NONDETERMINISTIC_TOOL_ROUTING (HIGH)" in bad.stdout and "Recommendations:" in bad.stdout


def test_json_output_and_report_file(openai_server, minilm, query, tmp_path):
    script(openai_server, json_or_prose)
    report_path = tmp_path / "report.json"
    result = stability(
        openai_server, "--input", str(query), "--runs", "6", "--json", "--output", str(report_path)
    )
    data = json.loads(result.stdout)
    assert result.exit_code in (6, 1) and data["verdict"] in ("RISKY", "DO_NOT_SHIP")
    assert "FORMAT_INCONSISTENCY" in [f["name"] for f in data["fingerprints"]]
    assert json.loads(report_path.read_text(encoding="utf-8")) == data
    assert len(data["runs"]) == 6 and data["runs"][0]["response"]["text"]
    assert data["embedder_id"] == "onnx:all-MiniLM-L6-v2"  # the default backend, ONNX Runtime
    assert result.stderr == ""  # no progress bar, no messages


def test_run_config_options_reach_every_request(openai_server, minilm, query):
    script(openai_server, identical)
    result = stability(openai_server, "--input", str(query), "--runs", "3", "--temperature", "0.2", "--seed", "7",
                       "--max-tokens", "40")  # fmt: skip
    assert result.exit_code == 0, result.output
    for request in openai_server.requests:
        body = request.body
        assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.2, 7, 40)
        assert body["messages"] == [
            {"role": "system", "content": "You track orders."},
            {"role": "user", "content": "Order 42?"},
        ]


def test_too_few_successful_runs_exits_3(openai_server, minilm, query):
    for _ in range(10):
        openai_server.queue_fault(status=500)
    result = stability(openai_server, "--input", str(query), "--runs", "10", "--max-retries", "0")
    assert result.exit_code == 3, result.output  # calls failed: incomplete, as grade's failed cases
    assert "only 0 of 10 runs succeeded; at least 8 are needed" in result.stderr
    assert "ServerError" in result.stderr and result.stdout == ""


def test_retried_failures_do_not_count(openai_server, minilm, query):
    script(openai_server, identical)
    openai_server.queue_fault(status=500)
    result = stability(openai_server, "--input", str(query), "--runs", "4", "--max-retries", "1")
    assert result.exit_code == 0 and "4 succeeded, 0 failed" in result.stdout
    assert len(openai_server.requests) == 5


def test_a_malformed_input_file_exits_2_naming_file_and_field(openai_server, tmp_path):
    path = write_json(tmp_path / "query.json", {"messages": [{"role": "user", "content": 5}]})
    result = stability(openai_server, "--input", str(path))
    assert result.exit_code == 2
    assert f"{path}: messages[0].content: must be a string" in result.stderr
    assert openai_server.requests == []


def test_invalid_json_input_exits_2(openai_server, tmp_path):
    path = tmp_path / "query.json"
    path.write_text('{"user_input": ', encoding="utf-8")
    result = stability(openai_server, "--input", str(path))
    assert (
        result.exit_code == 2
        and f"{path}: line 1 column" in result.stderr
        and "not valid JSON" in result.stderr
    )


def test_a_bad_tools_file_exits_2(openai_server, query, tmp_path):
    tools = write_json(tmp_path / "tools.json", [{"type": "function", "function": {"name": ""}}])
    result = stability(openai_server, "--input", str(query), "--tools", str(tools))
    assert (
        result.exit_code == 2 and f"{tools}: [0].function.name: must be a non-empty string" in result.stderr
    )
    assert openai_server.requests == []


@pytest.mark.parametrize("runs", ["1", "201", "many"])
def test_runs_outside_2_to_200_is_a_usage_error(openai_server, query, runs):
    result = stability(openai_server, "--input", str(query), "--runs", runs)
    assert result.exit_code == 2  # the usage-error code of every command, never a verdict
    assert "--runs" in result.output and openai_server.requests == []


@pytest.mark.parametrize(
    "args",
    [
        ["--model", "recorded:gpt-4o"],
        ["--model", "gpt-4o"],
        ["--model", "anthropic:claude"],
    ],
)
def test_a_bad_model_spec_exits_2(query, args):
    result = invoke("stability", "--input", str(query), *args)
    assert result.exit_code == 2 and result.stderr.startswith("error: ")


def test_a_config_file_overrides_thresholds(openai_server, minilm, query, tmp_path):
    script(openai_server, short_or_long)
    lenient = write_json(tmp_path / "config.json", {"safe_threshold": 0.8})
    assert (
        stability(openai_server, "--input", str(query), "--runs", "6", "--config", str(lenient)).exit_code
        == 0
    )
    bad = write_json(tmp_path / "bad.json", {"safe_threshold": 2})
    result = stability(openai_server, "--input", str(query), "--config", str(bad))
    assert result.exit_code == 2 and "safe_threshold" in result.stderr


def test_missing_input_file_exits_2(openai_server, tmp_path):
    result = stability(openai_server, "--input", str(tmp_path / "nope.json"))
    assert result.exit_code == 2 and "cannot read the input file" in result.stderr


def test_an_embedding_failure_exits_3(openai_server, query, tmp_path):
    script(openai_server, identical)
    result = stability(openai_server, "--input", str(query), "--runs", "2",
                       "--embedding-model", str(tmp_path / "no-such-model"))  # fmt: skip
    assert result.exit_code == 3 and "could not embed the responses" in result.stderr
    assert len(openai_server.requests) == 2  # the runs were made; the embedding failed


def test_the_exit_code_table():
    """Stability's errors map onto the CLI's one table: input errors are usage errors, failed
    runs or embeddings leave the work incomplete, anything else is a crash."""
    assert exit_code_for(ToolDefinitionError("x")) == ExitCode.USAGE == 2
    assert exit_code_for(InvalidJSONInputError("x")) == ExitCode.USAGE
    assert exit_code_for(StabilityInputError("x")) == ExitCode.USAGE
    assert exit_code_for(ConfigurationError("x")) == ExitCode.USAGE
    too_few = InsufficientRunsError("x", succeeded=1, failed=9, minimum=8)
    assert exit_code_for(too_few) == ExitCode.INCOMPLETE == 3
    assert exit_code_for(StabilityEmbeddingError("x")) == ExitCode.INCOMPLETE
    assert exit_code_for(AdapterError("x")) == ExitCode.INCOMPLETE
    assert exit_code_for(RuntimeError("x")) == ExitCode.INTERNAL == 4


def test_no_verdict_shares_a_code_with_a_usage_error_or_a_crash():
    """Issue 36: Ruvrics' DO_NOT_SHIP 2, too few runs 4 and embedding error 5 were every other
    command's usage error, crash and NOT SETTLED. Now SAFE is 0, DO_NOT_SHIP is 1 (grade's FAILED
    gate) and RISKY 6; every error code of stability is one no verdict uses."""
    assert STABILITY_VERDICT_CODES == {"SAFE": 0, "DO_NOT_SHIP": 1, "RISKY": 6}
    verdicts = set(STABILITY_VERDICT_CODES.values()) - {ExitCode.OK}
    assert verdicts <= VERDICTS and not verdicts & ERRORS
    assert {ExitCode.USAGE, ExitCode.INTERNAL, ExitCode.INCOMPLETE} <= ERRORS
    errors = (ToolDefinitionError("x"), StabilityEmbeddingError("x"), ConfigurationError("x"), RuntimeError())
    errors += (InsufficientRunsError("x", succeeded=1, failed=9, minimum=8),)
    assert {exit_code_for(e) for e in errors} <= ERRORS


def test_help_lists_the_options():
    result = invoke("stability", "--help")
    assert result.exit_code == 0
    for option in (
        "--input",
        "--prompt",
        "--tools",
        "--model",
        "--runs",
        "--output",
        "--json",
        "--concurrency",
        "--embedding-backend",
        "--embedding-device",
    ):
        assert option in result.stdout


def test_the_analysis_is_stored_in_the_ledger_for_its_task(openai_server, minilm, query, ledger_url):
    from llm_connect.ledger import QualityLedger

    script(openai_server, identical)
    result = stability(openai_server, "--input", str(query), "--runs", "4", "--task", "support", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    with QualityLedger(ledger_url) as ledger:
        stored = ledger.latest_stability("support", "gpt-test")
        assert stored is not None
        responses = ledger.stability_responses(stored.id)
    assert stored is not None and stored.id == out["stored"]["id"] and stored.verdict == "SAFE"
    assert stored.runs == 4 and stored.successful_runs == 4 and stored.report["verdict"] == "SAFE"
    assert stored.prompt_sha256 == out["query_digest"]
    assert [r.run_index for r in responses] == [0, 1, 2, 3] and all(r.text for r in responses)


def test_no_store_leaves_the_ledger_alone(openai_server, minilm, query, tmp_path):
    script(openai_server, identical)
    db = tmp_path / "other.db"
    result = stability(
        openai_server, "--input", str(query), "--runs", "3", "--no-store", "--db", f"sqlite:///{db}"
    )
    assert result.exit_code == 0, result.output
    assert not db.exists()


def test_an_unusable_ledger_exits_2_before_any_call(openai_server, query, tmp_path):
    result = stability(openai_server, "--input", str(query), "--runs", "3", "--db", "nosuchdb://x")
    assert result.exit_code == 2
    assert openai_server.requests == []


def test_the_embedding_backend_can_be_chosen(openai_server, minilm, query):
    script(openai_server, identical)
    torch_run = stability(
        openai_server, "--input", str(query), "--runs", "3", "--json", "--embedding-backend", "torch"
    )
    assert torch_run.exit_code == 0, torch_run.output
    assert json.loads(torch_run.stdout)["embedder_id"] == "sentence-transformers:all-MiniLM-L6-v2"
    onnx_run = stability(
        openai_server, "--input", str(query), "--runs", "3", "--json", "--embedding-backend", "onnx"
    )
    assert onnx_run.exit_code == 0, onnx_run.output
    assert json.loads(onnx_run.stdout)["embedder_id"] == "onnx:all-MiniLM-L6-v2"
    calls = len(openai_server.requests)
    bad = stability(openai_server, "--input", str(query), "--runs", "3", "--embedding-backend", "tpu")
    assert bad.exit_code == 2 and "--embedding-backend: unknown embedding backend 'tpu'" in bad.stderr
    assert "allowed: torch, onnx" in bad.stderr
    assert len(openai_server.requests) == calls  # refused before any call


def test_an_unavailable_embedding_device_exits_2_before_any_call(openai_server, query):
    import torch

    if torch.cuda.is_available():
        skip_or_fail(
            "LLM_CONNECT_REQUIRE_NO_GPU",
            "this machine has a CUDA device",
            tests="the test of a machine without one",
        )
    gpu = stability(openai_server, "--input", str(query), "--runs", "3", "--embedding-device", "cuda")
    assert gpu.exit_code == 2
    assert "--embedding-device: embedding device 'cuda' is not available" in gpu.stderr
    assert "sees no CUDA device" in gpu.stderr
    bad = stability(openai_server, "--input", str(query), "--runs", "3", "--embedding-device", "tpu")
    assert bad.exit_code == 2 and "auto, cpu, cuda, cuda:N" in bad.stderr
    onnx_gpu = stability(
        openai_server,
        "--input",
        str(query),
        "--runs",
        "3",
        "--embedding-backend",
        "onnx",
        "--embedding-device",
        "cuda",
    )
    assert onnx_gpu.exit_code == 2 and "runs on the CPU" in onnx_gpu.stderr
    assert openai_server.requests == []


def _refuses_null_content(body: dict) -> str:  # type: ignore[type-arg]
    """llama-cpp-python's server: an assistant message's content must be a string."""
    for message in body.get("messages", []):
        if message.get("role") == "assistant" and message.get("content") is None:
            raise ValueError("1 validation error: content: Input should be a valid string, input: None")
    return ANSWER


def test_an_assistant_tool_call_turn_is_sent_as_a_strict_server_takes_it(openai_server, minilm):
    """The README's stability example holds an assistant turn that only calls a tool
    (``"content": null``): it is sent with an empty string, which llama-cpp-python accepts."""
    openai_server.responder = _refuses_null_content
    example = Path(__file__).resolve().parents[2] / "examples" / "stability-query.json"
    result = stability(openai_server, "--input", str(example), "--runs", "4", "--max-retries", "0")
    assert result.exit_code in (0, 1, 6), result.output  # a verdict, not a failed run
    sent = [m for r in openai_server.requests for m in r.body["messages"] if m["role"] == "assistant"]
    assert sent and all(isinstance(m["content"], str) for m in sent)
    assert any(m.get("tool_calls") and m["content"] == "" for m in sent)


def test_one_error_every_run_got_is_printed_once(openai_server, query):
    openai_server.responder = lambda body: (_ for _ in ()).throw(ValueError("the same refusal\nline two"))
    result = stability(openai_server, "--input", str(query), "--runs", "10", "--max-retries", "0")
    assert result.exit_code == 3, result.output
    assert result.stderr.count("the same refusal") == 1 and "1 distinct error" in result.stderr
    assert "  10 runs (0, 1, 2, ...): ServerError" in result.stderr
