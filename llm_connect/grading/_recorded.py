"""Run settings recorded with production traffic, applied when a candidate answers the same case.

``llm-connect suite import`` keeps each call's request settings in the case's
``metadata["run_settings"]`` (temperature, max tokens, top_p, stop, seed, penalties, the
response format). A candidate compared with those production answers is asked with the same
settings, or the comparison is unfair: a candidate with no token cap writes 2,000 tokens where
production stopped at 24. The command line wins where it sets a value (``--temperature``,
``--max-tokens``, ``--seed``); :func:`recorded_summary` says which applied and which were
replaced, and :func:`capped_answers` finds candidate answers cut by a token cap the recorded
answer was not cut by.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from llm_connect.types import RunConfig

__all__ = ["RECORDED_KEY", "capped_answers", "recorded_summary", "with_recorded"]

RECORDED_KEY = "run_settings"
"""Where ``suite import`` stores a case's recorded request settings (in its metadata)."""

_FIELDS = ("temperature", "max_tokens")
"""Recorded settings that are :class:`RunConfig` fields."""
_PARAMS = ("top_p", "stop", "seed", "frequency_penalty", "presence_penalty", "response_format")
"""Recorded settings sent as request parameters (``model_params``)."""


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _usable(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded settings a request can carry, each checked (anything else is left out)."""
    out: dict[str, Any] = {}
    tokens = recorded.get("max_tokens", recorded.get("max_completion_tokens"))
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
        out["max_tokens"] = tokens
    temperature = recorded.get("temperature")
    if _number(temperature) and temperature >= 0:
        out["temperature"] = float(temperature)
    for key in ("top_p", "frequency_penalty", "presence_penalty"):
        if _number(recorded.get(key)):
            out[key] = recorded[key]
    seed = recorded.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        out["seed"] = seed
    stop = recorded.get("stop")
    if isinstance(stop, str) or (isinstance(stop, list) and stop and all(isinstance(s, str) for s in stop)):
        out["stop"] = stop
    if isinstance(recorded.get("response_format"), Mapping):
        out["response_format"] = dict(recorded["response_format"])
    return out


def recorded_settings(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The usable settings recorded with a case (``{}``: none)."""
    recorded = metadata.get(RECORDED_KEY)
    return _usable(recorded) if isinstance(recorded, Mapping) else {}


def _split(config: RunConfig, recorded: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``(what applies, the keys the command line replaced)``."""
    applied: dict[str, Any] = {}
    replaced: list[str] = []
    for key, value in recorded.items():
        own = getattr(config, key) if key in _FIELDS else config.model_params.get(key)
        if own is None:
            applied[key] = value
        elif own != value:
            replaced.append(key)
    return applied, replaced


def with_recorded(config: RunConfig, metadata: Mapping[str, Any]) -> RunConfig:
    """``config`` with the case's recorded settings filled in where ``config`` sets none."""
    applied, _ = _split(config, recorded_settings(metadata))
    if not applied:
        return config
    fields = {k: v for k, v in applied.items() if k in _FIELDS}
    params = {k: v for k, v in applied.items() if k in _PARAMS}
    if params:
        fields["model_params"] = {**config.model_params, **params}
    return config.replace(**fields)


def recorded_summary(config: RunConfig, cases: Iterable[Any]) -> dict[str, dict[str, int]]:
    """Per recorded setting, on how many cases it ``applied`` and on how many the command line
    ``replaced`` it (``{"applied": {...}, "replaced": {...}}``; empty when nothing was recorded)."""
    applied: Counter[str] = Counter()
    replaced: Counter[str] = Counter()
    for case in cases:
        used, lost = _split(config, recorded_settings(getattr(case, "metadata", {}) or {}))
        applied.update(used.keys())
        replaced.update(lost)
    if not applied and not replaced:
        return {}
    return {"applied": dict(sorted(applied.items())), "replaced": dict(sorted(replaced.items()))}


def capped_answers(results: Iterable[Any]) -> dict[str, tuple[int, int]]:
    """Per candidate spec, ``(answers that stopped at the token cap where the baseline's answer
    did not, answers)``: a candidate cut short is compared unfairly (candidates with none left
    out)."""
    capped: dict[tuple[str, str], bool] = {}  # one entry per answer (several judges grade it)
    for r in results:
        cand, base = r.result.candidate_response, r.result.baseline_response
        capped[(r.candidate, f"{r.case_id}\0{cand.text}")] = (
            cand.finish_reason == "length" and base.finish_reason != "length"
        )
    counts: dict[str, list[int]] = {}
    for (spec, _), cut in capped.items():
        entry = counts.setdefault(spec, [0, 0])
        entry[0] += int(cut)
        entry[1] += 1
    return {spec: (n, total) for spec, (n, total) in counts.items() if n}
