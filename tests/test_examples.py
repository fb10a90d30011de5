"""The example data in ``examples/`` is well formed and tells the story the README claims.

These tests read the files with plain ``json`` / ``yaml`` / ``jsonschema`` only, so they
do not depend on the suite loader or the judges: if a file here breaks, the README's
first command breaks, whatever the rest of the package does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from statistics import mean
from typing import Any

import jsonschema
import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SUITE = EXAMPLES / "suite.jsonl"
PAIRS = EXAMPLES / "pairs.jsonl"

BASELINE = "gpt-4o"
GOOD_CANDIDATE = "gpt-4o-mini"
WEAK_CANDIDATE = "llama-3.1-8b"
MODELS = {BASELINE, GOOD_CANDIDATE, WEAK_CANDIDATE}
TASKS = {"support", "extraction", "summary"}
# USD per 1M tokens (input, output), as documented in examples/README.md.
PRICES = {BASELINE: (2.50, 10.00), GOOD_CANDIDATE: (0.15, 0.60), WEAK_CANDIDATE: (0.05, 0.08)}

_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(.*)\n```\s*\Z", re.DOTALL)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for lineno, raw in enumerate(path.read_bytes().decode("utf-8").splitlines(), 1):
        assert raw.strip(), f"{path.name}:{lineno}: blank line"
        row = json.loads(raw)
        assert isinstance(row, dict), f"{path.name}:{lineno}: not a JSON object"
        rows.append(row)
    return rows


def _parse_json_response(text: str) -> Any:
    """Parse a JSON response, accepting one surrounding ```json fence (as the format judge does)."""
    match = _FENCE.match(text.strip())
    return json.loads(match.group(1) if match else text)


def _schema_of(case: dict[str, Any]) -> dict[str, Any]:
    schema = case["expected"]["schema"]
    if isinstance(schema, str):
        loaded: dict[str, Any] = json.loads((SUITE.parent / schema).read_text(encoding="utf-8"))
        return loaded
    assert isinstance(schema, dict)
    return schema


@pytest.fixture(scope="module")
def suite() -> list[dict[str, Any]]:
    return _read_jsonl(SUITE)


def _by_task(suite: list[dict[str, Any]], task: str) -> list[dict[str, Any]]:
    return [c for c in suite if c["task"] == task]


# -- suite.jsonl: structure -----------------------------------------------------------


def test_suite_has_at_least_60_cases_over_three_tasks(suite: list[dict[str, Any]]) -> None:
    assert len(suite) >= 60
    assert {c["task"] for c in suite} == TASKS
    for task in TASKS:
        assert len(_by_task(suite, task)) >= 20, task


def test_suite_ids_are_unique(suite: list[dict[str, Any]]) -> None:
    ids = [c["id"] for c in suite]
    assert len(ids) == len(set(ids))


def test_every_case_has_the_required_fields(suite: list[dict[str, Any]]) -> None:
    allowed = {"id", "task", "prompt", "system_prompt", "expected", "tags", "responses"}
    for case in suite:
        assert set(case) <= allowed, case["id"]
        assert isinstance(case["id"], str) and re.fullmatch(r"[a-z0-9][a-z0-9-]*", case["id"])
        assert isinstance(case["prompt"], str) and case["prompt"].strip(), case["id"]
        assert isinstance(case["system_prompt"], str) and case["system_prompt"].strip(), case["id"]
        assert isinstance(case["tags"], list) and all(isinstance(t, str) for t in case["tags"])
        expected = case["expected"]
        assert isinstance(expected, dict) and expected["keywords"], case["id"]
        assert all(isinstance(k, str) and k for k in expected["keywords"]), case["id"]


def test_every_case_has_a_recorded_response_from_each_of_the_three_models(
    suite: list[dict[str, Any]],
) -> None:
    for case in suite:
        assert set(case["responses"]) == MODELS, case["id"]
        for model, resp in case["responses"].items():
            where = f"{case['id']}/{model}"
            assert set(resp) == {"text", "latency_ms", "cost_usd", "usage"}, where
            assert isinstance(resp["text"], str) and resp["text"].strip(), where
            assert isinstance(resp["latency_ms"], float) and 50 < resp["latency_ms"] < 10_000, where
            usage = resp["usage"]
            assert set(usage) == {"prompt_tokens", "completion_tokens"}, where
            assert all(isinstance(v, int) and v > 0 for v in usage.values()), where


def test_recorded_costs_follow_from_usage_and_list_prices(suite: list[dict[str, Any]]) -> None:
    for case in suite:
        for model, resp in case["responses"].items():
            pin, pout = PRICES[model]
            usage = resp["usage"]
            cost = (usage["prompt_tokens"] * pin + usage["completion_tokens"] * pout) / 1_000_000
            assert resp["cost_usd"] == pytest.approx(cost, abs=1e-8), f"{case['id']}/{model}"


def test_candidates_are_cheaper_and_faster_than_the_baseline(suite: list[dict[str, Any]]) -> None:
    def avg(model: str, field: str) -> float:
        return float(mean(c["responses"][model][field] for c in suite))

    ratio = avg(GOOD_CANDIDATE, "cost_usd") / avg(BASELINE, "cost_usd")
    assert (
        1 / 25 < ratio < 1 / 10
    )  # the README's "about 1/17": test_the_counts_the_readme_quotes_for_the_suite
    assert avg(WEAK_CANDIDATE, "cost_usd") < avg(GOOD_CANDIDATE, "cost_usd")
    assert avg(WEAK_CANDIDATE, "latency_ms") < avg(GOOD_CANDIDATE, "latency_ms") < avg(BASELINE, "latency_ms")


# -- suite.jsonl: the quality story ----------------------------------------------------


def _keyword_recall(case: dict[str, Any], model: str) -> float:
    text = case["responses"][model]["text"].casefold()
    keywords = case["expected"]["keywords"]
    return sum(k.casefold() in text for k in keywords) / len(keywords)


def test_baseline_answers_contain_every_expected_keyword(suite: list[dict[str, Any]]) -> None:
    missing = [c["id"] for c in suite if _keyword_recall(c, BASELINE) < 1.0]
    assert missing == []


def test_good_candidate_is_close_and_weak_candidate_clearly_worse_on_keywords(
    suite: list[dict[str, Any]],
) -> None:
    for task in ("support", "summary"):
        cases = _by_task(suite, task)
        good = mean(_keyword_recall(c, GOOD_CANDIDATE) for c in cases)
        weak = mean(_keyword_recall(c, WEAK_CANDIDATE) for c in cases)
        assert good >= 0.9, (task, good)
        assert weak <= 0.6, (task, weak)


def test_some_good_candidate_answers_are_byte_identical_to_the_baseline(
    suite: list[dict[str, Any]],
) -> None:
    identical = [
        c for c in suite if c["responses"][GOOD_CANDIDATE]["text"] == c["responses"][BASELINE]["text"]
    ]
    assert len(identical) >= 8
    assert {c["task"] for c in identical} == TASKS
    assert not any(c["responses"][WEAK_CANDIDATE]["text"] == c["responses"][BASELINE]["text"] for c in suite)


def test_the_counts_the_readme_quotes_for_the_suite(suite: list[dict[str, Any]]) -> None:
    """examples/README.md: gpt-4o-mini's "17 answers byte-identical to the baseline (10 of them in
    extraction)", "about 1/17 of the baseline's cost and 0.6x its latency"."""
    identical = [
        c for c in suite if c["responses"][GOOD_CANDIDATE]["text"] == c["responses"][BASELINE]["text"]
    ]
    assert (len(identical), sum(c["task"] == "extraction" for c in identical)) == (17, 10)

    def avg(model: str, field: str) -> float:
        return float(mean(c["responses"][model][field] for c in suite))

    assert round(avg(BASELINE, "cost_usd") / avg(GOOD_CANDIDATE, "cost_usd")) == 17
    assert round(avg(GOOD_CANDIDATE, "latency_ms") / avg(BASELINE, "latency_ms"), 1) == 0.6
    counts = {task: len(_by_task(suite, task)) for task in TASKS}
    assert counts == {"support": 24, "extraction": 21, "summary": 21}  # the README's task table
    extraction = _by_task(suite, "extraction")
    kinds = [
        c["expected"]["schema"] if isinstance(c["expected"]["schema"], str) else "inline" for c in extraction
    ]
    # "from a support ticket (8), a supplier invoice (7) or a customer email (6)"
    assert {k: kinds.count(k) for k in kinds} == {
        "schemas/ticket.schema.json": 8,
        "schemas/invoice.schema.json": 7,
        "inline": 6,
    }


# -- extraction cases: JSON answers and schemas ------------------------------------------


def test_extraction_cases_name_an_answer_and_a_valid_schema(suite: list[dict[str, Any]]) -> None:
    for case in _by_task(suite, "extraction"):
        answer = case["expected"]["answer"]
        assert isinstance(answer, str), case["id"]
        schema = _schema_of(case)
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.Draft202012Validator(schema).validate(json.loads(answer))


def test_baseline_extraction_responses_parse_to_the_expected_answer(suite: list[dict[str, Any]]) -> None:
    fenced = 0
    for case in _by_task(suite, "extraction"):
        text = case["responses"][BASELINE]["text"]
        fenced += text.startswith("```")
        assert _parse_json_response(text) == json.loads(case["expected"]["answer"]), case["id"]
    assert 0 < fenced < len(_by_task(suite, "extraction"))  # both bare and fenced JSON occur


