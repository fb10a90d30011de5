"""Secrets and the ledger, through its public API only.

Stored free text (a grade's notes, a failure's message) has every credential
format masked; a judge's details are masked by value, never filtered by name
(``token_count`` and ``tokenizer`` survive). These pass once the ledger uses
``llm_connect._secrets`` (``mask_secrets`` for text, ``mask_value`` for details,
``redact_request`` for run configs and run options).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_connect import GradingResult, LLMResponse, RunConfig
from llm_connect._secrets import REDACTED
from llm_connect.ledger import QualityLedger
from tests.test_secrets import CREDENTIALS


@pytest.fixture
def ledger(tmp_path: Path) -> QualityLedger:
    return QualityLedger(f"sqlite:///{tmp_path}/l.db")


def _result(*, notes: str = "ok", details: dict[str, object] | None = None, **kw: object) -> GradingResult:
    return GradingResult(
        quality_score=0.5,
        notes=notes,
        grader_id="exact",
        baseline_response=LLMResponse(text="a", model="big", provider="recorded"),
        candidate_response=LLMResponse(text="b", model="small", provider="recorded"),
        details=details or {},
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("kind", sorted(CREDENTIALS))
def test_each_credential_format_is_masked_in_a_stored_note(ledger: QualityLedger, kind: str) -> None:
    secret = CREDENTIALS[kind]
    ledger.record(_result(notes=f"the judge saw {secret} in the answer"), task="t", run_id="r", case_id="c")
    (row,) = ledger.results()
    assert secret not in row.notes and secret[-10:] not in row.notes
    assert row.notes == f"the judge saw {REDACTED} in the answer"


def test_secret_pairs_are_masked_in_a_stored_note(ledger: QualityLedger) -> None:
    note = "headers Ocp-Apim-Subscription-Key: 0123abcd0123abcd0123 and api_key=plainvalue123"
    ledger.record(_result(notes=note), task="t", run_id="r", case_id="c")
    (row,) = ledger.results()
    assert "0123abcd0123abcd0123" not in row.notes and "plainvalue123" not in row.notes


@pytest.mark.parametrize("kind", sorted(CREDENTIALS))
def test_each_credential_format_is_masked_in_a_stored_failure(ledger: QualityLedger, kind: str) -> None:
    secret = CREDENTIALS[kind]
    ledger.record_failure(
        run_id="r",
        case_id="c",
        task="t",
        stage="candidate",
        error_type="AuthenticationError",
        message=f"openai:m: Error code: 401 - Incorrect API key provided: {secret}.",
        adapter_id="openai:m",
    )
    (failure,) = ledger.failures("r")
    assert secret not in failure.message and secret[-10:] not in failure.message
    assert REDACTED in failure.message


def test_details_keep_every_key_and_mask_only_credential_values(ledger: QualityLedger) -> None:
    details = {
        "token_count": 12,
        "tokenizer": "cl100k_base",
        "token": "hello",
        "secret_word_found": False,
        "judge_spec": {"name": "llm", "args": {"api_key": CREDENTIALS["openai"]}},
        "raw_reply": f"score 1.0, key {CREDENTIALS['github_classic']}",
    }
    ledger.record(_result(details=details), task="t", run_id="r", case_id="c")
    (row,) = ledger.results()
    stored = dict(row.details)
    assert {k: stored[k] for k in ("token_count", "tokenizer", "token", "secret_word_found")} == {
        "token_count": 12,
        "tokenizer": "cl100k_base",
        "token": "hello",
        "secret_word_found": False,
    }
    assert stored["judge_spec"]["args"] == {"api_key": REDACTED}
    assert stored["raw_reply"] == f"score 1.0, key {REDACTED}"


def test_request_side_secrets_are_dropped_from_the_stored_run_config(ledger: QualityLedger) -> None:
    config = RunConfig(
        model_params={
            "seed": 3,
            "max_tokens": 10,
            "extra_headers": {"Ocp-Apim-Subscription-Key": "0123abcd", "X-Trace": CREDENTIALS["slack"]},
        }
    )
    ledger.record(_result(run_config=config), task="t", run_id="r", case_id="c")
    (row,) = ledger.results()
    assert row.run_config is not None
    assert dict(row.run_config["model_params"]) == {
        "seed": 3,
        "max_tokens": 10,
        "extra_headers": {"X-Trace": REDACTED},
    }
