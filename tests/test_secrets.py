"""``llm_connect._secrets``: secret names for requests, credential shapes for text.

The credential samples are built from parts (never a literal key in the source)
and are fakes of the right shape.
"""

from __future__ import annotations

import json
import logging
import string
from typing import Any

import pytest

from llm_connect import _secrets
from llm_connect._secrets import (
    REDACTED,
    SecretMaskingFilter,
    get_logger,
    is_secret_key,
    mask_secrets,
    mask_value,
    redact_request,
    secret_values,
)
from llm_connect.errors import AdapterError, CaseDataError, LLMConnectError, SuiteError

_ALNUM = string.ascii_letters + string.digits


def _chars(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(alphabet[(i * 7 + 3) % len(alphabet)] for i in range(n))


#: One fake credential per format llm-connect masks in free text.
CREDENTIALS: dict[str, str] = {
    "openai": "sk-" + _chars(48),
    "openai_project": "sk-proj-" + _chars(40) + "_" + _chars(20),
    "anthropic": "sk-ant-api03-" + _chars(80) + "-" + _chars(6) + "AA",
    "huggingface": "hf_" + _chars(34),
    "github_classic": "ghp_" + _chars(36),
    "github_oauth": "gho_" + _chars(36),
    "github_app": "ghs_" + _chars(36),
    "github_fine_grained": "github_pat_" + _chars(22) + "_" + _chars(59),
    "google": "AIza" + _chars(35, _ALNUM + "-_"),
    "slack": "xoxb-" + "1234567890" + "-" + "0987654321" + "-" + _chars(24),
    "aws": "AKIA" + _chars(16, string.ascii_uppercase + string.digits),
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    + "eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    + _chars(43, _ALNUM + "-_"),
}


@pytest.mark.parametrize("kind", sorted(CREDENTIALS))
@pytest.mark.parametrize(
    "template",
    [
        "the key {} was rejected",
        "{}",
        "({}).",
        '{{"note": "uses {}", "n": 1}}',
        "https://example.com/v1?x=1&k={}&y=2",
        "line one\nvalue={}\nline three",
    ],
)
def test_each_credential_format_is_masked_in_free_text(kind: str, template: str) -> None:
    secret = CREDENTIALS[kind]
    masked = mask_secrets(template.format(secret))
    assert secret not in masked and secret[-12:] not in masked
    assert REDACTED in masked


def test_masking_keeps_the_surrounding_text() -> None:
    secret = CREDENTIALS["huggingface"]
    assert mask_secrets(f"token {secret} expired.") == f"token {REDACTED} expired."
    assert mask_secrets(f"Authorization: Bearer {secret}") == f"Authorization: {REDACTED}"
    assert mask_secrets("sent Bearer abc.DEF-123456 upstream") == f"sent Bearer {REDACTED} upstream"


@pytest.mark.parametrize(
    "text",
    [
        "Ocp-Apim-Subscription-Key: 0123abcd0123abcd0123abcd0123abcd",
        "api-key: 0123456789abcdef0123456789abcdef",
        "x-goog-api-key: plainvalue123",
        "X-Api-Key=plainvalue123",
        "Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "Cookie: session=abc123def456",
        "OPENAI_API_KEY=plainvalue123",
        "https://host/path?api_key=plainvalue123&model=m",
        "https://host/path?token=plainvalue123",
        "password=hunter22",
        "client_secret: plainvalue123",
        "access_token=plainvalue123",
        '{"api-key": "plainvalue123", "model": "m"}',
        "{'api_key': 'plainvalue123'}",
        '{"token": "plainvalue123"}',
    ],
)
def test_secret_named_pairs_are_masked(text: str) -> None:
    masked = mask_secrets(text)
    assert "plainvalue123" not in masked and "0123abcd0123abcd" not in masked
    assert "0123456789abcdef" not in masked and "dXNlcjpw" not in masked and "abc123def456" not in masked
    assert "hunter22" not in masked
    assert REDACTED in masked


def test_masked_json_text_stays_json_with_its_keys() -> None:
    text = json.dumps(
        {
            "headers": {"Ocp-Apim-Subscription-Key": "0123abcd0123abcd", "api-key": "k-123456"},
            "nested": json.dumps({"api_key": "inner-secret-1"}),
            "token_count": 12,
            "tokenizer": "cl100k_base",
        }
    )
    masked = json.loads(mask_secrets(text))
    assert masked["headers"] == {"Ocp-Apim-Subscription-Key": REDACTED, "api-key": REDACTED}
    assert json.loads(masked["nested"]) == {"api_key": REDACTED}
    assert (masked["token_count"], masked["tokenizer"]) == (12, "cl100k_base")


def test_numbers_under_secret_json_keys_are_masked_as_strings() -> None:
    text = json.dumps(
        {"key": 1234567, "x": {"password": 123456789.5}, "raw": json.dumps({"pin_token": 12345678})}
    )
    masked = json.loads(mask_secrets(text))  # still JSON
    assert masked["key"] == REDACTED and masked["x"] == {"password": REDACTED}
    assert json.loads(masked["raw"]) == {"pin_token": REDACTED}


@pytest.mark.parametrize(
    "text",
    [
        "The candidate's first token: hello-world, the key: value pairs match.",
        "max_tokens=512 max_completion_tokens=64 top_logprobs=5 token_count: 12345678",
        "prompt_cache_key=abcdefghijk idempotency_key=abcdefghijk",
        "bearer instruments; Basic understanding; a task-0123456789abcdef id",
        "tokenizer: cl100k_base; monkey: abcdefgh; author: Jane Doe",
        "hf_hub_download and gh_pages are function names",
        "plain prose without any marker at all",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert mask_secrets(text) == text


def test_masking_is_idempotent() -> None:
    text = (
        " ".join(CREDENTIALS.values()) + ' api_key=abcdefgh "password": "x1" Authorization: Bearer abcdefgh1'
    )
    once = mask_secrets(text)
    assert mask_secrets(once) == once


def test_text_without_markers_runs_no_regular_expression(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_regex(name: str) -> Any:
        raise AssertionError(f"pattern {name!r} ran on text without a marker")

    monkeypatch.setattr(_secrets, "_pattern", no_regex)
    text = "The candidate answer covers the same points as the baseline, slightly shorter." * 20
    assert mask_secrets(text) is text


def test_text_whose_lower_case_changes_length_is_still_masked() -> None:
    text = "İstanbul İİİ password=hunter22 İ"  # "İ".lower() is two characters
    assert mask_secrets(text) == f"İstanbul İİİ password={REDACTED} İ"


# -- names --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "apikey",
        "apiKey",
        "x-api-key",
        "X-Api-Key",
        "api-key",
        "x-goog-api-key",
        "Ocp-Apim-Subscription-Key",
        "authorization",
        "Proxy-Authorization",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "token",
        "access_token",
        "accessToken",
        "auth_token",
        "id_token",
        "refresh_token",
        "X-Auth-Token",
        "credential",
        "credentials",
        "cookie",
        "Set-Cookie",
        "key",
        "private_key",
        "AWS_SECRET_ACCESS_KEY",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_key(name)


@pytest.mark.parametrize(
    "name",
    [
        "max_tokens",
        "max_completion_tokens",
        "maxTokens",
        "top_logprobs",
        "logit_bias",
        "token_count",
        "tokenizer",
        "tokens",
        "eos_token",
        "pad_token",
        "prompt_cache_key",
        "Idempotency-Key",
        "keywords",
        "author",
        "seed",
        "model",
        "",
    ],
)
def test_names_that_are_not_secrets(name: str) -> None:
    assert not is_secret_key(name)


# -- values ---------------------------------------------------------------------------


def test_redact_request_drops_secret_names_at_every_depth_and_masks_the_rest() -> None:
    params = {
        "seed": 7,
        "max_tokens": 5,
        "api_key": "plain",
        "extra_headers": {"Ocp-Apim-Subscription-Key": "k1", "api-key": "k2", "Accept": "json"},
        "extra_query": {"api-version": "2024-06-01", "key": "k3"},
        "stop": ["\n", CREDENTIALS["openai"]],
        "metadata": {"note": f"see {CREDENTIALS['github_classic']}"},
    }
    assert redact_request(params) == {
        "seed": 7,
        "max_tokens": 5,
        "extra_headers": {"Accept": "json"},
        "extra_query": {"api-version": "2024-06-01"},
        "stop": ["\n", REDACTED],
        "metadata": {"note": f"see {REDACTED}"},
    }


def test_mask_value_drops_no_key() -> None:
    details = {
        "token_count": 12,
        "tokenizer": "cl100k_base",
        "token": "hello",
        "tokens": ["a", "b"],
        "judge_spec": {"name": "llm", "args": {"api_key": CREDENTIALS["anthropic"]}},
        "raw_reply": f'{{"quality_score": 1.0, "leak": "{CREDENTIALS["google"]}"}}',
        "pair": ("x", 1.5, None, True),
    }
    masked = mask_value(details)
    assert set(masked) == set(details)
    assert masked["token_count"] == 12 and masked["tokenizer"] == "cl100k_base"
    assert masked["token"] == "hello" and masked["tokens"] == ["a", "b"]
    assert masked["judge_spec"] == {"name": "llm", "args": {"api_key": REDACTED}}
    assert json.loads(masked["raw_reply"]) == {"quality_score": 1.0, "leak": REDACTED}
    assert masked["pair"] == ["x", 1.5, None, True]


def test_secret_values_finds_values_under_secret_names_and_bearer_tokens() -> None:
    params = {
        "seed": 1,
        "api_key": "k-top",
        "extra_headers": {"Authorization": "Bearer tok-123", "Accept": "json"},
        "extra_query": {"key": "AIza-q"},
    }
    assert sorted(secret_values(params)) == sorted(["k-top", "Bearer tok-123", "tok-123", "AIza-q"])


def test_types_helpers_delegate_here() -> None:
    from llm_connect.types import SECRET_KEY_MARKERS, _is_secret_key, redact_secrets

    assert "api_key" in SECRET_KEY_MARKERS
    assert not _is_secret_key("token_count") and _is_secret_key("Ocp-Apim-Subscription-Key")
    headers = {"Ocp-Apim-Subscription-Key": "k", "Accept": CREDENTIALS["slack"]}
    assert redact_secrets({"extra_headers": headers}) == {"extra_headers": {"Accept": REDACTED}}


# -- errors and logs ------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(CREDENTIALS))
def test_every_error_masks_its_message(kind: str) -> None:
    secret = CREDENTIALS[kind]
    errors: list[BaseException] = [
        LLMConnectError(f"failed with {secret}"),
        AdapterError(f"openai:m: rejected {secret}", adapter_id="openai:m", status_code=401),
        SuiteError(f"bad value {secret}", path="s.jsonl", line=3, field="prompt"),
        CaseDataError(f"case data {secret}", case_id="c1"),
    ]
    for error in errors:
        assert secret not in str(error) and secret not in repr(error)
        assert all(secret not in str(arg) for arg in error.args)
        assert secret not in getattr(error, "message", "")


def test_logger_filter_masks_messages_arguments_and_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    secret = CREDENTIALS["openai"]
    log = get_logger("llm_connect.tests.secrets")
    assert get_logger("llm_connect.tests.secrets").filters.count(_secrets._FILTER) == 1  # once
    caplog.set_level(logging.DEBUG, logger="llm_connect")
    log.warning("calling with %s", secret)
    try:
        raise RuntimeError(f"boom {secret}")
    except RuntimeError:
        log.exception("failed")
    assert secret not in caplog.text
    assert caplog.text.count(REDACTED) >= 2


def test_the_package_logger_has_the_filter_once_llm_connect_is_imported() -> None:
    import llm_connect  # noqa: F401

    assert any(isinstance(f, SecretMaskingFilter) for f in logging.getLogger("llm_connect").filters)


def test_the_openai_adapter_logger_masks() -> None:
    from llm_connect.adapters import _openai

    assert any(isinstance(f, SecretMaskingFilter) for f in _openai._log.filters)


def test_cli_masks_unexpected_errors_and_tracebacks(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from llm_connect.cli import _common
    from llm_connect.cli._exit import ExitCode

    secret = CREDENTIALS["huggingface"]
    monkeypatch.setattr(_common, "_debug", False)
    monkeypatch.delenv("LLM_CONNECT_DEBUG", raising=False)
    assert _common.report_exception(RuntimeError(f"third-party said {secret}")) == ExitCode.INTERNAL
    assert _common.report_exception(AdapterError(f"rejected {secret}")) == ExitCode.INCOMPLETE
    monkeypatch.setattr(_common, "_debug", True)
    try:
        raise KeyError(f"key {secret}")
    except KeyError as exc:
        _common.report_exception(exc)
    err = capsys.readouterr().err
    assert secret not in err and "Traceback" in err and err.count(REDACTED) >= 3