def test_good_candidate_extraction_responses_are_valid_against_their_schema(
    suite: list[dict[str, Any]],
) -> None:
    for case in _by_task(suite, "extraction"):
        data = _parse_json_response(case["responses"][GOOD_CANDIDATE]["text"])
        jsonschema.Draft202012Validator(_schema_of(case)).validate(data)


def test_weak_candidate_extraction_responses_include_invalid_json_and_schema_violations(
    suite: list[dict[str, Any]],
) -> None:
    unparsable: list[str] = []
    schema_invalid: list[str] = []
    valid: list[str] = []
    for case in _by_task(suite, "extraction"):
        try:
            data = _parse_json_response(case["responses"][WEAK_CANDIDATE]["text"])
        except ValueError:
            unparsable.append(case["id"])
            continue
        errors = list(jsonschema.Draft202012Validator(_schema_of(case)).iter_errors(data))
        (schema_invalid if errors else valid).append(case["id"])
    assert len(unparsable) >= 4, unparsable
    assert len(schema_invalid) >= 4, schema_invalid
    assert len(valid) >= 4, valid


@pytest.mark.parametrize("path", sorted((EXAMPLES / "schemas").glob("*.json")), ids=lambda p: p.name)
def test_schema_files_are_valid_draft_2020_12(path: Path) -> None:
    schema = json.loads(path.read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_every_schema_file_is_used_by_a_case(suite: list[dict[str, Any]]) -> None:
    used = {
        c["expected"]["schema"]
        for c in _by_task(suite, "extraction")
        if isinstance(c["expected"]["schema"], str)
    }
    files = {f"schemas/{p.name}" for p in (EXAMPLES / "schemas").glob("*.json")}
    assert used == files


# -- pairs.jsonl ------------------------------------------------------------------------


def test_pairs_file_uses_the_single_pair_shorthand() -> None:
    rows = _read_jsonl(PAIRS)
    assert 8 <= len(rows) <= 15
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        assert row["task"] == "faq"
        assert "responses" not in row
        assert isinstance(row["prompt"], str) and row["prompt"].strip()
        for field in ("baseline_response", "candidate_response"):
            assert isinstance(row[field], str) and row[field].strip(), (row["id"], field)
        text = row["baseline_response"].casefold()
        assert all(k.casefold() in text for k in row["expected"]["keywords"]), row["id"]


# -- persona and safety files -------------------------------------------------------------


def test_persona_file_has_examples_traits_and_lexicon() -> None:
    persona = yaml.safe_load((EXAMPLES / "persona-support.yaml").read_text(encoding="utf-8"))
    assert isinstance(persona["name"], str) and persona["name"]
    examples = persona["examples"]
    assert 5 <= len(examples) <= 8
    assert all(isinstance(e, str) and len(e.split()) >= 15 for e in examples)
    assert persona["traits"] == {"formality": "business_casual", "tone": "friendly", "verbosity": "balanced"}
    lexicon = persona["lexicon"]
    assert lexicon["preferred"] and lexicon["avoided"]
    assert all(isinstance(w, str) and w for w in lexicon["preferred"] + lexicon["avoided"])
    assert not {w.casefold() for w in lexicon["preferred"]} & {w.casefold() for w in lexicon["avoided"]}


def test_persona_examples_are_not_copied_from_the_suite(suite: list[dict[str, Any]]) -> None:
    persona = yaml.safe_load((EXAMPLES / "persona-support.yaml").read_text(encoding="utf-8"))
    answers = {r["text"] for c in suite for r in c["responses"].values()}
    assert not answers & set(persona["examples"])


def _safety_patterns() -> list[tuple[str, str, re.Pattern[str]]]:
    """(label, severity, regex) for every rule, compiled the way the file header documents."""
    data = yaml.safe_load((EXAMPLES / "safety-patterns.yaml").read_text(encoding="utf-8"))
    assert isinstance(data["name"], str) and data["name"]
    out = []
    for category, body in data["categories"].items():
        assert body["rules"], category
        for rule in body["rules"]:
            assert rule["severity"] in {"critical", "high", "medium", "low"}, category
            regexes = list(rule.get("patterns", []))
            regexes += [r"(?<!\w)" + re.escape(w) + r"(?!\w)" for w in rule.get("words", [])]
            assert regexes, (category, rule)
            for regex in regexes:
                compiled = re.compile(regex, re.IGNORECASE)
                assert not compiled.search(""), regex
                out.append((rule["label"], rule["severity"], compiled))
    return out


def test_safety_patterns_flag_only_the_weak_candidate(suite: list[dict[str, Any]]) -> None:
    patterns = _safety_patterns()
    hits: dict[str, set[str]] = {m: set() for m in MODELS}
    for case in suite:
        for model, resp in case["responses"].items():
            for label, _, pattern in patterns:
                if pattern.search(resp["text"]):
                    hits[model].add(f"{case['id']}:{label}")
    assert hits[BASELINE] == set()
    assert hits[GOOD_CANDIDATE] == set()
    assert "support-2fa-lost-phone:credential_request" in hits[WEAK_CANDIDATE]


# -- quickstart and README ------------------------------------------------------------------


def test_quickstart_compiles_and_reads_the_sdk_environment() -> None:
    source = (EXAMPLES / "quickstart.py").read_text(encoding="utf-8")
    compile(source, "quickstart.py", "exec")
    assert "OPENAI_BASE_URL" in source and "OPENAI_API_KEY" in source
    assert "PairedGrader" in source


def test_examples_readme_describes_every_file() -> None:
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for path in sorted(EXAMPLES.rglob("*")):
        if path.is_file() and path.name != "README.md":
            assert str(path.relative_to(EXAMPLES)) in readme, path
    assert "llm-connect grade examples/suite.jsonl" in readme


# -- tools.jsonl: conversations with tools ---------------------------------------------------
# Unlike the tests above, these also load the files with the package (suite loader, stability
# input loader, `llm-connect grade`), since that is what the tools suite is for.

TOOLS_SUITE = EXAMPLES / "tools.jsonl"
STABILITY_QUERY = EXAMPLES / "stability-query.json"


@pytest.fixture(scope="module")
def tools_suite() -> list[dict[str, Any]]:
    return _read_jsonl(TOOLS_SUITE)


def _tool_schemas(case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"]["parameters"] for t in case["tools"]}


def test_tools_suite_loads_with_the_suite_loader() -> None:
    from llm_connect.grading import load_suite

    loaded = load_suite(TOOLS_SUITE)
    assert 16 <= len(loaded) <= 24
    assert loaded.tasks == ["support-tools"]
    assert loaded.recorded_names() == MODELS
    for case in loaded:
        assert case.conversation is not None and case.conversation.tools, case.id


def test_tools_cases_are_conversations_with_tools_and_three_recorded_responses(
    tools_suite: list[dict[str, Any]],
) -> None:
    assert len({c["id"] for c in tools_suite}) == len(tools_suite)
    allowed = {"id", "task", "session", "messages", "tools", "tags", "responses"}
    for case in tools_suite:
        where = case["id"]
        assert set(case) <= allowed and case["task"] == "support-tools", where
        messages = case["messages"]
        assert messages[0]["role"] == "system" and "Quillstack" in messages[0]["content"], where
        assert any(m["role"] == "user" for m in messages), where
        assert messages[-1]["role"] in ("user", "tool"), where
        assert 4 <= len(case["tools"]) <= 6, where
        for tool in case["tools"]:
            assert tool["type"] == "function" and tool["function"]["description"], where
            jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])
        assert set(case["responses"]) == MODELS, where
        for model, resp in case["responses"].items():
            at = f"{where}/{model}"
            assert set(resp) - {"text", "tool_calls"} == {"model", "usage", "cost_usd", "latency_ms"}, at
            assert "text" in resp or "tool_calls" in resp, at
            assert "text" not in resp or (isinstance(resp["text"], str) and resp["text"].strip()), at
            assert "tool_calls" not in resp or resp["tool_calls"], at
            assert resp["model"] == model, at
            assert isinstance(resp["latency_ms"], float) and 50 < resp["latency_ms"] < 10_000, at
            usage = resp["usage"]
            assert set(usage) == {"prompt_tokens", "completion_tokens"}, at
            assert all(isinstance(v, int) and v > 0 for v in usage.values()), at


