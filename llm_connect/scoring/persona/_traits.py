"""Deterministic trait detectors: formality, tone and verbosity of one response.

Every detector counts surface cues (no model, no randomness), so the same text
gives the same labels on every machine. Rates are cues per 100 words, words
being runs of letters, digits and inner apostrophes.

Formality
    *informal cues*: contractions (``don't``, ``we're``, ``it's``), slang
    (:data:`SLANG`), ``!`` and emoji. *formal cues*: :data:`FORMAL_MARKERS`.
    ``casual`` when informal cues reach 3 per 100 words; ``formal`` when there
    are fewer than 0.5 informal cues per 100 words and either a formal marker
    per 100 words or a mean word length of at least 5.0 letters; otherwise
    ``business_casual``.

Tone
    One count per cue: *technical* — :data:`TECHNICAL_WORDS`, inline code
    spans, ``snake_case``/``camelCase``/``call()`` tokens, numbers with units
    (``200ms``, ``4 GB``, ``30%``); *professional* — :data:`PROFESSIONAL_WORDS`;
    *friendly* — :data:`FRIENDLY_WORDS`, ``!`` and emoji; *conversational* —
    :data:`CONVERSATIONAL_WORDS`, ``?`` and contractions. The tone with the most
    cues wins; ties go to the earlier of technical, professional, friendly,
    conversational; a text with no cue at all is ``professional``.

Verbosity
    By word count: ``concise`` up to 50 words, ``balanced`` 51 to 150,
    ``detailed`` above 150.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "CONVERSATIONAL_WORDS",
    "FORMAL_MARKERS",
    "FRIENDLY_WORDS",
    "PROFESSIONAL_WORDS",
    "SLANG",
    "TECHNICAL_WORDS",
    "detect_traits",
    "formality",
    "tone",
    "verbosity",
]


def _lexicon(text: str) -> frozenset[str]:
    return frozenset(text.split())


SLANG = _lexicon(
    """gonna wanna gotta kinda sorta yeah yep yup nope lol lmao omg btw tbh imo imho idk dude awesome
    cool hey ya y'all stuff totally super literally legit vibe vibes chill folks ok okay"""
)
FORMAL_MARKERS = _lexicon(
    """therefore furthermore moreover consequently accordingly hereby herein pursuant regarding whereas
    sincerely kindly respectfully nevertheless notwithstanding thus hence shall henceforth"""
)
TECHNICAL_WORDS = _lexicon(
    """api apis endpoint endpoints function functions parameter parameters config configuration
    configure latency throughput database databases query queries server servers deploy deployment
    algorithm runtime cache caching version versions install compile compiler variable variables
    schema json http https cpu gpu memory thread threads token tokens request requests protocol
    bandwidth repository commit branch library libraries module modules framework interface integer
    string array regression metric metrics benchmark baseline dataset index kernel binary"""
)
PROFESSIONAL_WORDS = _lexicon(
    """please regards recommend recommended ensure accordingly additionally however therefore provide
    assist appreciate sincerely review policy team client clients customer customers request
    requested available contact follow further information regarding support"""
)
FRIENDLY_WORDS = _lexicon(
    """glad happy thanks thank welcome love hope enjoy great awesome wonderful excited delighted
    fantastic cheers hi hey hello amazing lovely yay fun"""
)
CONVERSATIONAL_WORDS = _lexicon(
    """so well actually basically honestly anyway okay ok yeah pretty guess mean know think really
    right sure like stuff"""
)

_WORDS = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_CONTRACTION = re.compile(
    r"\b(?:\w+(?:n['’]t|['’](?:re|ve|ll|m|d))|(?:it|that|what|there|here|he|she|let|who|where)['’]s)\b",
    re.IGNORECASE,
)
_EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]")
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_CODE_TOKEN = re.compile(r"\b(?:[a-z]+_[a-z0-9_]+|[a-z]+[A-Z][a-zA-Z0-9]*|\w+\(\))")
_UNIT = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|kb|mb|gb|tb|%|x|hz|ghz|rps|qps)(?!\w)", re.IGNORECASE)

_TONE_ORDER = ("technical", "professional", "friendly", "conversational")


def _words(text: str) -> list[str]:
    return [w.casefold().replace("’", "'") for w in _WORDS.findall(text)]


def _per100(count: int, words: int) -> float:
    return count * 100.0 / max(words, 1)


def formality(text: str) -> tuple[str, dict[str, Any]]:
    """``formal``, ``business_casual`` or ``casual``, with the cue counts."""
    words = _words(text)
    contractions = len(_CONTRACTION.findall(text))
    slang = sum(1 for w in words if w in SLANG)
    exclamations = text.count("!")
    emoji = len(_EMOJI.findall(text))
    informal = contractions + slang + exclamations + emoji
    formal = sum(1 for w in words if w in FORMAL_MARKERS)
    letters = [len(w) for w in words if w.isalpha()]
    mean_len = sum(letters) / len(letters) if letters else 0.0
    informal_rate = _per100(informal, len(words))
    if informal_rate >= 3.0:
        label = "casual"
    elif informal_rate < 0.5 and (_per100(formal, len(words)) >= 1.0 or mean_len >= 5.0):
        label = "formal"
    else:
        label = "business_casual"
    cues = {
        "contractions": contractions,
        "slang": slang,
        "exclamations": exclamations,
        "emoji": emoji,
        "formal_markers": formal,
        "mean_word_length": round(mean_len, 3),
    }
    return label, cues


def tone(text: str) -> tuple[str, dict[str, int]]:
    """``technical``, ``professional``, ``friendly`` or ``conversational``, with the cue counts."""
    words = _words(text)
    counts = {
        "technical": sum(1 for w in words if w in TECHNICAL_WORDS)
        + len(_CODE_SPAN.findall(text))
        + len(_CODE_TOKEN.findall(text))
        + len(_UNIT.findall(text)),
        "professional": sum(1 for w in words if w in PROFESSIONAL_WORDS),
        "friendly": sum(1 for w in words if w in FRIENDLY_WORDS)
        + text.count("!")
        + len(_EMOJI.findall(text)),
        "conversational": sum(1 for w in words if w in CONVERSATIONAL_WORDS)
        + text.count("?")
        + len(_CONTRACTION.findall(text)),
    }
    best = max(_TONE_ORDER, key=lambda t: (counts[t], -_TONE_ORDER.index(t)))
    return (best if counts[best] > 0 else "professional"), counts


def verbosity(text: str) -> tuple[str, int]:
    """``concise`` (<= 50 words), ``balanced`` (51..150) or ``detailed`` (> 150), with the word count."""
    count = len(_words(text))
    if count <= 50:
        return "concise", count
    return ("balanced" if count <= 150 else "detailed"), count


def detect_traits(text: str) -> dict[str, Any]:
    """All three detected labels plus their evidence: ``{"formality": ..., "tone": ..., ...}``."""
    form, form_cues = formality(text)
    tone_label, tone_cues = tone(text)
    verb, words = verbosity(text)
    return {
        "formality": form,
        "tone": tone_label,
        "verbosity": verb,
        "evidence": {"formality": form_cues, "tone": tone_cues, "words": words},
    }
