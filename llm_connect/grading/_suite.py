"""Suite files: the cases a batch grading run works through.

A suite is JSONL (one JSON object per line) or YAML (a list of cases, or a
mapping with ``cases:`` plus an optional default ``task:`` and free-form
``metadata:``). A case holds:

* ``id`` (required, unique; a string or an integer) and either ``prompt`` (a
  non-empty string) or ``messages`` (a conversation in the OpenAI chat format:
  ``system``/``developer``/``user``/``assistant``/``tool`` roles, assistant
  ``tool_calls``; it ends with a user or tool message);
* optional ``tools`` (OpenAI function tools) and ``tool_choice`` (``auto``,
  ``none``, ``required`` or ``{"type": "function", "function": {"name": ...}}``),
  with ``messages`` or with ``prompt`` (then the prompt is the one user message);
* optional ``session`` (a string): the case is a turn of that multi-turn
  session (turns in file order);
* optional ``task``, ``system_prompt``, ``expected`` (a string or number, or a
  mapping such as ``{"answer": ..., "keywords": [...], "schema": {...},
  "sections": [...]}``), ``tags`` (list of strings), ``metadata`` (a JSON
  object: string keys, JSON values, no NaN or infinity; kept on the case as
  :attr:`Case.metadata` and stored with each of its grades);
* relative paths in ``expected`` (the string values of ``expected.schema`` and
  ``expected.persona``, see :data:`EXPECTED_PATH_KEYS`) are relative to the
  suite file's folder: the loader makes them absolute, so a suite grades the
  same from any working directory (judge options given on the command line
  stay relative to the working directory);
* optional recorded responses: ``responses: {NAME: TEXT | OBJECT}`` picked with
  ``recorded:NAME`` adapter specs, or the shorthand ``baseline_response`` /
  ``candidate``). An OBJECT is ``{"text": ..., "latency_ms": ..., "cost_usd":
  ..., "usage": {"prompt_tokens": .., "completion_tokens": ..}, "model": ...,
  "requested_model": ..., "finish_reason": ..., "tool_calls": [...]}``; ``model``
  (the model that answered, as the server reported it) defaults to NAME, and
  ``requested_model`` (the name that was asked for, e.g. ``gpt-4o-mini`` when the
  server answered as ``gpt-4o-mini-2024-07-18``) to ``model``: grades are stored
  under the requested name, as for live calls;
  ``tool_calls`` items are ``{"name", "arguments"}`` or the OpenAI form, and
  ``text`` may then be omitted (an answer that only calls tools).

Everything is validated when the file is loaded, before any model is called:
a malformed line, a missing prompt, a duplicate id, invalid UTF-8, a field of
the wrong type or an unknown field raises :class:`~llm_connect.errors.SuiteError`
naming the file, the line and the field. An unknown field is refused, never kept
(free-form data goes under ``metadata``), so a typo cannot silently drop a
prompt or an expected answer; the message suggests the closest known field
(``promt``: did you mean ``prompt``?) or the field another tool's name means
(``input``: ``prompt``, ``target``: ``expected``).

JSONL lines end at ``\\n`` only (``\\r\\n`` works too): characters other text
tools treat as line breaks (U+2028, U+2029, U+0085, form feed, vertical tab)
are ordinary characters inside a JSON string. Control characters other than
the newline are accepted raw inside strings (a pasted tab or form feed), as
Python's ``json`` does with ``strict=False``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from llm_connect._hints import closest
from llm_connect.errors import ConfigurationError, SuiteError
from llm_connect.grading._protocols import Case
from llm_connect.types import Conversation, ConversationError, LLMResponse, ToolCall, Usage

__all__ = [
    "CASE_FIELDS",
    "DEFAULT_TASK",
    "EXPECTED_PATH_KEYS",
    "SHORTHAND_NAMES",
    "Suite",
    "load_suite",
    "suite_of",
]

DEFAULT_TASK = "default"
"""The task of cases that name none, when neither the file nor the caller gives one."""

CASE_FIELDS = frozenset(
    {
        "id",
        "prompt",
        "task",
        "system_prompt",
        "expected",
        "tags",
        "responses",
        "baseline_response",
        "candidate_response",
        "metadata",
        "messages",
        "tools",
        "tool_choice",
        "session",
    }
)
"""The fields a case may hold; any other field is an error (typos must not pass)."""

EXPECTED_PATH_KEYS = ("persona", "schema")
"""Keys of ``expected`` whose string values are file paths, relative to the suite's folder.