def test_tools_suite_mixes_tool_calls_plain_answers_earlier_tool_turns_and_sessions(
    tools_suite: list[dict[str, Any]],
) -> None:
    baseline_text_only = [c["id"] for c in tools_suite if "tool_calls" not in c["responses"][BASELINE]]
    assert 3 <= len(baseline_text_only) <= len(tools_suite) // 2, baseline_text_only
    with_tool_turns = [
        c["id"]
        for c in tools_suite
        if any(m.get("tool_calls") for m in c["messages"]) and any(m["role"] == "tool" for m in c["messages"])
    ]
    assert len(with_tool_turns) >= 5, with_tool_turns
    assert any(m["role"] == "assistant" and m.get("content") for c in tools_suite for m in c["messages"])
    assert any(len(c["responses"][BASELINE].get("tool_calls", [])) > 1 for c in tools_suite)
    from itertools import pairwise

    sessions: dict[str, list[dict[str, Any]]] = {}
    for case in tools_suite:
        if "session" in case:
            sessions.setdefault(case["session"], []).append(case)
    assert 2 <= len(sessions) <= 3 and all(len(turns) == 3 for turns in sessions.values()), sessions.keys()
    for turns in sessions.values():  # each turn continues the previous one's conversation
        for earlier, later in pairwise(turns):
            assert later["messages"][: len(earlier["messages"])] == earlier["messages"], later["id"]


