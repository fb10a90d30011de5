"""Word-level differences between the baseline's and the candidate's answers.

The diff is computed here, in Python (:class:`difflib.SequenceMatcher` over
words and the whitespace between them), and handed to the page as segments
``[op, text]``: ``"="`` text both answers share, ``"-"`` text only the
baseline has, ``"+"`` text only the candidate has. The page marks the words
that differ on both sides alike, neither as wrong: ``<mark class="diff-base">``
in the baseline's column (soft amber), ``<mark class="diff-cand">`` in the
candidate's (soft blue), no strikethrough, built with ``textContent``;
:func:`diff_html` renders the same segments as escaped HTML.
"""

from __future__ import annotations

import html
import re
from difflib import SequenceMatcher

__all__ = ["MAX_DIFF_TOKENS", "diff_html", "word_diff"]

MAX_DIFF_TOKENS = 6000
"""Above this many tokens on either side the answers are shown as one removal and one insertion
(SequenceMatcher is quadratic in the worst case; a report must not stall on one huge answer)."""

_TOKENS = re.compile(r"^\s+|\S+\s*")


def _tokens(text: str) -> list[str]:
    return _TOKENS.findall(text)


def word_diff(baseline: str, candidate: str) -> list[list[str]]:
    """Segments ``[op, text]`` turning ``baseline`` into ``candidate`` word by word.

    Joining the ``"="`` and ``"-"`` texts gives the baseline back, the ``"="`` and
    ``"+"`` texts the candidate; neighbouring segments never share an op.
    """
    if baseline == candidate:
        return [["=", baseline]] if baseline else []
    a, b = _tokens(baseline), _tokens(candidate)
    if len(a) > MAX_DIFF_TOKENS or len(b) > MAX_DIFF_TOKENS:
        raw = [["-", baseline], ["+", candidate]]
        return [seg for seg in raw if seg[1]]
    out: list[list[str]] = []

    def push(op: str, words: list[str]) -> None:
        text = "".join(words)
        if not text:
            return
        if out and out[-1][0] == op:
            out[-1][1] += text
        else:
            out.append([op, text])

    # Words are compared without the whitespace that follows them; a word both sides share
    # but followed by other whitespace is kept as shared, its whitespace shown as changed.
    keys_a, keys_b = [t.rstrip() for t in a], [t.rstrip() for t in b]
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, keys_a, keys_b, autojunk=False).get_opcodes():
        if tag == "equal":
            for ta, tb in zip(a[i1:i2], b[j1:j2], strict=True):
                if ta == tb:
                    push("=", [ta])
                else:
                    word = ta.rstrip()
                    push("=", [word])
                    push("-", [ta[len(word) :]])
                    push("+", [tb[len(word) :]])
        else:
            push("-", a[i1:i2])
            push("+", b[j1:j2])
    return out


def diff_html(segments: list[list[str]], side: str) -> str:
    """One side (``"baseline"`` or ``"candidate"``) of ``segments`` as escaped HTML with
    ``<mark class="diff-base">`` / ``<mark class="diff-cand">`` around the words only that side has."""
    own, cls = ("-", "diff-base") if side == "baseline" else ("+", "diff-cand")
    parts = []
    for op, text in segments:
        if op == "=":
            parts.append(html.escape(text))
        elif op == own:
            parts.append(f'<mark class="{cls}">{html.escape(text)}</mark>')
    return "".join(parts)
