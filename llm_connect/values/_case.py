"""The per-case context judges and scorers read (:class:`Case`).

It lives below ``scoring`` and ``grading`` so a scorer can take a case without
importing the grading package (scorers sit below judges); ``llm_connect.grading``
re-exports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from llm_connect.types import Conversation, Prompt

__all__ = ["Case"]


@dataclass(frozen=True)
class Case:
    """One suite case as judges see it.

    Rule-based judges read ``expected`` (a ground-truth string, or a mapping
    with keys such as ``keywords``, ``schema``, ``sections``) from here.
    """

    id: str
    """The case id, unique within its suite."""
    prompt: str
    """The user prompt both sides answer; for a conversation case, its transcript
    (:meth:`Conversation.render`) unless the case gave a ``prompt`` with ``tools``."""
    task: str = "default"
    """The task the case belongs to (routing decides per task)."""
    system_prompt: str | None = None
    """System prompt for both sides, when the case sets one."""
    expected: Any = None
    """Ground truth or rule data for rule-based judges (string or mapping)."""
    tags: tuple[str, ...] = ()
    """Free-form labels stored with each grade."""
    responses: Mapping[str, str] = field(default_factory=dict)
    """Recorded responses by name (``recorded:NAME`` adapters read these)."""
    line: int | None = None
    """The 1-based line (JSONL) or item index (YAML) the case came from."""
    conversation: Conversation | None = None
    """The conversation both sides answer (messages, tools, tool choice), when the case
    gives ``messages`` or ``tools``; what the adapters receive instead of :attr:`prompt`."""
    session: str | None = None
    """The multi-turn session the case is a turn of (cases of one session, in file order)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The case's free-form ``metadata``: a JSON object (string keys; JSON values,
    no NaN), stored with each of its grades. Read-only: a view over a copy of the
    mapping given, nested lists and objects included."""

    def __post_init__(self) -> None:
        if not isinstance(self.metadata, Mapping):
            raise TypeError(f"Case metadata must be a mapping, not {type(self.metadata).__name__}")
        object.__setattr__(self, "metadata", MappingProxyType(_json_copy(self.metadata)))

    @property
    def request(self) -> Prompt:
        """What the adapters are asked: the :attr:`conversation` when there is one, else :attr:`prompt`."""
        return self.prompt if self.conversation is None else self.conversation

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt through __init__: pickle and copy.deepcopy cannot copy the read-only view.
        values = [getattr(self, f.name) for f in fields(self)]
        values[[f.name for f in fields(self)].index("metadata")] = _json_copy(self.metadata)
        return (type(self), tuple(values))


def _json_copy(value: Any) -> Any:
    """A copy of a JSON-like value: mappings become dicts, lists and tuples lists."""
    if isinstance(value, Mapping):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_copy(v) for v in value]
    return value
