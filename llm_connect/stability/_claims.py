"""Risky-claim detection: pattern-based, per run, in four categories.

* ``guarantees`` — absolute promises (guarantee, 100% safe, risk-free, never fails);
* ``false_authority`` — claimed endorsements, access or research the model cannot have
  (certified by, according to our study, I have verified, legally binding);
* ``specific_claims`` — specific numbers and dates a model may make up (percentages,
  amounts of money, calendar dates, large counts with a unit);
* ``overconfidence`` — certainty markers (definitely, without a doubt, I am 100% sure).

The share of runs holding any claim decides the claim variance: NONE at zero, LOW
below ``claim_low_share`` or above ``claim_high_share`` (the model consistently does or
does not make claims), HIGH in between (it makes them unpredictably).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from llm_connect.stability._config import StabilityConfig
from llm_connect.stability._report import ClaimSummary, ClaimVariance

__all__ = ["CLAIM_CATEGORIES", "claim_counts", "summarize_claims"]

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)

_PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {
    "guarantees": (
        re.compile(r"\bguarantee(?:s|d)?\b", re.IGNORECASE),
        re.compile(
            r"\b100\s?%\s+(?:safe|secure|effective|accurate|reliable|certain|sure|guaranteed)\b", re.I
        ),
        re.compile(r"\brisk[- ]free\b", re.IGNORECASE),
        re.compile(r"\b(?:never|cannot|can't|won't) (?:fail|fails|break|breaks|go wrong)\b", re.IGNORECASE),
        re.compile(r"\b(?:always works|works every time|I promise|we promise)\b", re.IGNORECASE),
    ),
    "false_authority": (
        re.compile(
            r"\b(?:certified|approved|endorsed|licensed|verified|recommended) by (?!you\b|your\b)", re.I
        ),
        re.compile(
            r"\baccording to (?:our|my) (?:own )?(?:study|studies|research|data|records|analysis)\b", re.I
        ),
        re.compile(r"\bI (?:have|'ve) (?:checked|verified|confirmed|looked up|accessed)\b", re.IGNORECASE),
        re.compile(r"\bI (?:have access to|can verify|can confirm)\b", re.IGNORECASE),
        re.compile(r"\blegally (?:binding|required|mandated|guaranteed)\b", re.IGNORECASE),
        re.compile(
            r"\b(?:experts|doctors|scientists|studies|research) (?:agree|confirm|prove|proves|show)\b", re.I
        ),
    ),
    "specific_claims": (
        re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?%"),
        re.compile(r"[$€£]\s?\d[\d,]*(?:\.\d+)?"),
        re.compile(rf"\b{_MONTH}\.? \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}\b"),
        re.compile(rf"\b\d{{1,2}} {_MONTH} \d{{4}}\b"),
        re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
        re.compile(
            r"\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b|\b\d+(?:\.\d+)? (?:million|billion|thousand)\b", re.IGNORECASE
        ),
    ),
    "overconfidence": (
        re.compile(r"\b(?:definitely|certainly|undoubtedly|unquestionably|indisputably)\b", re.IGNORECASE),
        re.compile(r"\bwithout (?:a|any) doubt\b|\bno doubt\b|\bthere is no question\b", re.IGNORECASE),
        re.compile(
            r"\bI(?: am|'m) (?:completely |absolutely |totally |100% )?(?:sure|certain|confident)\b", re.I
        ),
        re.compile(r"\b(?:it is|it's) (?:impossible|guaranteed|certain) that\b", re.IGNORECASE),
    ),
}

CLAIM_CATEGORIES: tuple[str, ...] = tuple(_PATTERNS)
"""The claim categories counted per run, in report order."""

_MAX_EXAMPLES = 5


def _matches(text: str) -> dict[str, list[str]]:
    return {
        category: [m.group(0).strip() for p in patterns for m in p.finditer(text)]
        for category, patterns in _PATTERNS.items()
    }


def claim_counts(text: str) -> dict[str, int]:
    """``{category: number of matches}`` for one text, every category present."""
    return {category: len(found) for category, found in _matches(text).items()}


def summarize_claims(
    texts: Sequence[str], config: StabilityConfig
) -> tuple[ClaimSummary, list[dict[str, int]]]:
    """The summary (totals per category, share of runs with a claim, its variance, examples)
    and each text's counts per category."""
    per_run: list[dict[str, int]] = []
    examples: list[str] = []
    for text in texts:
        found = _matches(text)
        per_run.append({c: len(m) for c, m in found.items()})
        for matches in found.values():
            for match in matches:
                if match not in examples and len(examples) < _MAX_EXAMPLES:
                    examples.append(match)
    with_claims = sum(1 for counts in per_run if any(counts.values()))
    share = with_claims / len(per_run) if per_run else 0.0
    variance: ClaimVariance
    if with_claims == 0:
        variance = "NONE"
    elif config.claim_low_share <= share <= config.claim_high_share:
        variance = "HIGH"
    else:
        variance = "LOW"
    totals = {c: sum(counts[c] for counts in per_run) for c in CLAIM_CATEGORIES}
    summary = ClaimSummary(
        totals=totals,
        runs_with_claims=with_claims,
        share=share,
        variance=variance,
        examples=tuple(examples),
    )
    return summary, per_run
