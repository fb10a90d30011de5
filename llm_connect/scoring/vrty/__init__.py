"""VRTY 1.0.1, reimplemented: deterministic no-reference scoring of a response.

Four dimensions of a response to a prompt (relevance, coherence,
completeness, conciseness) and their fixed weighted composite, equal bit for
bit to ``vrty.score()`` 1.0.1 and the same on every Python version and hash
seed. Uses VRTY's own IDF table (MIT, shipped in ``data/`` with its licence),
verified against its SHA-256 on first use.

    >>> from llm_connect.scoring.vrty import analyse
    >>> round(analyse("What is the capital of France?", "Paris is the capital of France.").composite, 4)
    0.8653

``--judge vrty`` (:class:`~llm_connect.grading.judges.VrtyJudge`) grades a
candidate by its composite relative to the baseline's on the same prompt.
"""

from __future__ import annotations

from llm_connect.scoring.vrty._idf import IDF_SHA256
from llm_connect.scoring.vrty._score import WEIGHTS, VrtyResult
from llm_connect.scoring.vrty._scorer import GRADER_ID, VRTY_VERSION, VrtyScorer, analyse
from llm_connect.scoring.vrty._text import MAX_TOKENS

__all__ = [
    "GRADER_ID",
    "IDF_SHA256",
    "MAX_TOKENS",
    "VRTY_VERSION",
    "WEIGHTS",
    "VrtyResult",
    "VrtyScorer",
    "analyse",
]
