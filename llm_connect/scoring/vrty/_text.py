"""VRTY 1.0.1 text handling: folding, tokens, sentences and the token cap.

The rules (all fixed by VRTY 1.0.1):

* Folding: Unicode NFKD, then every non-ASCII character dropped, then
  lowercase. Accented Latin letters fold to their base letters; other
  scripts (CJK, Cyrillic, ...) disappear.
* Tokens: maximal runs of ``a``-``z`` in the folded text.
* Cap: only the first :data:`MAX_TOKENS` tokens are scored.
* Sentences: the *original* text is cut at every run of whitespace that
  follows ``.``, ``!`` or ``?``; each piece is folded and tokenised on its
  own, pieces without tokens are skipped, and pieces are taken in order until
  the next one would push the running total past the cap (that piece and all
  later ones are dropped whole).

Speed: pure-ASCII text (the common case) skips normalisation, and its token
list is the concatenation of its sentences' tokens, so it is tokenised once.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["MAX_TOKENS", "capped_tokens", "fold", "split_text", "tokens"]

MAX_TOKENS: Final[int] = 2048
"""Tokens beyond this many are not scored (VRTY's fixed cap)."""

_find_words = re.compile(r"[a-z]+").findall
_split_sentences = re.compile(r"(?<=[.!?])\s+").split
_normalize = unicodedata.normalize


def fold(text: str) -> str:
    """``text`` NFKD-normalised, stripped to ASCII and lowercased."""
    if text.isascii():  # NFKD leaves ASCII unchanged
        return text.lower()
    return _normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()


def tokens(text: str) -> list[str]:
    """Every token of ``text`` (no cap)."""
    return _find_words(fold(text))


def capped_tokens(text: str) -> list[str]:
    """The first :data:`MAX_TOKENS` tokens of ``text``."""
    words = _find_words(fold(text))
    return words if len(words) <= MAX_TOKENS else words[:MAX_TOKENS]


def split_text(text: str) -> tuple[list[str], list[list[str]]]:
    """``text``'s capped token list and its capped list of sentence token lists.

    Both follow the module rules exactly; the sentence list is used for
    coherence, the token list for every other dimension.
    """
    cap = MAX_TOKENS
    sentences: list[list[str]] = []
    total = 0
    if text.isascii():
        lowered = text.lower()
        pieces = _split_sentences(lowered)
        if len(pieces) == 1:
            words = _find_words(lowered)
            if words and len(words) <= cap:
                sentences.append(words)
            return (words if len(words) <= cap else words[:cap]), sentences
        # The cut points are whitespace after punctuation, which no token can
        # span, so the whole text's tokens are the pieces' tokens in order.
        words = []
        full = True  # still collecting sentences
        for piece in pieces:
            found = _find_words(piece)
            if not found:
                continue
            words += found
            if full:
                total += len(found)
                if total > cap:
                    full = False
                else:
                    sentences.append(found)
            if len(words) >= cap:  # no later piece can add a sentence or a token
                break
        return (words if len(words) <= cap else words[:cap]), sentences
    words = _find_words(fold(text))
    for piece in _split_sentences(text):
        found = _find_words(fold(piece))
        if not found:
            continue
        total += len(found)
        if total > cap:
            break
        sentences.append(found)
    return (words if len(words) <= cap else words[:cap]), sentences
