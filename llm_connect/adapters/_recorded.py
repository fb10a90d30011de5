"""RecordedAdapter: answers from responses recorded ahead of time (no model call)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path

from llm_connect.errors import ConfigurationError, RecordingNotFoundError
from llm_connect.types import BudgetTracker, Conversation, LLMResponse, Prompt, RunConfig, prompt_text

__all__ = ["RecordedAdapter"]


class RecordedAdapter:
    """Replays recorded responses keyed by prompt, for grading logged outputs.

    ``recordings`` maps a prompt (a string or a
    :class:`~llm_connect.types.Conversation`) to either a response text or an
    :class:`~llm_connect.types.LLMResponse`. :meth:`from_jsonl` reads a file
    with one JSON object per line: ``{"prompt": ..., "text": ...}`` or
    ``{"messages": [...], "tools": [...], "tool_choice": ..., "tool_calls": [...]}``
    plus any of ``text``, ``model``, ``latency_ms``, ``usage``, ``cost_usd``,
    ``finish_reason``, ``tool_calls`` (``{"name", "arguments"}`` or the OpenAI
    form). A prompt with no recording raises
    :class:`~llm_connect.errors.RecordingNotFoundError`.
    """

    def __init__(
        self,
        recordings: Mapping[str, str | LLMResponse] | Mapping[Prompt, str | LLMResponse],
        *,
        model: str = "recorded",
        provider: str = "recorded",
    ) -> None:
        self.model = model
        self.provider = provider
        self.adapter_id = f"{provider}:{model}"
        self._responses: dict[str, LLMResponse] = {}
        for prompt, value in recordings.items():
            if isinstance(value, LLMResponse):
                self._responses[_key(prompt)] = value
            elif isinstance(value, str):
                self._responses[_key(prompt)] = LLMResponse(text=value, model=model, provider=provider)
            else:
                raise ConfigurationError(
                    f"recording for prompt {prompt_text(prompt)[:60]!r} must be text or LLMResponse, "
                    f"not {type(value).__name__}"
                )

    @classmethod
    def from_jsonl(cls, path: str | Path, *, model: str = "recorded") -> RecordedAdapter:
        """Load recordings from a JSONL file (errors name the file and line)."""
        path = Path(path)
        recordings: dict[Prompt, str | LLMResponse] = {}
        with path.open(encoding="utf-8") as fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    row = json.loads(raw)
                except ValueError as exc:
                    raise ConfigurationError(f"{path}:{lineno}: not valid JSON ({exc})") from None
                if not isinstance(row, dict):
                    raise ConfigurationError(f"{path}:{lineno}: a recording must be a JSON object")
                prompt: Prompt
                if "messages" in row:
                    try:
                        prompt = Conversation.from_dict(
                            {k: row.pop(k) for k in ("messages", "tools", "tool_choice") if k in row}
                        )
                    except ConfigurationError as exc:
                        raise ConfigurationError(f"{path}:{lineno}: {exc}") from None
                elif isinstance(row.get("prompt"), str):
                    prompt = row.pop("prompt")
                else:
                    raise ConfigurationError(
                        f"{path}:{lineno}: field 'prompt' must be a string (or give 'messages')"
                    )
                row.setdefault("text", "")
                if not isinstance(row["text"], str):
                    raise ConfigurationError(f"{path}:{lineno}: field 'text' must be a string")
                if not row["text"] and not row.get("tool_calls"):
                    raise ConfigurationError(f"{path}:{lineno}: field 'text' is required (or 'tool_calls')")
                row.setdefault("model", model)
                row.setdefault("provider", "recorded")
                try:
                    recordings[prompt] = LLMResponse.from_dict(row)
                except (ConfigurationError, KeyError, TypeError, ValueError) as exc:
                    raise ConfigurationError(f"{path}:{lineno}: {exc}") from None
        return cls(recordings, model=model)

    def __repr__(self) -> str:
        return f"RecordedAdapter({self.adapter_id!r}, {len(self._responses)} recordings)"

    def __len__(self) -> int:
        return len(self._responses)

    def complete(self, prompt: Prompt, run_config: RunConfig) -> LLMResponse:
        """The recorded response for ``prompt`` (charged to the run's budget, if any)."""
        tracker: BudgetTracker | None = run_config.budget_tracker
        if tracker is not None:
            tracker.check()
        try:
            response = self._responses[_key(prompt)]
        except KeyError:
            raise RecordingNotFoundError(
                f"{self.adapter_id}: no recorded response for prompt {prompt_text(prompt)[:80]!r}",
                adapter_id=self.adapter_id,
            ) from None
        if tracker is not None:
            tracker.charge(response)
        return response

    async def acomplete(self, prompt: Prompt, run_config: RunConfig) -> LLMResponse:
        """Same as :meth:`complete`."""
        await asyncio.sleep(0)
        return self.complete(prompt, run_config)


def _key(prompt: Prompt) -> str:
    """The lookup key of a prompt: the string, or ``conversation:`` and the conversation's digest."""
    return prompt if isinstance(prompt, str) else f"conversation:{prompt.digest}"
