"""Run one request N times, concurrently, and measure how much the answers vary.

Every run makes a real model call: repeated identical calls are the point, so no
response cache is used unless the caller passes one *and* asks for it
(``use_cache=True``; each run then has its own entry, keyed by its index as the
sample number, as ``--samples`` does in grading). Any object with the ledger's
``cache_key`` / ``cache_get`` / ``cache_put`` methods serves, the
:class:`~llm_connect.ledger.QualityLedger` included.

A run whose call fails (an :class:`~llm_connect.errors.AdapterError` after the
adapter's own retries, or a refused budget) is recorded and counted, not fatal;
fewer successful runs than ``config.min_successful_runs(runs)`` raise
:class:`~llm_connect.errors.InsufficientRunsError`. The successful runs' answers
are embedded in one batched call.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

from llm_connect._conversation import Conversation
from llm_connect.adapters import run_in_own_loop
from llm_connect.errors import (
    AdapterError,
    BudgetExceededError,
    ConfigurationError,
    InsufficientRunsError,
    StabilityEmbeddingError,
    ToolDefinitionError,
)
from llm_connect.stability._claims import summarize_claims
from llm_connect.stability._config import StabilityConfig
from llm_connect.stability._fingerprint import identify_fingerprints
from llm_connect.stability._input import StabilityQuery, _check_tools
from llm_connect.stability._metrics import (
    agreement_rates,
    answer_text,
    detect_structure,
    length_consistency,
    semantic_consistency,
    structural_consistency,
    tool_consistency,
    tool_signature,
    word_count,
)
from llm_connect.stability._report import RunRecord, StabilityReport
from llm_connect.types import LLMResponse, Prompt, RunConfig, utcnow

if TYPE_CHECKING:
    from llm_connect.adapters import EmbeddingAdapter, LLMAdapter

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_RUNS",
    "MAX_RUNS",
    "MIN_RUNS",
    "ProgressCallback",
    "ResponseCache",
    "aanalyze",
    "analyze",
    "as_conversation",
]

DEFAULT_RUNS = 20
"""Runs of an analysis unless told otherwise (the Ruvrics default)."""
DEFAULT_CONCURRENCY = 20
"""Runs in flight at once unless told otherwise: 20 runs go out together."""
MIN_RUNS = 2
"""Fewest runs an analysis accepts."""
MAX_RUNS = 200
"""Most runs an analysis accepts."""

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(finished_runs, total_runs)`` after each run, successful or not."""


class ResponseCache(Protocol):
    """Where cached responses live (the ledger's response-cache methods)."""

    def cache_key(
        self,
        adapter_id: str,
        prompt: Prompt,
        run_config: RunConfig,
        *,
        endpoint: str | None = None,
        sample: int = 0,
    ) -> str:
        """The key of one call; ``sample`` tells repeated identical calls apart."""
        ...

    def cache_get(self, key: str) -> LLMResponse | None:
        """The cached response, or ``None``."""
        ...

    def cache_put(self, key: str, adapter_id: str, response: LLMResponse) -> None:
        """Cache ``response`` under ``key``."""
        ...


def as_conversation(
    query: Prompt | StabilityQuery, tools: Sequence[Mapping[str, Any]] | None = None
) -> Conversation:
    """The conversation an analysis sends: ``query`` (a prompt string, a conversation or a
    loaded input) with ``tools`` added.

    Raises:
        ConfigurationError: an empty prompt, or a query of another type.
        ToolDefinitionError: ``tools`` are malformed, or the query already has tools.
    """
    if isinstance(query, StabilityQuery):
        conversation = query.conversation
    elif isinstance(query, Conversation):
        conversation = query
    elif isinstance(query, str):
        if not query.strip():
            raise ConfigurationError("the stability query is an empty prompt")
        conversation = Conversation([{"role": "user", "content": query}])
    else:
        raise ConfigurationError(
            f"query must be a prompt string, a Conversation or a StabilityQuery, not {type(query).__name__}"
        )
    if tools is None:
        return conversation
    checked = _check_tools(list(tools), None, in_file=False)
    if conversation.tools:
        raise ToolDefinitionError("the query already has tools; give them in one place", field="tools")
    return Conversation(conversation.messages, tools=checked, tool_choice=conversation.tool_choice)


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ConfigurationError(f"{name} must be an integer {bound}, not {value!r}")
    return value


