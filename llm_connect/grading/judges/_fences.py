"""Fences and the one-JSON-object reply rule for judges that ask an LLM.

The implementation lives in :mod:`llm_connect.scoring._fences` (the safety
scorer's LLM safety judge uses it too, and scoring sits below grading).
"""

from __future__ import annotations

from llm_connect.scoring._fences import ReplyError, fence, fence_id, reply_object

__all__ = ["ReplyError", "fence", "fence_id", "reply_object"]