``schema`` (a JSON Schema file; a mapping is an inline schema and stays as is)
and ``persona`` (a persona YAML file) are the path-valued keys the scorers in
:mod:`llm_connect.scoring` read; the loader makes relative ones absolute.
"""

SHORTHAND_NAMES = {"baseline_response": "baseline", "candidate_response": "candidate"}
"""Shorthand fields and the recorded-response names they fill."""

_RESPONSE_FIELDS = frozenset(
    {"text", "latency_ms", "cost_usd", "usage", "model", "requested_model", "finish_reason", "tool_calls"}
)
_SUITE_FIELDS = frozenset({"cases", "task", "metadata"})

_CASE_FIELD_ALIASES = {
    "input": "prompt",
    "question": "prompt",
    "target": "expected",
    "answer": "expected",
    "ideal": "expected",
    "expected_output": "expected",
    "reference": "expected",
    "system": "system_prompt",
    "tag": "tags",
}
"""Names other evaluation tools give a case's fields (Inspect's ``input``/``target``, OpenAI
evals' ``ideal``, ...), suggested as the field they mean here (before a merely close name:
``target`` means ``expected``, not ``tags``)."""


def _did_you_mean(name: str, known: frozenset[str], aliases: Mapping[str, str] | None = None) -> str:
    """``"; did you mean 'prompt'?"`` for another tool's name of a field or a near-miss, else ``""``."""
    guess = (aliases or {}).get(name.strip().lower()) or closest(name, known)
    return f"; did you mean {guess!r}?" if guess else ""


