"""RecordedAdapter: answers from responses recorded ahead of time (no model call)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path

from llm_connect.errors import ConfigurationError, RecordingNotFoundError
from llm_connect.types import BudgetTracker, LLMResponse, RunConfig

__all__ = ["RecordedAdapter"]


class RecordedAdapter:
    """Replays recorded responses keyed by prompt, for grading logged outputs.

    ``recordings`` maps a prompt to either a response text or an
    :class:`~llm_connect.types.LLMResponse`. :meth:`from_jsonl` reads a file
    with one JSON object per line: ``{"prompt": ..., "text": ...}`` plus any
    of ``model``, ``latency_ms``, ``usage``, ``cost_usd``, ``finish_reason``.
    A prompt with no recording raises
    :class:`~llm_connect.errors.RecordingNotFoundError`.
    """

    def __init__(
        self,
        recordings: Mapping[str, str | LLMResponse],
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
                self._responses[prompt] = value
            elif isinstance(value, str):
                self._responses[prompt] = LLMResponse(text=value, model=model, provider=provider)
            else:
                raise ConfigurationError(
                    f"recording for prompt {prompt[:60]!r} must be text or LLMResponse, "
                    f"not {type(value).__name__}"
                )

    @classmethod
    def from_jsonl(cls, path: str | Path, *, model: str = "recorded") -> RecordedAdapter:
        """Load recordings from a JSONL file (errors name the file and line)."""
        path = Path(path)
        recordings: dict[str, str | LLMResponse] = {}
        with path.open(encoding="utf-8") as fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    row = json.loads(raw)
                except ValueError as exc:
                    raise ConfigurationError(f"{path}:{lineno}: not valid JSON ({exc})") from None
                if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
                    raise ConfigurationError(f"{path}:{lineno}: field 'prompt' must be a string")
                if not isinstance(row.get("text"), str):
                    raise ConfigurationError(f"{path}:{lineno}: field 'text' must be a string")
                row.setdefault("model", model)
                row.setdefault("provider", "recorded")
                recordings[row.pop("prompt")] = LLMResponse.from_dict(row)
        return cls(recordings, model=model)

    def __repr__(self) -> str:
        return f"RecordedAdapter({self.adapter_id!r}, {len(self._responses)} recordings)"

    def __len__(self) -> int:
        return len(self._responses)

    def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """The recorded response for ``prompt`` (charged to the run's budget, if any)."""
        tracker: BudgetTracker | None = run_config.budget_tracker
        if tracker is not None:
            tracker.check()
        try:
            response = self._responses[prompt]
        except KeyError:
            raise RecordingNotFoundError(
                f"{self.adapter_id}: no recorded response for prompt {prompt[:80]!r}",
                adapter_id=self.adapter_id,
            ) from None
        if tracker is not None:
            tracker.charge(response)
        return response

    async def acomplete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """Same as :meth:`complete`."""
        await asyncio.sleep(0)
        return self.complete(prompt, run_config)
