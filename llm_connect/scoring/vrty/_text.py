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

Speed: pure-ASCII text (the common case) skips normalisation and regular
expressions per token: one ``str.translate`` lowercases it, turns sentence
punctuation and whitespace into two distinct whitespace marks and every other
character into a space; one split at the marks gives the sentences and
``str.split()`` each sentence's tokens. The text's tokens are then the
sentences' tokens in order, so it is tokenised once.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import chain, islice
from typing import Final

__all__ = ["MAX_TOKENS", "capped_tokens", "split_text", "tokens"]

MAX_TOKENS: Final[int] = 2048
"""Tokens beyond this many are not scored (VRTY's fixed cap)."""

# Tokens are runs of a-z after lowercasing, so on ASCII text one C-level
# ``translate`` (A-Z -> a-z, every other ASCII character -> space) followed by
# ``split()`` yields exactly the matches of ``[a-z]+``, about 3x faster.
_LETTERS: Final = str.maketrans(
    {i: (chr(i).lower() if chr(i).isalpha() else " ") for i in range(128) if not "a" <= chr(i) <= "z"}
)
# A sentence break is a run of whitespace right after ., ! or ?. Consuming
# the punctuation too (rather than a look-behind) cuts at the same places and
# changes no token, since punctuation is never part of one.
_split_sentences = re.compile(r"[.!?]\s+").split


def _marked_table() -> dict[int, str]:
    r"""ASCII translation marking sentence breaks while splitting tokens.

    Letters are lowercased; ``.!?`` become ``\x1f`` and the characters ``\s``
    matches become ``\n`` (both whitespace to ``str.split``); everything else
    becomes a space. A break is then ``\x1f`` followed by ``\n``s, and
    ``split()`` of each piece gives its tokens.
    """
    table: dict[int, str] = {}
    for code in range(128):
        char = chr(code)
        if "a" <= char <= "z":
            continue
        if "A" <= char <= "Z":
            table[code] = char.lower()
        elif char in ".!?":
            table[code] = "\x1f"
        elif re.match(r"\s", char):
            table[code] = "\n"
        else:
            table[code] = " "
    return table


_MARKED: Final = str.maketrans(_marked_table())
_split_marked = re.compile("\x1f\n+").split
_normalize = unicodedata.normalize
_join = chain.from_iterable


def _ascii(text: str) -> str:
    """NFKD, then drop every non-ASCII character (case kept)."""
    return text if text.isascii() else _normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def tokens(text: str) -> list[str]:
    """Every token of ``text`` (no cap)."""
    return _ascii(text).translate(_LETTERS).split()


def capped_tokens(text: str) -> list[str]:
    """The first :data:`MAX_TOKENS` tokens of ``text``."""
    words = _ascii(text).translate(_LETTERS).split()
    return words if len(words) <= MAX_TOKENS else words[:MAX_TOKENS]


def split_text(text: str) -> tuple[list[str], list[list[str]]]:
    """``text``'s capped token list and its capped list of sentence token lists.

    Both follow the module rules exactly; the sentence list is used for
    coherence, the token list for every other dimension.
    """
    cap = MAX_TOKENS
    if text.isascii():
        sentences = [
            found for found in [piece.split() for piece in _split_marked(text.translate(_MARKED))] if found
        ]
        total = 0
        for found in sentences:
            total += len(found)
        if total <= cap:
            # The cut points are whitespace after punctuation, which no token
            # can span, so the text's tokens are its sentences' tokens in order.
            return (sentences[0] if len(sentences) == 1 else list(_join(sentences))), sentences
        words = list(islice(_join(sentences), cap))
    else:
        words = capped_tokens(text)
        sentences = [found for found in [tokens(piece) for piece in _split_sentences(text)] if found]
    total = 0
    for kept, found in enumerate(sentences):
        total += len(found)
        if total > cap:
            return words, sentences[:kept]
    return words, sentences