@dataclass(frozen=True)
class Suite:
    """The validated cases of one suite file.

    ``recordings[case_id][name]`` holds the recorded responses of each case as
    :class:`~llm_connect.types.LLMResponse` objects (provider ``recorded``);
    ``Case.responses`` holds the same texts for judges.
    """

    path: str
    """Where the suite came from (``<prompt>`` for a single prompt)."""
    cases: list[Case]
    """The cases, in file order."""
    recordings: Mapping[str, Mapping[str, LLMResponse]] = field(default_factory=dict)
    """Recorded responses: case id -> name -> response."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The file's free-form ``metadata`` (YAML mapping form only)."""

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    @property
    def tasks(self) -> list[str]:
        """The distinct tasks, in order of first appearance."""
        return list(dict.fromkeys(c.task for c in self.cases))

    def recorded_names(self) -> set[str]:
        """Every recorded-response name some case holds."""
        return {name for per_case in self.recordings.values() for name in per_case}

    def recorded(self, case: Case | str, name: str) -> LLMResponse:
        """The response recorded under ``name`` for ``case``.

        Raises :class:`~llm_connect.errors.SuiteError` naming the case's line
        when the case has none.
        """
        case_id = case if isinstance(case, str) else case.id
        found = self.recordings.get(case_id, {}).get(name)
        if found is None:
            line = None if isinstance(case, str) else case.line
            raise SuiteError(
                f"case {case_id!r} has no recorded response {name!r}",
                path=self.path,
                line=line,
                field="responses",
            )
        return found

    def check_recorded(self, name: str) -> None:
        """Raise :class:`SuiteError` for the first case missing recorded response ``name``."""
        for case in self.cases:
            self.recorded(case, name)

    @classmethod
    def single(
        cls,
        prompt: str,
        *,
        task: str | None = None,
        system_prompt: str | None = None,
        case_id: str = "prompt",
    ) -> Suite:
        """A one-case suite for ``llm-connect grade --prompt``."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise SuiteError("the prompt is empty", path="<prompt>", field="prompt")
        case = Case(id=case_id, prompt=prompt, task=task or DEFAULT_TASK, system_prompt=system_prompt)
        return cls(path="<prompt>", cases=[case], recordings={case_id: {}})


def load_suite(path: str | Path, *, default_task: str | None = None) -> Suite:
    """Load and validate a JSONL or YAML suite file.

    ``default_task`` is the task of cases that name none (after the YAML
    file's own ``task:``). The format follows the suffix (``.yaml``/``.yml``
    is YAML, anything else is JSONL unless the text starts with ``[``).
    Raises :class:`~llm_connect.errors.SuiteError` for every problem.
    """
    p = Path(path)
    name = str(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise SuiteError("no such file", path=name) from None
    except IsADirectoryError:
        raise SuiteError("is a directory, not a suite file", path=name) from None
    except OSError as exc:
        raise SuiteError(f"cannot read: {exc.strerror or exc}", path=name) from None
    if p.suffix.lower() in (".yaml", ".yml") or raw.lstrip()[:1] == b"[":
        items, file_task, metadata = _read_yaml(raw, name)
    else:
        items, file_task, metadata = _read_jsonl(raw, name), None, {}
    task = file_task or default_task or DEFAULT_TASK
    base_dir = p.absolute().parent
    cases: list[Case] = []
    recordings: dict[str, dict[str, LLMResponse]] = {}
    seen: dict[str, int | None] = {}
    for line, obj in items:
        case, recorded = _build_case(obj, path=name, line=line, default_task=task, base_dir=base_dir)
        if case.id in seen:
            where = f" (first on line {seen[case.id]})" if seen[case.id] is not None else ""
            raise SuiteError(f"duplicate id {case.id!r}{where}", path=name, line=line, field="id")
        seen[case.id] = line
        cases.append(case)
        recordings[case.id] = recorded
    if not cases:
        raise SuiteError("the suite holds no cases", path=name)
    return Suite(path=name, cases=cases, recordings=recordings, metadata=metadata)


def suite_of(objects: Sequence[Mapping[str, Any]], *, path: str, default_task: str = DEFAULT_TASK) -> Suite:
    """A suite of case objects held in memory (what ``suite import`` writes, one per line), each
    validated as :func:`load_suite` validates a line (``SuiteError`` naming its item); an empty
    suite is allowed. ``llm-connect watch`` grades each batch of new calls as one."""
    cases: list[Case] = []
    recordings: dict[str, dict[str, LLMResponse]] = {}
    for line, obj in enumerate(objects, 1):
        case, recorded = _build_case(dict(obj), path=path, line=line, default_task=default_task)
        if case.id in recordings:
            raise SuiteError(f"duplicate id {case.id!r}", path=path, line=line, field="id")
        cases.append(case)
        recordings[case.id] = recorded
    return Suite(path=path, cases=cases, recordings=recordings)


# -- readers -------------------------------------------------------------------


def _decode(raw: bytes, path: str) -> str:
    try:
        return raw.decode("utf-8-sig" if raw.startswith(b"\xef\xbb\xbf") else "utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise SuiteError(
            f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})", path=path, line=line
        ) from None


def _read_jsonl(raw: bytes, path: str) -> list[tuple[int, Any]]:
    text = _decode(raw, path)
    items: list[tuple[int, Any]] = []
    # "\n" only: str.splitlines() would also break at U+2028, U+2029, U+0085, \x0c...
    # which JSON allows inside strings (and the line numbers would drift).
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line.strip():
            continue
        try:
            obj = json.loads(line, strict=False)
        except ValueError as exc:
            raise SuiteError(f"not valid JSON ({exc})", path=path, line=lineno) from None
        items.append((lineno, obj))
    return items


def _read_yaml(raw: bytes, path: str) -> tuple[list[tuple[int, Any]], str | None, dict[str, Any]]:
    import yaml

    text = _decode(raw, path)
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = None if mark is None else mark.line + 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise SuiteError(f"not valid YAML ({problem})", path=path, line=line) from None
    file_task: str | None = None
    metadata: dict[str, Any] = {}
    seq_node = node
    if isinstance(data, dict):
        unknown = sorted(str(k) for k in data if k not in _SUITE_FIELDS)
        if unknown:
            raise SuiteError(
                f"unknown top-level field{_did_you_mean(unknown[0], _SUITE_FIELDS)} "
                "(expected cases, task, metadata)",
                path=path,
                line=1,
                field=unknown[0],
            )
        if "task" in data:
            if not isinstance(data["task"], str) or not data["task"].strip():
                raise SuiteError("must be a non-empty string", path=path, field="task")
            file_task = data["task"]
        if "metadata" in data:
            if not isinstance(data["metadata"], dict):
                raise SuiteError("must be a mapping", path=path, field="metadata")
            metadata = data["metadata"]
        assert node is not None  # a mapping was constructed from it
        seq_node = next((v for k, v in node.value if k.value == "cases"), None)
        data = data.get("cases")
        if not isinstance(data, list):
            raise SuiteError("must be a list of cases", path=path, field="cases")
    elif not isinstance(data, list):
        raise SuiteError("a YAML suite is a list of cases or a mapping with 'cases'", path=path)
    assert seq_node is not None  # the node of the list of cases checked above
    marks = [item.start_mark.line + 1 for item in seq_node.value]
    return list(zip(marks, data, strict=True)), file_task, metadata


# -- validation ------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _build_case(
    obj: Any, *, path: str, line: int, default_task: str, base_dir: Path | None = None
) -> tuple[Case, dict[str, LLMResponse]]:
    def fail(message: str, fld: str | None = None) -> SuiteError:
        return SuiteError(message, path=path, line=line, field=fld)

    if not isinstance(obj, dict):
        raise fail(f"a case must be an object, not {type(obj).__name__}")
    unknown = [k for k in obj if k not in CASE_FIELDS]
    if unknown:
        hint = _did_you_mean(str(unknown[0]), CASE_FIELDS, _CASE_FIELD_ALIASES)
        raise fail(f"unknown field{hint} (free-form data goes under 'metadata')", str(unknown[0]))

    case_id = obj.get("id")
    if case_id is None:
        raise fail("is required", "id")
    if isinstance(case_id, bool) or not isinstance(case_id, (str, int)):
        raise fail(f"must be a string or an integer, not {type(case_id).__name__}", "id")
    case_id = str(case_id)
    if not case_id.strip():
        raise fail("must not be empty", "id")

    prompt, conversation = _request(obj, fail)

    task = obj.get("task", default_task)
    if not isinstance(task, str) or not task.strip():
        raise fail("must be a non-empty string", "task")

    system_prompt = obj.get("system_prompt")
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise fail(f"must be a string, not {type(system_prompt).__name__}", "system_prompt")

    expected = obj.get("expected")
    if expected is not None and not (isinstance(expected, (str, dict)) or _is_number(expected)):
        raise fail(f"must be a string or a mapping, not {type(expected).__name__}", "expected")
    if isinstance(expected, dict) and base_dir is not None:
        expected = _absolute_paths(expected, base_dir)

    tags = obj.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise fail("must be a list of strings", "tags")

    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        raise fail(f"must be a JSON object (a mapping), not {type(metadata).__name__}", "metadata")
    problem = _json_problem(metadata, "metadata")
    if problem is not None:
        raise fail(problem, "metadata")

    recorded: dict[str, LLMResponse] = {}
    responses = obj.get("responses", {})
    if not isinstance(responses, dict):
        raise fail(f"must be a mapping of NAME -> response, not {type(responses).__name__}", "responses")
    for rname, value in responses.items():
        if not isinstance(rname, str) or not rname.strip():
            raise fail(f"response names must be non-empty strings, not {rname!r}", "responses")
        recorded[rname] = _response(value, rname, fail, f"responses.{rname}")
    for short, rname in SHORTHAND_NAMES.items():
        if short in obj:
            if rname in recorded:
                raise fail(f"gives response {rname!r} twice (also under 'responses')", short)
            recorded[rname] = _response(obj[short], rname, fail, short)

    session = obj.get("session")
    if session is not None and (not isinstance(session, str) or not session.strip()):
        raise fail("must be a non-empty string", "session")

    case = Case(
        id=case_id,
        prompt=prompt,
        conversation=conversation,
        session=session,
        task=task,
        system_prompt=system_prompt,
        expected=expected,
        tags=tuple(tags),
        responses={name: r.text for name, r in recorded.items()},
        line=line,
        metadata=metadata,
    )
    return case, recorded


def _request(obj: Mapping[str, Any], fail: Any) -> tuple[str, Conversation | None]:
    """The case's prompt text and conversation (``None`` for a plain prompt)."""
    prompt, messages = obj.get("prompt"), obj.get("messages")
    messages = cast(Any, messages)  # validated by Conversation
    if prompt is not None and messages is not None:
        raise fail("give either 'prompt' or 'messages', not both", "messages")
    if prompt is None and messages is None:
        raise fail("is required (or give 'messages')", "prompt")
    if prompt is not None:
        if not isinstance(prompt, str):
            raise fail(f"must be a string, not {type(prompt).__name__}", "prompt")
        if not prompt.strip():
            raise fail("must not be empty", "prompt")
        if obj.get("tools") is None and obj.get("tool_choice") is None:
            return prompt, None
        messages = [{"role": "user", "content": prompt}]
    try:
        conversation = Conversation(messages, tools=obj.get("tools"), tool_choice=obj.get("tool_choice"))
    except ConversationError as exc:
        field = exc.field
        if prompt is not None and field.startswith("messages"):
            field = "prompt"
        raise fail(exc.reason, field) from None
    return (prompt if prompt is not None else conversation.render()), conversation


def _json_problem(value: Any, where: str) -> str | None:
    """Why ``value`` is not a JSON value (naming the place, e.g. ``metadata.run[2]``), else ``None``."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value!r}: NaN and infinities are not JSON"
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has a key {key!r} that is not a string"
            problem = _json_problem(item, f"{where}.{key}")
            if problem is not None:
                return problem
        return None
    if isinstance(value, list):
        for i, item in enumerate(value):
            problem = _json_problem(item, f"{where}[{i}]")
            if problem is not None:
                return problem
        return None
    return f"{where} is a {type(value).__name__}, not a JSON value (in YAML, quote it)"


def _absolute_paths(expected: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """``expected`` with its relative path values (:data:`EXPECTED_PATH_KEYS`) made absolute."""
    out = dict(expected)
    for key in EXPECTED_PATH_KEYS:
        value = out.get(key)
        if isinstance(value, str) and value.strip() and not Path(value).is_absolute():
            out[key] = str(base_dir / value)
    return out


def _response(value: Any, name: str, fail: Any, fld: str) -> LLMResponse:
    if isinstance(value, str):
        return LLMResponse(text=value, model=name, provider="recorded")
    if not isinstance(value, dict):
        raise fail(f"must be a string or an object with 'text', not {type(value).__name__}", fld)
    unknown = [k for k in value if k not in _RESPONSE_FIELDS]
    if unknown:
        hint = _did_you_mean(str(unknown[0]), _RESPONSE_FIELDS)
        raise fail(f"unknown field {unknown[0]!r} in a recorded response{hint}", fld)
    calls: list[ToolCall] = []
    raw_calls = value.get("tool_calls")
    if raw_calls is not None:
        if not isinstance(raw_calls, list):
            raise fail("'tool_calls' must be a list of tool calls", fld)
        for i, raw in enumerate(raw_calls):
            try:
                calls.append(ToolCall.from_dict(raw))
            except ConfigurationError as exc:
                raise fail(f"tool_calls[{i}]: {exc}", fld) from None
    text = value.get("text", "" if calls else None)
    if not isinstance(text, str):
        raise fail("'text' is required (or 'tool_calls') and must be a string", fld)
    for num in ("latency_ms", "cost_usd"):
        v = value.get(num)
        if v is not None and (not _is_number(v) or v < 0):
            raise fail(f"{num!r} must be a number >= 0", fld)
    model = value.get("model", name)
    if not isinstance(model, str) or not model.strip():
        raise fail("'model' must be a non-empty string", fld)
    requested = value.get("requested_model")
    if requested is not None and (not isinstance(requested, str) or not requested.strip()):
        raise fail("'requested_model' must be a non-empty string", fld)
    finish = value.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise fail("'finish_reason' must be a string", fld)
    usage_obj = value.get("usage")
    usage: Usage | None = None
    if usage_obj is not None:
        allowed = {"prompt_tokens", "completion_tokens", "total_tokens"}
        if not isinstance(usage_obj, dict) or set(usage_obj) - allowed:
            raise fail("'usage' must be {prompt_tokens, completion_tokens}", fld)
        counts = [usage_obj.get("prompt_tokens", 0), usage_obj.get("completion_tokens", 0)]
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
            raise fail("'usage' token counts must be integers >= 0", fld)
        usage = Usage(counts[0], counts[1])
    return LLMResponse(
        text=text,
        model=model,
        provider="recorded",
        latency_ms=None if value.get("latency_ms") is None else float(value["latency_ms"]),
        usage=usage,
        cost_usd=None if value.get("cost_usd") is None else float(value["cost_usd"]),
        finish_reason=finish,
        tool_calls=tuple(calls),
        requested_model=requested,
    )
