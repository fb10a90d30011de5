"""Fences and the one-JSON-object reply rule for judges that ask an LLM.

The implementation lives in :mod:`llm_connect.scoring._fences` (the safety
scorer's LLM safety judge uses it too, and scoring sits below grading).
"""

from __future__ import annotations

from llm_connect.scoring._fences import ReplyError, fence, fence_id, reply_object
from llm_connect.types import LLMResponse

__all__ = ["ReplyError", "answer_material", "fence", "fence_id", "reply_object"]


def answer_material(response: LLMResponse) -> str:
    """What the judge reads of one answer: its text, then one line per tool call it made.

    An answer that only calls tools is not an empty text to the judge:
    ``[tool call] refund({"order_id": 42})``.
    """
    calls = [f"[tool call] {c.name}({c.arguments})" for c in response.tool_calls]
    return "\n".join([response.text, *calls]) if response.text else "\n".join(calls)
