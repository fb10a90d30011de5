"""Text rules: correctness, length, relevance and completeness scorers."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from llm_connect.errors import CaseDataError, ConfigurationError
from llm_connect.scoring._base import Score
from llm_connect.scoring.rules._common import (
    case_field,
    case_string_list,
    check_bool,
    check_string_list,
    compile_phrase,
    normalize_text,
    unfence,
)
from llm_connect.values import Case

__all__ = [
    "STOP_WORDS",
    "CompletenessScorer",
    "CorrectnessScorer",
    "LengthScorer",
    "RelevanceScorer",
    "content_words",
]

_STOP_WORD_TEXT = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each either
    else etc even ever every few for from further get gets got had has have having he her here
    hers herself him himself his how however i if in into is it its itself just let like may me
    might more most must my myself no nor not now of off often on once only or other our ours
    ourselves out over own per please quite rather really same say says shall she should since so
    some such than that the their theirs them themselves then there these they this those though
    through thus to too under until up upon us use used using very via was we were what whatever
    when where whether which while who whom whose why will with within without would yet you
    your yours yourself yourselves
    briefly describe detail details explain give list provide show summarise summarize tell write
    answer question one two many much
"""
#: English function words and instruction verbs dropped from prompts by the relevance scorer.
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORD_TEXT.split())

_WORD = re.compile(r"[^\W_]+")
_WHITESPACE = re.compile(r"\s+")


def _fold_plural(token: str) -> str:
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def content_words(text: str) -> list[str]:
    """The content words of ``text``, in first-seen order, without duplicates.

    Tokens are runs of letters and digits after case folding (apostrophes and
    hyphens split words); stop words (:data:`STOP_WORDS`) and one-letter tokens
    other than digits are dropped; a trailing plural ``s`` (not ``ss``) is
    removed from words longer than three characters, so ``models`` matches
    ``model``.
    """
    seen: dict[str, None] = {}
    for raw in _WORD.findall(text.casefold()):
        if raw in STOP_WORDS or (len(raw) == 1 and not raw.isdigit()):
            continue
        seen.setdefault(_fold_plural(raw), None)
    return list(seen)