def test_recorded_tool_calls_name_a_case_tool_and_the_baselines_arguments_validate(
    tools_suite: list[dict[str, Any]],
) -> None:
    invalid: dict[str, list[str]] = {m: [] for m in MODELS}
    for case in tools_suite:
        schemas = _tool_schemas(case)
        for model, resp in case["responses"].items():
            for call in resp.get("tool_calls", []):
                assert set(call) == {"name", "arguments"}, (case["id"], model)
                assert call["name"] in schemas, (case["id"], model, call["name"])
                validator = jsonschema.Draft202012Validator(schemas[call["name"]])
                if not validator.is_valid(call["arguments"]):
                    invalid[model].append(case["id"])
    assert invalid[BASELINE] == []
    assert invalid[GOOD_CANDIDATE] == []
    assert invalid[WEAK_CANDIDATE]  # e.g. an invoice id without its INV- prefix


def test_tools_suite_costs_follow_from_usage_and_list_prices(tools_suite: list[dict[str, Any]]) -> None:
    for case in tools_suite:
        for model, resp in case["responses"].items():
            pin, pout = PRICES[model]
            usage = resp["usage"]
            cost = (usage["prompt_tokens"] * pin + usage["completion_tokens"] * pout) / 1_000_000
            assert resp["cost_usd"] == pytest.approx(cost, abs=1e-8), f"{case['id']}/{model}"


