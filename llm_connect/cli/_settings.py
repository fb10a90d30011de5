"""A run remembers its settings: what ``grade`` stores with a run and ``--resume`` restores.

A run's grades only mean something together when every case was asked and
judged the same way. So ``grade`` stores the run's full settings in the run's
row (``runs.config["settings"]``), and ``grade --resume RUN`` alone restores
them. Two kinds of setting:

* **pinned** settings change what is asked, what is graded or how it is
  decided (suite, sides, judges, temperature, max tokens, seed, system prompt,
  samples, prices, base URL, and every routing policy setting: ``--min-quality``,
  ``--confidence``, ``--min-samples``, ``--target``, ``--route-on``,
  ``--allow-uncalibrated``, ``--min-stability``, ``--prefer``). Giving a different value on
  resume is refused naming the option (exit 2), before any model call: start a
  new run to change them.
* **free** settings only change how fast or how patiently the work is done
  (concurrency, rates, timeout, retries, the cache, the database patience). They are restored when not
  given and may be changed.

Never stored: the API key, a base URL's password, output options.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from llm_connect.cli._common import fail

__all__ = [
    "FREE",
    "PINNED",
    "SETTINGS_VERSION",
    "given_fields",
    "restore_settings",
    "resume_hint",
    "settings_of",
]

SETTINGS_VERSION = 1
"""Bump when a stored key changes meaning (older runs then restore what they can)."""

PINNED: dict[str, str] = {
    "suite_path": "SUITE",
    "prompt": "--prompt",
    "baseline": "--baseline",
    "candidates": "--candidate",
    "judges": "--judge",
    "judge_model": "--judge-model",
    "task": "--task",
    "system_prompt": "--system-prompt",
    "temperature": "--temperature",
    "max_tokens": "--max-tokens",
    "seed": "--seed",
    "samples": "--samples",
    "pricing": "--price",
    "base_url": "--base-url",
    "route_on": "--route-on",
    "min_quality": "--min-quality",
    "min_samples": "--min-samples",
    "confidence": "--confidence",
    "allow_uncalibrated": "--allow-uncalibrated",
    "target": "--target",
    "min_stability": "--min-stability",
    "prefer": "--prefer",
    "label_rate": "--label-rate",
    "label_strategy": "--label-strategy",
    "until_decided": "--until-decided",
    "order_seed": "--order-seed",
}
"""Settings a resumed run keeps (GradeOptions field -> the option that sets it)."""

FREE: dict[str, str] = {
    "concurrency": "--concurrency",
    "rpm": "--rpm",
    "tpm": "--tpm",
    "timeout": "--timeout",
    "max_retries": "--max-retries",
    "use_cache": "--no-cache",
    "gate": "--min-quality",
    "check_judges_every": "--check-judges-every",
    "db_patience": "--db-patience",
}
"""Settings restored when not given, which a resumed run may change."""


def _public_url(url: str | None) -> str | None:
    """``url`` without a password (user names and hosts stay)."""
    if url is None:
        return None
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    user = f"{parts.username}:***@" if parts.username else "***@"
    return urlunsplit(parts._replace(netloc=user + host))


def settings_of(opts: Any) -> dict[str, Any]:
    """The JSON the run stores: every pinned and free setting of ``opts`` (a ``GradeOptions``)."""
    data: dict[str, Any] = {"version": SETTINGS_VERSION}
    for name in (*PINNED, *FREE):
        value = getattr(opts, name)
        data[name] = list(value) if isinstance(value, (list, tuple)) else value
    data["base_url"] = _public_url(opts.base_url)
    if opts.suite_path is not None:
        data["suite_resolved"] = str(Path(opts.suite_path).resolve())
    return data


def _same(name: str, given: Any, stored: Any, opts: Any, settings: Mapping[str, Any]) -> bool:
    if name == "suite_path":
        if given == stored:
            return True
        resolved = settings.get("suite_resolved")
        return resolved is not None and str(Path(given).resolve()) == resolved
    if name == "base_url":
        return bool(_public_url(given) == stored)
    if isinstance(stored, list):
        return list(given or []) == stored
    if isinstance(stored, float) or isinstance(given, float):
        return given is not None and stored is not None and float(given) == float(stored)
    return bool(given == stored)


def _shown(value: Any) -> str:
    if value is None or value == []:
        return "(not set)"
    if isinstance(value, str) and len(value) > 60:
        value = value[:57] + "..."
    return repr(value)


def restore_settings(opts: Any, run_id: str, config: Mapping[str, Any] | None, given: set[str]) -> None:
    """Fill ``opts`` (a ``GradeOptions``) from the run's stored ``config``.

    ``given`` names the ``opts`` fields the user set on this command line. A
    given pinned setting that differs from the stored one exits 2 naming it;
    every setting not given takes the stored value. A run stored before
    settings were kept restores nothing: its suite and options must be given
    again, as before.
    """
    settings = (config or {}).get("settings")
    if not isinstance(settings, Mapping):
        if opts.suite_path is None and opts.prompt is None:
            fail(
                f"--resume {run_id}: this run was stored by an older llm-connect without its settings; "
                "give its SUITE and options again"
            )
        return
    hidden_url = "***" in str(settings.get("base_url") or "")
    if hidden_url and "base_url" not in given:
        fail(f"--resume {run_id}: the run's --base-url had a password, which is never stored; give it again")
    for name, flag in PINNED.items():
        if name not in settings:
            continue
        stored = settings[name]
        if name in given and not _same(name, getattr(opts, name), stored, opts, settings):
            fail(
                f"--resume {run_id}: {flag} {_shown(getattr(opts, name))} differs from the run's "
                f"{_shown(stored)}; a resumed run keeps its settings (start a new run to change {flag})"
            )
        if name in given:
            continue
        if name == "suite_path" and stored is not None:
            resolved = settings.get("suite_resolved")
            use = resolved if resolved and Path(resolved).exists() else stored
            opts.suite_path = use
        elif name == "base_url" and stored is not None and "***" in str(stored):
            continue
        else:
            setattr(opts, name, list(stored) if isinstance(stored, list) else stored)
    if opts.prompt is not None and "suite_path" not in given:
        opts.suite_path = None
    for name in FREE:
        if name in settings and name not in given:
            setattr(opts, name, settings[name])


def resume_hint(opts: Any, run_id: str) -> str:
    """The command that continues this run: its stored settings come back with it, so the run id
    and the database are all it needs (a database password shows masked, an API key never)."""
    import shlex

    parts = ["llm-connect", "grade", "--resume", run_id]
    if opts.db is not None:
        parts += ["--db", _masked_db(opts.db) or ""]
    return " ".join(shlex.quote(p) for p in parts)


_GIVEN = {
    "suite_path": ("suite_path",), "baseline": ("baseline",), "candidate": ("candidates",),
    "judge": ("judges",), "judge_model": ("judge_model",), "task": ("task",), "prompt": ("prompt",),
    "prompt_file": ("prompt",), "system_prompt": ("system_prompt",), "concurrency": ("concurrency",),
    "rpm": ("rpm",), "tpm": ("tpm",), "min_quality": ("min_quality", "gate"), "min_samples": ("min_samples",),
    "route_on": ("route_on",), "allow_uncalibrated": ("allow_uncalibrated",), "target": ("target",),
    "confidence": ("confidence",), "min_stability": ("min_stability",), "prefer": ("prefer",),
    "label_rate": ("label_rate",), "label_strategy": ("label_strategy",), "no_cache": ("use_cache",),
    "until_decided": ("until_decided",), "order_seed": ("order_seed",), "samples": ("samples",),
    "price": ("pricing",), "temperature": ("temperature",), "max_tokens": ("max_tokens",), "seed": ("seed",),
    "timeout": ("timeout",), "max_retries": ("max_retries",), "base_url": ("base_url",),
    "check_judges_every": ("check_judges_every",), "db_patience": ("db_patience",),
}  # fmt: skip
"""Command-line parameter -> the GradeOptions fields it sets (what ``--resume`` must not override)."""


def given_fields(ctx: typer.Context) -> set[str]:
    """The GradeOptions fields the user set on the command line (or through an environment variable)."""
    given: set[str] = set()
    for param, fields in _GIVEN.items():
        source = ctx.get_parameter_source(param)
        if ctx.params.get(param) in (None, [], ()):
            continue  # an argument left out can still report itself as from the command line
        # by name: Typer may carry its own copy of click's ParameterSource enum
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            given.update(fields)
    return given


def _masked_db(db: str | None) -> str | None:
    if db is None:
        return None
    try:
        from sqlalchemy.engine import make_url

        return make_url(db).render_as_string(hide_password=True)
    except Exception:
        return db