def _as_answer(judge: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigurationError(f"judge {judge!r}: option 'answer' must be a string, not {value!r}")
    return str(value)


def _json_container(text: str) -> dict[str, Any] | list[Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, (dict, list)) else None


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``true != 1``; objects ignore key order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _compare_json(text: str, want: dict[str, Any] | list[Any]) -> Score:
    body, lang = unfence(text)
    details: dict[str, Any] = {"mode": "answer", "match_rule": "json", "fenced": lang is not None}
    try:
        got = json.loads(body)
    except ValueError as exc:
        return Score(0.0, {**details, "match": False, "parse_error": str(exc)})
    matched = _json_equal(got, want)
    details["match"] = matched
    if not matched and isinstance(got, dict) and isinstance(want, dict):
        missing = object()
        keys = sorted(set(got) | set(want), key=str)
        details["differing_keys"] = [
            k
            for k in keys
            if got.get(k, missing) is missing
            or want.get(k, missing) is missing
            or not _json_equal(got[k], want[k])
        ]
    return Score(1.0 if matched else 0.0, details)


class CorrectnessScorer:
    """Ground-truth match (1.0/0.0) or the fraction of expected keywords found.

    Data, first found wins: the ``answer`` option, the ``keywords`` option, the
    case's ``expected`` string or ``expected.answer``, then
    ``expected.keywords``. ``mode="answer"``/``"keywords"`` restricts the case
    lookup to one of them.

    * answer: with ``normalize`` (default on) both texts are NFKC-normalised,
      case-folded, stripped of punctuation and whitespace-collapsed;
      ``match="exact"`` (default) needs equality, ``match="contains"`` needs the
      answer to occur in the response as whole words. An answer that is a JSON
      object or array is compared as JSON instead (``match="exact"`` only): the
      response (unwrapped from one code fence) must parse to an equal value,
      key order and number spelling aside; ``differing_keys`` lists the
      top-level keys that differ.
    * keywords: each keyword is searched case-insensitively, word-boundary
      aware (``cat`` is not found in ``concatenate``); score = found / total.
    """

    def __init__(
        self,
        *,
        answer: str | None = None,
        keywords: list[str] | tuple[str, ...] | str | None = None,
        normalize: bool = True,
        match: str = "exact",
        mode: str | None = None,
    ) -> None:
        if answer is not None and keywords is not None:
            raise ConfigurationError("judge 'correctness': give 'answer' or 'keywords', not both")
        if match not in ("exact", "contains"):
            raise ConfigurationError(
                f"judge 'correctness': option 'match' must be exact or contains, not {match!r}"
            )
        if mode not in (None, "answer", "keywords"):
            raise ConfigurationError(
                f"judge 'correctness': option 'mode' must be answer or keywords, not {mode!r}"
            )
        self.answer = None if answer is None else _as_answer("correctness", answer)
        self.keywords = None if keywords is None else check_string_list("correctness", "keywords", keywords)
        self.normalize = check_bool("correctness", "normalize", normalize)
        self.match = match
        self.mode = mode
        args: dict[str, Any] = {}
        if self.answer is not None:
            args["answer"] = self.answer
        if self.keywords is not None:
            args["keywords"] = list(self.keywords)
        if not self.normalize:
            args["normalize"] = False
        if match != "exact":
            args["match"] = match
        if mode is not None:
            args["mode"] = mode
        self.name = "correctness"
        self.spec: Mapping[str, Any] = {"name": "correctness", "args": args}

    def __repr__(self) -> str:
        return f"CorrectnessScorer({self.spec['args']!r})"

    def _data(self, case: Case | None) -> tuple[str, str | tuple[str, ...]]:
        if self.answer is not None:
            return "answer", self.answer
        if self.keywords is not None:
            return "keywords", self.keywords
        if self.mode != "keywords":
            answer = case_field(case, "answer")
            if answer is not None:
                if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
                    raise CaseDataError(
                        f"must be a string, not {answer!r}",
                        case_id=case.id if case else None,
                        field="expected.answer",
                    )
                return "answer", str(answer)
        if self.mode != "answer":
            keywords = case_string_list(case, "keywords")
            if keywords:
                return "keywords", keywords
        field = {"answer": "expected.answer", "keywords": "expected.keywords"}.get(
            self.mode or "", "expected.answer"
        )
        wanted = field if self.mode else "expected (a string), expected.answer or expected.keywords"
        raise CaseDataError(
            f"no ground truth: give the judge option 'answer' or 'keywords', or the case field {wanted}",
            case_id=case.id if case else None,
            field=field,
        )

    def score(self, text: str, *, prompt: str, case: Case | None = None) -> Score:
        """Score ``text``; details hold the mode and the match, or found/missing keywords."""
        mode, data = self._data(case)
        if mode == "keywords":
            assert isinstance(data, tuple)
            found = [k for k in data if compile_phrase(k).search(text)]
            missing = [k for k in data if k not in found]
            return Score(len(found) / len(data), {"mode": "keywords", "found": found, "missing": missing})
        assert isinstance(data, str)
        structured = _json_container(data) if self.match == "exact" else None
        if structured is not None:
            return _compare_json(text, structured)
        got, want = (normalize_text(text), normalize_text(data)) if self.normalize else (text, data)
        if self.match == "contains":
            matched = bool(want) and compile_phrase(want).search(got) is not None
        else:
            matched = got == want
        details = {"mode": "answer", "match": matched, "normalize": self.normalize, "match_rule": self.match}
        return Score(1.0 if matched else 0.0, details)


def _check_count(option: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"judge 'length': option {option!r} must be an integer >= 0, not {value!r}")
    return value


class LengthScorer:
    """1.0 when the response is within every given bound, else 0.0 (no partial credit).

    Characters are counted after stripping leading and trailing whitespace;
    words are whitespace-separated runs. Bounds are inclusive. At least one of
    ``min_chars``, ``max_chars``, ``min_words``, ``max_words`` is required.
    """

    def __init__(
        self,
        *,
        min_chars: int | None = None,
        max_chars: int | None = None,
        min_words: int | None = None,
        max_words: int | None = None,
    ) -> None:
        self.bounds = {
            "min_chars": _check_count("min_chars", min_chars),
            "max_chars": _check_count("max_chars", max_chars),
            "min_words": _check_count("min_words", min_words),
            "max_words": _check_count("max_words", max_words),
        }
        if all(v is None for v in self.bounds.values()):
            raise ConfigurationError(
                "judge 'length' needs at least one of min_chars, max_chars, min_words, max_words"
            )
        for unit in ("chars", "words"):
            low, high = self.bounds[f"min_{unit}"], self.bounds[f"max_{unit}"]
            if low is not None and high is not None and low > high:
                raise ConfigurationError(f"judge 'length': min_{unit} ({low}) > max_{unit} ({high})")
        self.name = "length"
        self.spec: Mapping[str, Any] = {
            "name": "length",
            "args": {k: v for k, v in self.bounds.items() if v is not None},
        }

    def __repr__(self) -> str:
        return f"LengthScorer({self.spec['args']!r})"

    def score(self, text: str, *, prompt: str, case: Case | None = None) -> Score:
        """Score ``text``; details hold the counts, the bounds and which bounds failed."""
        counts = {"chars": len(text.strip()), "words": len(text.split())}
        failed = []
        for key, bound in self.bounds.items():
            if bound is None:
                continue
            kind, unit = key.split("_")
            value = counts[unit]
            if (kind == "min" and value < bound) or (kind == "max" and value > bound):
                failed.append(key)
        details = {**counts, "bounds": self.spec["args"], "failed": failed}
        return Score(0.0 if failed else 1.0, details)


class RelevanceScorer:
    """Fraction of the prompt's content words present in the response.

    Both texts go through :func:`content_words`; score = prompt content words
    found in the response / prompt content words. A prompt with no content
    words (empty, or only stop words) scores 0.0 for every response.
    """

    _MAX_LISTED = 50

    def __init__(self) -> None:
        self.name = "relevance"
        self.spec: Mapping[str, Any] = {"name": "relevance", "args": {}}

    def __repr__(self) -> str:
        return "RelevanceScorer()"

    def score(self, text: str, *, prompt: str, case: Case | None = None) -> Score:
        """Score ``text``; details hold the counts and (up to 50 each) found/missing words."""
        wanted = content_words(prompt)
        if not wanted:
            return Score(0.0, {"prompt_words": 0, "found": [], "missing": [], "reason": "no content words"})
        have = set(content_words(text))
        found = [w for w in wanted if w in have]
        missing = [w for w in wanted if w not in have]
        details = {
            "prompt_words": len(wanted),
            "overlap": len(found),
            "found": found[: self._MAX_LISTED],
            "missing": missing[: self._MAX_LISTED],
        }
        return Score(len(found) / len(wanted), details)


def _heading_pattern(section: str) -> re.Pattern[str]:
    inner = compile_phrase(section).pattern
    # A Markdown heading, a bold/underlined line or a "Label:" line carrying the section.
    return re.compile(
        rf"^[ \t]{{0,3}}(?:#{{1,6}}[ \t]+.*?{inner}|(?:\*\*|__)[ \t]*{inner}.*?(?:\*\*|__)|{inner}[ \t]*:)",
        re.IGNORECASE | re.MULTILINE,
    )


class CompletenessScorer:
    """Fraction of the required sections the response covers.

    Sections come from the ``sections`` option or the case's
    ``expected.sections``. A section counts as found when a Markdown heading,
    a bold line or a ``Section:`` line names it, or (unless
    ``headings_only=True``) when it appears anywhere in the text; matching is
    case-insensitive and word-boundary aware.
    """

    def __init__(
        self, *, sections: list[str] | tuple[str, ...] | str | None = None, headings_only: bool = False
    ) -> None:
        self.sections = None if sections is None else check_string_list("completeness", "sections", sections)
        self.headings_only = check_bool("completeness", "headings_only", headings_only)
        args: dict[str, Any] = {}
        if self.sections is not None:
            args["sections"] = list(self.sections)
        if self.headings_only:
            args["headings_only"] = True
        self.name = "completeness"
        self.spec: Mapping[str, Any] = {"name": "completeness", "args": args}

    def __repr__(self) -> str:
        return f"CompletenessScorer({self.spec['args']!r})"

    def score(self, text: str, *, prompt: str, case: Case | None = None) -> Score:
        """Score ``text``; details hold found/missing sections and where each was found."""
        sections = self.sections or case_string_list(case, "sections")
        if not sections:
            raise CaseDataError(
                "no required sections: give the judge option 'sections' or the case field expected.sections",
                case_id=case.id if case else None,
                field="expected.sections",
            )
        where: dict[str, str] = {}
        for section in sections:
            if _heading_pattern(section).search(text):
                where[section] = "heading"
            elif not self.headings_only and compile_phrase(section).search(text):
                where[section] = "text"
        missing = [s for s in sections if s not in where]
        details = {"found": list(where), "missing": missing, "found_as": where}
        return Score(len(where) / len(sections), details)
