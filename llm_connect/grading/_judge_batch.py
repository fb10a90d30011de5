"""Batched judging: pairs from many cases go to one ``judge_many`` call, in a thread."""

from __future__ import annotations

import asyncio
from typing import Any

from llm_connect.grading._protocols import JudgePair
from llm_connect.grading._results import GradingResult

__all__ = ["JudgeBatcher"]


class JudgeBatcher:
    """Collects pairs for a ``judge_many`` judge across cases; judges them in a thread."""

    def __init__(self, judge: Any, *, max_batch: int = 64, linger_s: float = 0.005) -> None:
        self.judge = judge
        self.max_batch = max_batch
        self.linger_s = linger_s
        self._pending: list[tuple[JudgePair, asyncio.Future[GradingResult]]] = []
        self._task: asyncio.Task[None] | None = None

    async def submit(self, pair: JudgePair) -> GradingResult:
        fut: asyncio.Future[GradingResult] = asyncio.get_running_loop().create_future()
        self._pending.append((pair, fut))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        while self._pending:
            if len(self._pending) < self.max_batch:
                await asyncio.sleep(self.linger_s)  # let other finished cases join the batch
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            live = [(p, f) for p, f in batch if not f.done()]
            if not live:
                continue
            try:
                results = await asyncio.to_thread(self.judge.judge_many, [p for p, _ in live])
                if len(results) != len(live):
                    raise ValueError(f"judge_many returned {len(results)} results for {len(live)} pairs")
            except Exception:
                # Isolate the pair(s) at fault: judge one by one.
                for pair, fut in live:
                    try:
                        res = await asyncio.to_thread(
                            self.judge.judge,
                            pair.baseline_response,
                            pair.candidate_response,
                            prompt=pair.prompt,
                            run_config=pair.run_config,
                            case=pair.case,
                        )
                    except Exception as exc:
                        if not fut.done():
                            fut.set_exception(exc)
                    else:
                        if not fut.done():
                            fut.set_result(res)
                continue
            for (_, fut), res in zip(live, results, strict=True):
                if not fut.done():
                    fut.set_result(res)
