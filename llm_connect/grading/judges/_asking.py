"""What every judge that asks a model shares: its settings, the reply-format ladder, the judge
call's config, and the details each grade records about the call.

:class:`~llm_connect.grading.judges.LLMJudge` (a score) and
:class:`~llm_connect.grading.judges.PairwiseJudge` (a verdict per order) differ in what they
ask and how they read the reply; everything else is here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from llm_connect._structured import ReplyFormat, check_format_option
from llm_connect.errors import ConfigurationError, JudgeOutputError
from llm_connect.grading._protocols import judge_spec, spec_args
from llm_connect.grading.judges._base import BaseJudge
from llm_connect.types import LLMResponse, RunConfig

if TYPE_CHECKING:
    from llm_connect.adapters import LLMAdapter

__all__ = ["DEFAULT_MAX_TOKENS", "AskingJudge"]

T = TypeVar("T")

DEFAULT_MAX_TOKENS = 512
"""The judge call's token cap unless ``max_tokens`` says otherwise (left out of the stored spec)."""


class AskingJudge(BaseJudge):
    """Base of the judges that ask a model (``asks_llm = True``): set up by :meth:`_setup`.

    A subclass writes :meth:`~BaseJudge.score` (sync, ``adapter.complete``) and
    :meth:`~BaseJudge.ascore` (``adapter.acomplete``) through :meth:`_complete` and
    :meth:`_acomplete`."""

    asks_llm = True
    """A model gives the grade: routing trusts it only after a passing calibration."""

    adapter: LLMAdapter
    seed: int | None
    max_tokens: int
    response_format: str | None
    """The pinned mode, or ``None`` for the ladder."""
    reply_format: ReplyFormat
    judge_config: RunConfig
    """The judge call's config before a ``response_format`` is added (temperature 0)."""
    grader_id: str
    _spec: dict[str, Any]
    _system_prompt: str

    def _setup(
        self,
        adapter: LLMAdapter,
        *,
        name: str,
        seed: int | None,
        max_tokens: int,
        response_format: str | None,
        schema_name: str,
        schema: Mapping[str, Any],
        system_prompt: str,
        spec: Mapping[str, Any],
        seed_error: str,
    ) -> None:
        """Check and keep the shared settings. ``spec`` holds the judge's own spec arguments in
        order after ``model`` and before ``max_tokens``/``response_format``; ``seed_error`` is
        the message (``{seed!r}`` filled in) for a seed that is not an integer."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ConfigurationError(seed_error.format(seed=seed))
        pinned = check_format_option(response_format, what=f"judge {name!r}")
        self.adapter = adapter
        self.seed = seed
        self.max_tokens = max_tokens
        self.response_format = pinned
        self.reply_format = ReplyFormat(schema_name, dict(schema), pinned)
        self._system_prompt = system_prompt
        self._spec = judge_spec(
            name,
            asks_llm=self.asks_llm,
            **spec_args(
                {
                    "model": adapter.adapter_id,
                    **spec,
                    "max_tokens": None if max_tokens == DEFAULT_MAX_TOKENS else max_tokens,
                    "response_format": pinned,
                }
            ),
        )
        self.judge_config = RunConfig(
            temperature=0.0,
            max_tokens=max_tokens,
            model_params={} if seed is None else {"seed": seed},
        )

    def _base(self, run_config: RunConfig) -> RunConfig:
        """The judge call's config for a pair graded under ``run_config`` (its timeout only)."""
        return self.judge_config.replace(timeout_s=run_config.timeout_s, system_prompt=self._system_prompt)

    def _request(
        self, message: str, run_config: RunConfig, response_format: str | None
    ) -> tuple[str, RunConfig]:
        """``(message, config)`` as sent in ``response_format`` (default: the mode sent first now)."""
        mode = response_format or self.reply_format.first_mode(self.adapter)
        return message, self.reply_format.config(self._base(run_config), mode)

    def formats_used(self) -> dict[str, str]:
        """``{adapter id: response format}`` this judge's requests succeeded in so far
        (several modes comma-separated, in ladder order; empty before the first grade)."""
        return self.reply_format.formats_used()

    def _call_details(self, replies: Sequence[LLMResponse]) -> dict[str, Any]:
        """What each grade records about the judge calls: the served model, the adapter, usage and
        cost (one call: its own; several: usage per call and the summed cost), the spec, the seed,
        and the server's ``system_fingerprint`` when it sent one."""
        usage = [None if r.usage is None else r.to_dict()["usage"] for r in replies]
        costs = [r.cost_usd for r in replies if r.cost_usd is not None]
        details: dict[str, Any] = {
            "judge_model": replies[0].model,
            "judge_adapter": self.adapter.adapter_id,
            "judge_usage": usage[0] if len(replies) == 1 else usage,
            "judge_cost_usd": (replies[0].cost_usd if len(replies) == 1 else (sum(costs) if costs else None)),
            "judge_spec": self._spec,
        }
        fingerprint = replies[0].system_fingerprint
        if fingerprint is not None:  # the server's backend configuration (issue 37)
            details["system_fingerprint"] = fingerprint
        if self.seed is not None:
            details["seed"] = self.seed
        return details

    def _complete(self, message: str, run_config: RunConfig) -> tuple[LLMResponse, str]:
        """``(reply, mode)``: ``message`` sent to the judge model for a pair graded under
        ``run_config``, down the reply-format ladder (or in the pinned mode)."""
        return self.reply_format.complete(self.adapter, message, self._base(run_config))

    async def _acomplete(self, message: str, run_config: RunConfig) -> tuple[LLMResponse, str]:
        """Async :meth:`_complete` (``adapter.acomplete``)."""
        return await self.reply_format.acomplete(self.adapter, message, self._base(run_config))

    def _parsed(self, parse: Callable[[str], T], reply: LLMResponse, where: str = "") -> T:
        """``parse(reply.text)``; its :class:`~llm_connect.errors.JudgeOutputError` again with the
        grader id (and ``where``, e.g. `` (baseline shown first)``) in front, the raw reply kept."""
        try:
            return parse(reply.text)
        except JudgeOutputError as exc:
            raise JudgeOutputError(f"{self.grader_id}{where}: {exc}", raw_reply=reply.text) from None

    def _repr(self, **fields: Any) -> str:
        """``Name(adapter, key=value, ...)`` for ``repr``, a pinned ``response_format`` last."""
        if self.response_format is not None:
            fields["response_format"] = self.response_format
        shown = "".join(f", {key}={value!r}" for key, value in fields.items())
        return f"{type(self).__name__}({self.adapter!r}{shown})"