def _embed(embedder: EmbeddingAdapter, texts: list[str]) -> Any:
    """One batched embedding of ``texts`` as a float array (one row per text), checked; every
    failure is a StabilityEmbeddingError."""
    import numpy as np

    name = getattr(embedder, "adapter_id", type(embedder).__name__)
    try:
        vectors = embedder.embed(texts)
    except Exception as exc:
        raise StabilityEmbeddingError(
            f"{name}: could not embed the responses: {type(exc).__name__}: {exc}"
        ) from exc
    if len(vectors) != len(texts):
        raise StabilityEmbeddingError(f"{name}: {len(vectors)} vectors for {len(texts)} responses")
    dims = {len(v) for v in vectors}
    if len(dims) != 1 or 0 in dims:
        raise StabilityEmbeddingError(f"{name}: vectors of different or zero lengths {sorted(dims)}")
    try:
        matrix = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise StabilityEmbeddingError(f"{name}: a vector holds a value that is not a number: {exc}") from exc
    if not np.isfinite(matrix).all():
        raise StabilityEmbeddingError(f"{name}: a vector holds NaN or infinity")
    return matrix


def _default_embedder() -> EmbeddingAdapter:
    from llm_connect.adapters import default_embedding_adapter

    return default_embedding_adapter()


async def aanalyze(
    adapter: LLMAdapter,
    query: Prompt | StabilityQuery,
    *,
    runs: int = DEFAULT_RUNS,
    run_config: RunConfig,
    tools: Sequence[Mapping[str, Any]] | None = None,
    embedder: EmbeddingAdapter | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    use_cache: bool = False,
    cache: ResponseCache | None = None,
    config: StabilityConfig | None = None,
    progress: ProgressCallback | None = None,
) -> StabilityReport:
    """Send ``query`` to ``adapter`` ``runs`` times (at most ``concurrency`` at once) and
    measure the answers' stability.

    Args:
        adapter: the model (its ``acomplete`` is called; wrap it in a
            :class:`~llm_connect.grading.ResilientAdapter` for retries).
        query: a prompt string, a :class:`~llm_connect.types.Conversation` or a
            :class:`StabilityQuery` from :func:`load_query`.
        runs: how many identical calls, 2..200.
        run_config: temperature, max tokens, system prompt... of every call.
        tools: OpenAI function tools to offer (when ``query`` has none).
        embedder: the semantic metric's embedder (default: the offline all-MiniLM-L6-v2, on
            ONNX Runtime where it can run, else PyTorch: ``default_embedding_adapter``).
        concurrency: runs in flight at once.
        use_cache: answer runs from ``cache`` when it holds them (and store new answers).
        cache: a response cache (the ledger) for ``use_cache``.
        config: weights and thresholds (default :class:`StabilityConfig`).
        progress: ``progress(finished, total)`` after each run.

    Raises:
        ConfigurationError: ``runs``, ``concurrency`` or the query are invalid, or
            ``use_cache`` without a ``cache``.
        ToolDefinitionError: ``tools`` are malformed.
        InsufficientRunsError: fewer runs succeeded than the minimum.
        StabilityEmbeddingError: the embedder failed.
    """
    _check_int("runs", runs, MIN_RUNS, MAX_RUNS)
    _check_int("concurrency", concurrency, 1)
    if not isinstance(run_config, RunConfig):
        raise ConfigurationError(f"run_config must be a RunConfig, not {type(run_config).__name__}")
    if use_cache and cache is None:
        raise ConfigurationError("use_cache=True needs a cache (e.g. the ledger)")
    config = config if config is not None else StabilityConfig()
    conversation = as_conversation(query, tools)
    adapter_id = str(getattr(adapter, "adapter_id", type(adapter).__name__))
    endpoint = getattr(adapter, "endpoint", None)
    start = time.perf_counter()
    slots = asyncio.Semaphore(concurrency)
    finished = 0

    async def one(index: int) -> RunRecord:
        nonlocal finished
        async with slots:
            began = time.perf_counter() - start
            response: LLMResponse | None = None
            error: str | None = None
            key = None
            if use_cache and cache is not None:
                key = cache.cache_key(
                    adapter_id,
                    conversation,
                    run_config,
                    endpoint=endpoint if isinstance(endpoint, str) else None,
                    sample=index,
                )
                response = cache.cache_get(key)
            if response is None:
                try:
                    response = await adapter.acomplete(conversation, run_config)
                except (AdapterError, BudgetExceededError) as exc:
                    error = f"{type(exc).__name__}: {exc}"
                else:
                    if key is not None and cache is not None:
                        cache.cache_put(key, adapter_id, response)
            ended = time.perf_counter() - start
        finished += 1
        if progress is not None:
            progress(finished, runs)
        return RunRecord(index, response, error, started_s=began, finished_s=ended)

    tasks = [asyncio.ensure_future(one(i)) for i in range(runs)]
    try:
        records = list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise

    ok = [r for r in records if r.response is not None]
    minimum = config.min_successful_runs(runs)
    if len(ok) < minimum:
        failures = tuple(f"run {r.index}: {r.error}" for r in records if r.error is not None)
        errors = [str(r.error) for r in records if r.error is not None]
        distinct = len(set(errors))
        first = errors[0].split(":", 1)[0] if errors else ""
        why = (
            f"{distinct} distinct error{'s' if distinct != 1 else ''}, the first a {first}"
            if errors
            else "no error recorded"
        )
        raise InsufficientRunsError(
            f"{adapter_id}: only {len(ok)} of {runs} runs succeeded; at least {minimum} are needed ({why})",
            succeeded=len(ok),
            failed=runs - len(ok),
            minimum=minimum,
            errors=failures,
        )
    responses = [r.response for r in ok if r.response is not None]
    texts = [answer_text(r) for r in responses]
    embedder = embedder if embedder is not None else _default_embedder()
    vectors = await asyncio.to_thread(_embed, embedder, texts)

    semantic = semantic_consistency(vectors, config)
    tool = tool_consistency(responses, config)
    structural = structural_consistency(responses, config)
    lengths = [word_count(t) for t in texts]
    length = length_consistency(lengths, config)
    claims, claim_counts = summarize_claims([r.text for r in responses], config)
    score = min(1.0, max(0.0, math.fsum(m.weight * m.score for m in (semantic, tool, structural, length))))
    verdict = config.verdict(score)
    callers = {tool_signature(r.tool_calls) for r in responses if r.tool_calls}
    fingerprints = identify_fingerprints(
        semantic=semantic,
        tool=tool,
        structural=structural,
        length=length,
        claims=claims,
        verdict=verdict,
        tool_sets_among_callers=len(callers),
    )
    measured = {
        r.index: (detect_structure(resp.text), n, counts)
        for r, resp, n, counts in zip(ok, responses, lengths, claim_counts, strict=True)
    }
    full_records = tuple(
        RunRecord(
            r.index,
            r.response,
            r.error,
            started_s=r.started_s,
            finished_s=r.finished_s,
            structure=measured[r.index][0] if r.index in measured else None,
            length_words=measured[r.index][1] if r.index in measured else None,
            claims=measured[r.index][2] if r.index in measured else None,
        )
        for r in records
    )
    return StabilityReport(
        adapter_id=adapter_id,
        query=conversation.to_dict(),
        query_digest=conversation.digest,
        run_config=run_config.to_dict(),
        runs=full_records,
        score=score,
        verdict=verdict,
        semantic=semantic,
        tool=tool,
        structural=structural,
        length=length,
        agreement=agreement_rates(responses),
        claims=claims,
        fingerprints=fingerprints,
        config=config,
        embedder_id=str(getattr(embedder, "adapter_id", type(embedder).__name__)),
        min_successful_runs=minimum,
        elapsed_s=time.perf_counter() - start,
        created_at=utcnow().isoformat(),
    )


def analyze(
    adapter: LLMAdapter,
    query: Prompt | StabilityQuery,
    *,
    runs: int = DEFAULT_RUNS,
    run_config: RunConfig,
    tools: Sequence[Mapping[str, Any]] | None = None,
    embedder: EmbeddingAdapter | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    use_cache: bool = False,
    cache: ResponseCache | None = None,
    config: StabilityConfig | None = None,
    progress: ProgressCallback | None = None,
) -> StabilityReport:
    """Synchronous :func:`aanalyze` (same arguments, errors and report).

    Runs its own event loop; called from a thread that already runs one (a
    notebook), it runs the analysis on a worker thread.
    """
    coro = aanalyze(
        adapter,
        query,
        runs=runs,
        run_config=run_config,
        tools=tools,
        embedder=embedder,
        concurrency=concurrency,
        use_cache=use_cache,
        cache=cache,
        config=config,
        progress=progress,
    )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_in_own_loop(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run_in_own_loop, coro).result()