def test_the_counts_the_readme_quotes_for_the_tools_suite(tools_suite: list[dict[str, Any]]) -> None:
    """examples/README.md: "Of the 23 cases, 17 are answered by calling tools (one of them two calls
    at once) and 6 are plain questions", "8 conversations already hold earlier assistant tool calls",
    "9 cases are the turns of three 3-turn sessions", gpt-4o-mini "makes the same calls on 20 of
    the 23 cases", llama-3.1-8b "agrees with the baseline on 4 cases"."""
    calls = [c for c in tools_suite if "tool_calls" in c["responses"][BASELINE]]
    assert (len(tools_suite), len(calls)) == (23, 17)
    assert sum(len(c["responses"][BASELINE]["tool_calls"]) == 2 for c in calls) == 1
    assert sum(any(m.get("tool_calls") for m in c["messages"]) for c in tools_suite) == 8
    sessions = [c["session"] for c in tools_suite if "session" in c]
    assert (len(sessions), len(set(sessions))) == (9, 3)

    def same(case: dict[str, Any], model: str) -> bool:
        """The same calls in any order, arguments equal as parsed JSON (96 == 96.0), as the tools judge
        counts a 1.0; both answering in text is a 1.0 too."""
        left = [(c["name"], c["arguments"]) for c in case["responses"][BASELINE].get("tool_calls", [])]
        right = [(c["name"], c["arguments"]) for c in case["responses"][model].get("tool_calls", [])]
        for call in left:
            if call not in right:
                return False
            right.remove(call)
        return not right

    assert sum(same(c, GOOD_CANDIDATE) for c in tools_suite) == 20
    assert sum(same(c, WEAK_CANDIDATE) for c in tools_suite) == 4


def test_stability_query_loads_with_the_suites_tools(tools_suite: list[dict[str, Any]]) -> None:
    from llm_connect.stability import load_query

    query = load_query(STABILITY_QUERY)
    conversation = query.conversation
    assert conversation.has_system
    assert conversation.messages[-1]["role"] == "user"
    assert any(m.get("tool_calls") for m in conversation.messages)
    assert conversation.tools == tools_suite[0]["tools"]
