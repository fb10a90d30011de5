"""Samples are seeded, stratified and free of duplicates; personal data gets stable placeholders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_connect.errors import TrafficImportError
from llm_connect.grading import load_suite
from llm_connect.traffic import ImportOptions, Redactor, import_traffic, luhn_ok


def _log(i: int, *, task: str, text: str | None = None, error: bool = False) -> dict[str, Any]:
    return {
        "id": f"r{i}",
        "request": {"model": "gpt-4o", "messages": [{"role": "user", "content": text or f"question {i}"}]},
        "response": {
            "model": "gpt-4o-2024-08-06",
            "choices": [
                {"message": {"role": "assistant", "content": f"answer {i}"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 2, "completion_tokens": 2},
        },
        "latency_ms": 800 + i,
        "cost_usd": 0.001,
        "metadata": {"feature": task},
        **({"error": "rate limited"} if error else {}),
    }


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def traffic(tmp_path: Path) -> Path:
    rows = [_log(i, task="refunds") for i in range(60)] + [_log(100 + i, task="billing") for i in range(20)]
    rows += [_log(i, task="refunds") for i in range(10)]  # exact duplicates of r0..r9's conversations
    return _write(tmp_path / "log.jsonl", rows)


def _ids(path: Path) -> list[str]:
    return [c.id for c in load_suite(path)]


def test_the_same_seed_draws_the_same_sample_and_another_seed_another(traffic: Path, tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in ("a.jsonl", "b.jsonl", "c.jsonl"))
    import_traffic([traffic], a, ImportOptions(sample=10, seed=7))
    import_traffic([traffic], b, ImportOptions(sample=10, seed=7))
    import_traffic([traffic], c, ImportOptions(sample=10, seed=8))
    assert _ids(a) == _ids(b) and len(_ids(a)) == 10
    assert _ids(a) != _ids(c)


def test_duplicates_are_removed_before_sampling_unless_kept(traffic: Path, tmp_path: Path) -> None:
    report = import_traffic([traffic], tmp_path / "all.jsonl")
    assert (report.duplicates, report.written) == (10, 80)
    kept = import_traffic([traffic], tmp_path / "kept.jsonl", ImportOptions(keep_duplicates=True))
    assert (kept.duplicates, kept.written) == (0, 90)
    assert len(set(_ids(tmp_path / "kept.jsonl"))) == 90  # repeated ids made unique


def test_proportional_strata_and_equal_strata(traffic: Path, tmp_path: Path) -> None:
    report = import_traffic(
        [traffic], tmp_path / "p.jsonl", ImportOptions(sample=20, stratify_by="feature", seed=1)
    )
    assert report.strata == {
        "billing": {"population": 20, "quota": 5, "taken": 5},
        "refunds": {"population": 60, "quota": 15, "taken": 15},
    }
    equal = import_traffic(
        [traffic], tmp_path / "e.jsonl", ImportOptions(sample=30, stratify_by="feature", per_stratum=True)
    )
    assert {k: v["taken"] for k, v in equal.strata.items()} == {"billing": 20, "refunds": 30}
    assert equal.warnings == ["stratum 'billing' has only 20 case(s), fewer than the 30 asked"]
    assert sum(1 for c in load_suite(tmp_path / "e.jsonl") if c.metadata["feature"] == "billing") == 20


def test_a_sample_larger_than_the_traffic_warns(traffic: Path, tmp_path: Path) -> None:
    report = import_traffic([traffic], tmp_path / "s.jsonl", ImportOptions(sample=500))
    assert report.written == 80
    assert report.warnings == ["only 80 case(s) to sample from, fewer than the 500 asked"]


def test_task_from_a_metadata_key_else_the_model(traffic: Path, tmp_path: Path) -> None:
    import_traffic([traffic], tmp_path / "t.jsonl", ImportOptions(task_from="feature"))
    assert load_suite(tmp_path / "t.jsonl").tasks == ["refunds", "billing"]
    import_traffic([traffic], tmp_path / "m.jsonl")
    assert load_suite(tmp_path / "m.jsonl").tasks == ["gpt-4o"]


def test_luhn() -> None:
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")


def test_every_pattern_is_masked_with_stable_placeholders(tmp_path: Path) -> None:
    text = (
        "Mail ana.lopez@example.com or call +44 20 7946 0958, card 4111 1111 1111 1111, "
        "from 192.168.10.24 and 2001:db8::8a2e:370:7334; again ana.lopez@example.com"
    )
    masked = Redactor().text(text)
    for value in ("ana.lopez", "7946", "4111", "192.168", "2001:db8"):
        assert value not in masked
    assert masked.count("[EMAIL_1]") == 2
    for placeholder in ("[PHONE_1]", "[CARD_1]", "[IP_1]", "[IP_2]"):
        assert placeholder in masked


def test_what_is_not_personal_data_is_left_alone() -> None:
    text = "Order 4111111111111112 shipped 2024-01-15, version 1.2.3, 3 items for 42.50"
    assert Redactor().text(text) == text


def test_redact_keeps_placeholders_stable_across_a_conversation_and_its_answer(tmp_path: Path) -> None:
    row = _log(1, task="x", text="I am bob@example.org, card 5555 5555 5555 4444")
    row["request"]["messages"].insert(0, {"role": "system", "content": "Never email bob@example.org"})
    row["response"]["choices"][0]["message"]["content"] = "Sent to bob@example.org, ip 10.0.0.1"
    out = tmp_path / "r.jsonl"
    report = import_traffic([_write(tmp_path / "l.jsonl", [row])], out, ImportOptions(redact=True))
    suite = load_suite(out)
    case = suite.cases[0]
    assert case.conversation is not None
    messages = case.conversation.messages
    assert messages[0]["content"] == "Never email [EMAIL_1]"
    assert messages[1]["content"] == "I am [EMAIL_1], card [CARD_1]"
    assert suite.recorded(case, "production").text == "Sent to [EMAIL_1], ip [IP_1]"
    assert report.notes["redacted email values"] == 3


def test_credentials_are_masked_without_redact(tmp_path: Path) -> None:
    row = _log(1, task="x", text="my key is sk-proj-abcdefghijklmnopqrstuvwx1234")
    row["request"]["api_key"] = "sk-proj-abcdefghijklmnopqrstuvwx1234"
    out = tmp_path / "s.jsonl"
    import_traffic([_write(tmp_path / "l.jsonl", [row])], out)
    text = out.read_text()
    assert "abcdefghijklmnop" not in text and "[REDACTED]" in text


def test_errored_and_empty_calls_are_dropped_and_counted(tmp_path: Path) -> None:
    empty = _log(2, task="x")
    empty["response"]["choices"][0]["message"]["content"] = ""
    rows = [_log(1, task="x"), _log(3, task="x", error=True), empty]
    report = import_traffic([_write(tmp_path / "l.jsonl", rows)], tmp_path / "s.jsonl")
    assert report.written == 1 and report.dropped == {"errored call": 1, "empty answer": 1}


def test_nothing_left_after_the_filters_is_an_error_and_nothing_is_written(tmp_path: Path) -> None:
    path = _write(tmp_path / "l.jsonl", [_log(1, task="x", error=True)])
    with pytest.raises(TrafficImportError, match="no case left to write"):
        import_traffic([path], tmp_path / "s.jsonl")
    assert list(tmp_path.iterdir()) == [path]
