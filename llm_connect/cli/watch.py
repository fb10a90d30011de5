"""``llm-connect watch``: grade a sampled share of production calls in shadow as they happen.

Module level imports only typer: everything heavy loads inside the command (``cli/_watching.py``
holds the loop).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

from llm_connect.cli._common import (
    ApiKeyOption,
    BaseUrlOption,
    ConcurrencyOption,
    DbOption,
    DbPatienceOption,
    FastHelpCommand,
    MaxRetriesOption,
    MaxTokensOption,
    NoCacheOption,
    SeedOption,
    TemperatureOption,
    TimeoutOption,
    fail,
    handle_errors,
    ride_out,
)
from llm_connect.cli._policy import AllowUncalibrated, Confidence, MinQuality, MinSamples, build_policy
from llm_connect.cli._slices import SliceBy

__all__ = ["DEFAULT_SAMPLE_RATE", "app", "watch", "watch_name"]

DEFAULT_SAMPLE_RATE = 0.1
"""The share of new calls graded when ``--sample-rate`` is not given."""
_PINNED = ("baseline", "candidate", "grader_ids")
"""Settings a watch keeps for its run: another value under the same name is refused."""
_FILES, _ROUTING = "Files and calls", "Routing policy"


def watch_name(task_from: str | None, task: str | None, candidate: str, judges: list[str]) -> str:
    """The default name of a watch: its task key, candidate and judges, as one run-id-safe word."""
    raw = "-".join([task_from or task or "task", candidate, *judges])
    return re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-")[:150]


@handle_errors
def watch(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Trace or log files to follow (the formats `suite import` reads; a file not there "
            "yet is waited for). A quoted glob ('logs/app-*.jsonl') also follows the files that "
            "match it later, from their start.",
            show_default=False,
            metavar="FILE...",
            rich_help_panel=_FILES,
        ),
    ],
    candidate: Annotated[
        str,
        typer.Option(
            "--candidate", "-c", help="The candidate (openai:MODEL).", metavar="SPEC", rich_help_panel=_FILES
        ),
    ],
    baseline: Annotated[
        str,
        typer.Option(
            "--baseline",
            "-b",
            help="The baseline, the model production serves until the candidate is proven (openai:MODEL).",
            metavar="SPEC",
            rich_help_panel=_FILES,
        ),
    ],
    judge: Annotated[
        list[str] | None,
        typer.Option(
            "--judge",
            "-j",
            help="Judge spec (repeatable), as for grade; every judge decides routing.",
            metavar="JUDGE",
            show_default=False,
            rich_help_panel=_FILES,
        ),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model",
            help="Model for LLM judges that name none (provider:model).",
            metavar="SPEC",
            show_default=False,
            rich_help_panel=_FILES,
        ),
    ] = None,
    task_from: Annotated[
        str | None,
        typer.Option(
            "--task-from",
            help="Where a call names its task: meta:KEY (or KEY: a metadata key, attribute or dotted "
            "path) or tag:PREFIX (the tag PREFIX:VALUE).",
            metavar="KEY",
            show_default=False,
            rich_help_panel=_FILES,
        ),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            "-t",
            help="The task of calls that name none (or of every call, without --task-from).",
            metavar="TASK",
            show_default=False,
            rich_help_panel=_FILES,
        ),
    ] = None,
    sample_rate: Annotated[
        float,
        typer.Option(
            "--sample-rate",
            help="Share of new calls graded (0..1], drawn by a hash of each call's id: a restart "
            "samples the same calls.",
            metavar="R",
            rich_help_panel=_FILES,
        ),
    ] = DEFAULT_SAMPLE_RATE,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="The watch's name: its run is watch-NAME and its offsets are stored under it (default: "
            "from --task-from, --candidate and --judge).",
            metavar="NAME",
            show_default=False,
            rich_help_panel=_FILES,
        ),
    ] = None,
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="otlp-json, openai-log or langfuse (JSON Lines); default: each file's from its first line.",
            metavar="FORMAT",
            show_default=False,
            rich_help_panel=_FILES,
        ),
    ] = None,
    once: Annotated[
        bool,
        typer.Option(
            "--once", help="Grade what the files hold now, then exit (tests, cron).", rich_help_panel=_FILES
        ),
    ] = False,
    poll: Annotated[
        float,
        typer.Option(
            "--poll",
            min=0.01,
            help="Seconds between looks at idle files.",
            metavar="SECONDS",
            rich_help_panel=_FILES,
        ),
    ] = 1.0,
    from_end: Annotated[
        bool,
        typer.Option(
            "--from-end",
            help="A file with no stored offset starts after what it holds now (default: from its start).",
            rich_help_panel=_FILES,
        ),
    ] = False,
    on_rollback: Annotated[
        str | None,
        typer.Option(
            "--on-rollback",
            help="A command run (through the shell) with the decision as JSON on stdin when a decision "
            "rolls the candidate back.",
            metavar="CMD",
            show_default=False,
            rich_help_panel=_ROUTING,
        ),
    ] = None,
    min_quality: MinQuality = None,
    min_samples: MinSamples = None,
    confidence: Confidence = None,
    allow_uncalibrated: AllowUncalibrated = None,
    slice_by: SliceBy = None,
    concurrency: int = ConcurrencyOption,
    no_cache: bool = NoCacheOption,
    max_retries: int = MaxRetriesOption,
    base_url: str | None = BaseUrlOption,
    api_key: str | None = ApiKeyOption,
    temperature: float | None = TemperatureOption,
    max_tokens: int | None = MaxTokensOption,
    seed: int | None = SeedOption,
    timeout: float | None = TimeoutOption,
    db: str | None = DbOption,
    db_patience: float = DbPatienceOption,
) -> None:
    """Follow trace or log files and grade a sampled share of new calls in shadow.

    Production's answer is graded against the other side asked now (the candidate while the
    baseline serves, the baseline while the candidate serves), as the run watch-NAME; after each
    batch the routing decision is taken again, and a candidate whose quality fell is rolled back
    (--on-rollback runs). Rotated or truncated files are picked up again. SIGTERM or Ctrl-C stops
    it with every finished grade stored (exit 0 after SIGTERM, 130 after Ctrl-C); started again
    with the same name it goes on where it stopped and grades no call twice.
    """
    from llm_connect.cli._common import open_ledger
    from llm_connect.cli._watching import Watcher, check_settings, stop_on_fault
    from llm_connect.errors import LedgerFaultError, TrafficImportError

    plan, context = _plan(
        files=[str(f) for f in files], candidate=candidate, baseline=baseline, judges=judge or [],
        judge_model=judge_model, task_from=task_from, task=task, sample_rate=sample_rate, name=name,
        fmt=format, once=once, poll=poll, from_end=from_end, on_rollback=on_rollback,
        policy=dict(min_quality=min_quality, min_samples=min_samples, confidence=confidence,
                    allow_uncalibrated=allow_uncalibrated, slice_by=slice_by),
        concurrency=concurrency, no_cache=no_cache, max_retries=max_retries, base_url=base_url,
        api_key=api_key, temperature=temperature, max_tokens=max_tokens, seed=seed, timeout=timeout,
    )  # fmt: skip
    ledger = open_ledger(db)
    ride_out(ledger, db_patience)
    context.use_embedding_store(ledger if plan.use_cache else None)  # --no-cache: embed every text
    stored = ledger.run(plan.run_id)
    problem = check_settings(stored.config if stored is not None else None, plan, _PINNED)
    if problem is not None:
        fail(problem)
    try:
        ledger.start_run(plan.run_id, suite=f"watch:{plan.name}", config=plan.run_info)
        watcher = Watcher(plan, ledger)
        code = watcher.run()
    except LedgerFaultError as fault:
        raise typer.Exit(stop_on_fault(plan, fault)) from None
    except TrafficImportError as exc:
        fail(str(exc))
    typer.echo(
        f"watch {plan.name} (run {plan.run_id}): {watcher.total.line()}; "
        f"offsets of {watcher.files} file(s) stored"
    )
    raise typer.Exit(code)


def _plan(**o: Any) -> tuple[Any, Any]:
    """The options checked and turned into a ``WatchPlan`` (usage errors exit 2 here, before the
    ledger is opened or a model called)."""
    from llm_connect.cli._watching import WatchPlan
    from llm_connect.grading import (
        CallLimit,
        JudgeContext,
        ResilientAdapter,
        RetryPolicy,
        Suite,
        build_judge,
        side_from_spec,
    )
    from llm_connect.traffic import FORMATS
    from llm_connect.types import RunConfig
    from llm_connect.values import SliceError, parse_slice_key

    if not o["judges"]:
        fail("give at least one --judge (as for grade: exact, embedding, llm:openai:MODEL, ...)")
    if o["task_from"] is None and o["task"] is None:
        fail("give --task-from KEY (where each call names its task) or --task TASK")
    for option, spec in (("--baseline", o["baseline"]), ("--candidate", o["candidate"])):
        if spec.startswith("recorded:"):
            fail(f"{option} {spec}: a watch asks that model now; give a live spec (openai:MODEL)")
    if not 0.0 < o["sample_rate"] <= 1.0:
        fail(f"--sample-rate must lie in (0, 1], not {o['sample_rate']!r}")
    if o["fmt"] is not None and o["fmt"] not in FORMATS:
        fail(f"--format must be one of {', '.join(FORMATS)}, not {o['fmt']!r}")
    task_key = None
    if o["task_from"] is not None:
        key = o["task_from"] if ":" in o["task_from"] else f"meta:{o['task_from']}"
        try:
            parsed = parse_slice_key(key)
        except SliceError as exc:
            fail(f"--task-from: {exc}")
        if parsed.kind not in ("meta", "tag"):
            fail(f"--task-from takes meta:KEY or tag:PREFIX, not {o['task_from']!r}")
        task_key = (parsed.kind, parsed.name)
    name = o["name"] or watch_name(o["task_from"], o["task"], o["candidate"], o["judges"])
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,150}", name):
        fail(f"--name {name!r}: letters, digits, '.', '_' and '-' only, at most 150")
    retry, calls = RetryPolicy(max_retries=o["max_retries"]), CallLimit(o["concurrency"])
    adapters: dict[str, Any] = {}

    def make_adapter(spec: str) -> Any:
        from llm_connect.adapters import adapter_from_spec

        if spec not in adapters:
            made = adapter_from_spec(spec, base_url=o["base_url"], api_key=o["api_key"])
            adapters[spec] = ResilientAdapter(made, policy=retry, semaphore=calls)
        return adapters[spec]

    empty = Suite(path="<watch>", cases=[])
    base = side_from_spec(o["baseline"], empty, make_adapter=make_adapter)
    cand = side_from_spec(o["candidate"], empty, make_adapter=make_adapter)
    if base.model == cand.model:
        fail(f"the baseline and the candidate are both {base.model!r}")
    context = JudgeContext(make_llm_adapter=make_adapter, default_judge_model=o["judge_model"])
    judges = [build_judge(spec, context) for spec in o["judges"]]
    grader_ids = [j.grader_id for j in judges]
    policy = build_policy(route_on=grader_ids, **o["policy"])
    run_config = RunConfig(
        temperature=o["temperature"],
        max_tokens=o["max_tokens"],
        model_params={} if o["seed"] is None else {"seed": o["seed"]},
        timeout_s=o["timeout"],
    )
    plan = WatchPlan(
        name=name, files=o["files"], baseline=o["baseline"], candidate=o["candidate"],
        baseline_model=base.model, candidate_model=cand.model, judges=judges, policy=policy,
        run_config=run_config, make_adapter=make_adapter, task_key=task_key, task=o["task"],
        sample_rate=o["sample_rate"], format=o["fmt"], once=o["once"], poll_s=o["poll"],
        concurrency=o["concurrency"], use_cache=not o["no_cache"], start_at_end=o["from_end"],
        on_rollback=o["on_rollback"],
    )  # fmt: skip
    plan.run_info = {
        "watch": name, "files": o["files"], "baseline": o["baseline"], "candidate": o["candidate"],
        "judges": list(o["judges"]), "grader_ids": grader_ids, "task_from": o["task_from"],
        "task": o["task"], "sample_rate": o["sample_rate"], "concurrency": o["concurrency"],
        "min_quality": policy.min_quality, "use_cache": not o["no_cache"],
    }  # fmt: skip
    return plan, context


app = typer.Typer(rich_markup_mode=None, add_completion=False)
"""The ``watch`` command alone (``llm_connect.cli`` mounts it when it runs)."""
app.command("watch", cls=FastHelpCommand)(watch)
