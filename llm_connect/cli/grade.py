"""``llm-connect grade``: grade a suite (or one prompt), store every grade, give a verdict.

Module level imports only typer: everything heavy loads inside the command.
"""

from __future__ import annotations

import sys
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
    JsonOption,
    MaxRetriesOption,
    MaxTokensOption,
    NoCacheOption,
    SeedOption,
    TemperatureOption,
    TimeoutOption,
    fail,
    handle_errors,
    stdout_is_tty,
)
from llm_connect.cli._policy import (
    AllowUncalibrated,
    Confidence,
    MinSamples,
    MinStability,
    Prefer,
    RouteOn,
    Target,
    build_policy,
)
from llm_connect.cli._settings import given_fields
from llm_connect.cli._slices import SliceBy
from llm_connect.errors import ConfigurationError

# The built-in judges' names: no judge is imported.
from llm_connect.grading.judges import BUILTIN_JUDGES
from llm_connect.values import DEFAULT_MIN_QUALITY, DEFAULT_WIN_RATE

__all__ = ["DEFAULT_JUDGE", "DEFAULT_MIN_QUALITY", "app", "grade"]

DEFAULT_JUDGE = "exact"
"""The judge used when no ``--judge`` is given."""

_SPEC_HELP = "provider:model (openai:gpt-4o-mini) or recorded:NAME (responses recorded in the suite)"


def _read_prompt_file(value: str) -> str:
    if value == "-":
        return sys.stdin.read()
    try:
        return Path(value).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--prompt-file {value}: cannot read ({exc})")


def _parse_prices(values: list[str]) -> dict[str, dict[str, float]]:
    """``MODEL=IN,OUT`` options -> ``{model: {"input": IN, "output": OUT}}`` (USD per 1M tokens)."""
    prices: dict[str, dict[str, float]] = {}
    for value in values:
        model, eq, rest = value.rpartition("=")
        parts = rest.split(",")
        try:
            if not eq or not model or len(parts) != 2:
                raise ValueError
            numbers = [float(p) for p in parts]
            if any(n < 0 for n in numbers):
                raise ValueError
        except ValueError:
            fail(f"--price {value!r}: expected MODEL=INPUT,OUTPUT in USD per 1M tokens (e.g. gpt-4o=2.5,10)")
        prices[model] = {"input": numbers[0], "output": numbers[1]}
    return prices


def _pick_sides(
    baseline: str | None, candidates: list[str], recorded_names: set[str]
) -> tuple[str, list[str]]:
    """Fill in ``recorded:baseline`` / ``recorded:candidate`` from the suite's shorthand."""
    if baseline is None:
        if "baseline" not in recorded_names:
            fail("no --baseline given and the suite records no baseline_response")
        baseline = "recorded:baseline"
    if not candidates:
        if "candidate" not in recorded_names:
            fail("no --candidate given and the suite records no candidate_response")
        candidates = ["recorded:candidate"]
    return baseline, candidates


@handle_errors
def grade(
    ctx: typer.Context,
    suite_path: Annotated[
        Path | None,
        typer.Argument(
            help="Suite file (JSONL or YAML). Omit with --prompt / --prompt-file.",
            show_default=False,
            rich_help_panel="Suite and models",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            "-b",
            help=f"Baseline: {_SPEC_HELP}. Default: recorded:baseline.",
            show_default=False,
            metavar="SPEC",
            rich_help_panel="Suite and models",
        ),
    ] = None,
    candidate: Annotated[
        list[str] | None,
        typer.Option(
            "--candidate",
            "-c",
            help=f"Candidate (repeatable): {_SPEC_HELP}. Default: recorded:candidate.",
            show_default=False,
            metavar="SPEC",
            rich_help_panel="Suite and models",
        ),
    ] = None,
    judge: Annotated[
        list[str] | None,
        typer.Option(
            "--judge",
            "-j",
            help=f"Judge spec NAME[:ARG][,k=v...] (repeatable): {', '.join(BUILTIN_JUDGES)}, or an "
            "installed plugin's name (entry points llm_connect.judges). Default: exact.",
            show_default=False,
            metavar="JUDGE",
            rich_help_panel="Judges and the gate",
        ),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model",
            help="Model for LLM judges that name none (provider:model).",
            show_default=False,
            metavar="SPEC",
            rich_help_panel="Judges and the gate",
        ),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            "-t",
            help="Task of cases that name none (default: the suite's, else 'default').",
            show_default=False,
            metavar="TASK",
            rich_help_panel="Suite and models",
        ),
    ] = None,
    prompt: Annotated[
        str | None,
        typer.Option(
            "--prompt",
            "-p",
            help="Grade this one prompt instead of a suite.",
            metavar="TEXT",
            rich_help_panel="Suite and models",
        ),
    ] = None,
    prompt_file: Annotated[
        str | None,
        typer.Option(
            "--prompt-file",
            help="Grade the prompt in this file ('-' reads stdin).",
            show_default=False,
            metavar="PATH",
            rich_help_panel="Suite and models",
        ),
    ] = None,
    system_prompt: Annotated[
        str | None,
        typer.Option(
            "--system-prompt",
            help="System prompt for cases that set none.",
            show_default=False,
            metavar="TEXT",
            rich_help_panel="Suite and models",
        ),
    ] = None,
    concurrency: int = ConcurrencyOption,
    rpm: Annotated[
        float | None,
        typer.Option(
            "--rpm",
            min=0.001,
            help="At most this many model calls start per minute (with --shared: for the whole fleet).",
            show_default=False,
            metavar="N",
            rich_help_panel="Model calls",
        ),
    ] = None,
    tpm: Annotated[
        float | None,
        typer.Option(
            "--tpm",
            min=1,
            help="At most this many tokens per minute (estimated before each call, corrected after; "
            "with --shared: for the whole fleet).",
            show_default=False,
            metavar="N",
            rich_help_panel="Model calls",
        ),
    ] = None,
    shared: Annotated[
        bool,
        typer.Option(
            "--shared",
            help="Grade run --run-id together with every other worker given the same run id and suite "
            "(PostgreSQL ledger): each claims cases with a lease, a killed worker's cases go to the others.",
            rich_help_panel="Runs and the ledger",
        ),
    ] = False,
    lease_s: Annotated[
        float,
        typer.Option(
            "--lease-s",
            min=1.0,
            help="With --shared: seconds a claimed case stays a worker's without a renewal.",
            metavar="SECONDS",
            rich_help_panel="Runs and the ledger",
        ),
    ] = 60.0,
    db_patience: float = DbPatienceOption,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            help="Id of this run (default: a fresh run-DATE-TIME-xxxxxx).",
            show_default=False,
            metavar="ID",
            rich_help_panel="Runs and the ledger",
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            help="Continue this run: grade only what it is missing, with its stored settings (SUITE and "
            "options may be left out; a different value for one is refused).",
            show_default=False,
            metavar="RUN_ID",
            rich_help_panel="Runs and the ledger",
        ),
    ] = None,
    db: str | None = DbOption,
    min_quality: Annotated[
        float | None,
        typer.Option(
            "--min-quality",
            help="Quality gate on the routing judges: passed (exit 0) only when every candidate is proven, "
            "FAILED (exit 1) when one is ruled out, else NOT SETTLED (exit 5; see --allow-unsettled). Also "
            f"the routing and verdict threshold (default {DEFAULT_MIN_QUALITY}; with --target human "
            f"{DEFAULT_WIN_RATE}, on people's scale where a tie is 0.5).",
            show_default=False,
            metavar="Q",
            rich_help_panel="Routing policy",
        ),
    ] = None,
    min_samples: MinSamples = None,
    confidence: Confidence = None,
    route_on: RouteOn = None,
    allow_uncalibrated: AllowUncalibrated = None,
    target: Target = None,
    min_stability: MinStability = None,
    prefer: Prefer = None,
    slice_by: SliceBy = None,
    label_rate: Annotated[
        float | None,
        typer.Option(
            "--label-rate",
            help="After grading, send this share (0..1] of newly graded cases to people, per task, "
            "candidate and routing judge (llm-connect labels queue lists them); every judge of a "
            "candidate draws from one seed (--seed, else the candidate's stored one), so they share "
            "the cases.",
            show_default=False,
            metavar="RATE",
            rich_help_panel="Judges and the gate",
        ),
    ] = None,
    label_strategy: Annotated[
        str,
        typer.Option(
            "--label-strategy",
            help="uniform (--label-rate each case) or active (more where the judge is unsure).",
            metavar="uniform|active",
            rich_help_panel="Judges and the gate",
        ),
    ] = "uniform",
    no_cache: bool = NoCacheOption,
    check_judges_every: Annotated[
        int | None,
        typer.Option(
            "--check-judges-every",
            min=1,
            help="After every N graded cases, check each judge with an anchor set for drift "
            "(llm-connect judges check; one judge call per anchored case).",
            metavar="N",
            rich_help_panel="Judges and the gate",
        ),
    ] = None,
    until_decided: Annotated[
        bool,
        typer.Option(
            "--until-decided",
            help="Grade the cases in a seeded random order and stop calling a candidate once it is "
            "proven or ruled out on every routing judge (valid: the bounds hold at every look).",
            rich_help_panel="Judges and the gate",
        ),
    ] = False,
    order_seed: Annotated[
        int,
        typer.Option(
            "--order-seed",
            help="Seed of the random order the cases are graded in (the bounds need an order "
            "that does not follow the file's grouping).",
            metavar="N",
            rich_help_panel="Judges and the gate",
        ),
    ] = 0,
    samples: Annotated[
        int,
        typer.Option(
            "--samples",
            help="Answers per case and side (sample k of the baseline vs sample k of each candidate); "
            "the case's grade is the mean over its samples (one case, not K).",
            metavar="K",
            min=1,
            max=100,
            rich_help_panel="Model calls",
        ),
    ] = 1,
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit",
            help="Also write JUnit XML: a test case per task x candidate x routing judge "
            "(failure: ruled out; skipped: not settled).",
            metavar="FILE.xml",
            show_default=False,
            rich_help_panel="Output",
        ),
    ] = None,
    report_file: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Also write the run's offline HTML report (as `llm-connect report --run RUN_ID`).",
            metavar="FILE.html",
            show_default=False,
            rich_help_panel="Output",
        ),
    ] = None,
    allow_unsettled: Annotated[
        bool,
        typer.Option(
            "--allow-unsettled",
            help="With --min-quality: exit 0 when the gate is NOT SETTLED (no candidate ruled out, not "
            "every one proven yet); the message is the same.",
            rich_help_panel="Judges and the gate",
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Print each routing decision's full reason (every judge's evidence), not one short line.",
            rich_help_panel="Output",
        ),
    ] = False,
    json_out: bool = JsonOption,
    cases: Annotated[
        bool, typer.Option("--cases", help="Also print each case's scores.", rich_help_panel="Output")
    ] = False,
    base_url: str | None = BaseUrlOption,
    api_key: str | None = ApiKeyOption,
    price: Annotated[
        list[str] | None,
        typer.Option(
            "--price",
            metavar="MODEL=IN,OUT",
            help="Price of a model in USD per 1M input and output tokens (repeatable), "
            "e.g. gpt-4o-mini=0.15,0.6; live responses then carry their cost.",
            show_default=False,
            rich_help_panel="Model calls",
        ),
    ] = None,
    temperature: float | None = TemperatureOption,
    max_tokens: int | None = MaxTokensOption,
    seed: int | None = SeedOption,
    timeout: float | None = TimeoutOption,
    max_retries: int = MaxRetriesOption,
) -> None:
    """Grade candidates against a baseline on a suite; store every grade; route.

    With --min-quality the exit code is the gate's (passed, FAILED: a candidate is ruled out,
    NOT SETTLED); cases that failed after retries outrank it. After Ctrl-C, continue with
    --resume RUN_ID.
    """
    from llm_connect.cli import _slices
    from llm_connect.cli._conclusion import conclude
    from llm_connect.cli._faults import stop_on_fault
    from llm_connect.cli._grade_output import emit
    from llm_connect.cli._run import RunFault, execute

    key = _slices.slice_key(slice_by)  # an unknown key exits 2 before anything runs
    opts = _options(ctx)
    _slices.check_suite_has_key(opts.suite_path, opts.task, key)
    try:
        outcome = execute(opts, pick_sides=_pick_sides, progress=stdout_is_tty() and not json_out)
    except RunFault as stopped:  # the database failed under the run: exit 3 and how to go on
        stop_on_fault(opts, stopped, json_out=json_out)
    conclusion = conclude(opts, outcome, allow_unsettled=allow_unsettled)
    sliced, slice_error = _slices.grade_slices(outcome, conclusion.decisions, key)
    emit(
        opts, outcome, conclusion, junit=junit, report_file=report_file, json_out=json_out, cases=cases,
        verbose=verbose, allow_unsettled=allow_unsettled,
        extra_json=None if key is None else {"slices": _slices.slices_json(sliced)},
        extra_lines=[line for s in sliced for line in _slices.slice_lines(s)],
    )  # fmt: skip
    if slice_error is not None:
        fail(slice_error)
    raise typer.Exit(conclusion.code)


def _options(ctx: typer.Context) -> Any:
    """The options step: the command line (``ctx.params``) checked and turned into ``GradeOptions``
    (usage errors exit 2 here, before anything is opened or called)."""
    from llm_connect.cli._artifacts import check_output_path
    from llm_connect.cli._run import GradeOptions

    p = ctx.params
    prompt, prompt_file, suite_path, resume, run_id = (
        p["prompt"], p["prompt_file"], p["suite_path"], p["resume"], p["run_id"],
    )  # fmt: skip
    if prompt is not None and prompt_file is not None:
        fail("give --prompt or --prompt-file, not both")
    single = prompt if prompt is not None else (_read_prompt_file(prompt_file) if prompt_file else None)
    if single is not None and suite_path is not None:
        fail("give a SUITE file or --prompt/--prompt-file, not both")
    if single is None and suite_path is None and resume is None:
        fail("missing SUITE (a JSONL or YAML file), or use --prompt TEXT (or --resume RUN_ID)")
    pricing = _parse_prices(p["price"] or [])
    check_output_path(p["junit"], "--junit")
    check_output_path(p["report_file"], "--report")
    if p["report_file"] is not None:  # before any call: the report draws with matplotlib
        from llm_connect.report import require_plot

        try:
            require_plot("--report")
        except ConfigurationError as exc:
            fail(str(exc))
    if run_id is not None and resume is not None and run_id != resume:
        fail("--run-id and --resume name different runs")
    # Every routing setting is checked here, once, by the policy (exit 2 naming the option).
    policy = build_policy(
        min_quality=p["min_quality"], confidence=p["confidence"], min_samples=p["min_samples"],
        target=p["target"], allow_uncalibrated=p["allow_uncalibrated"], min_stability=p["min_stability"],
        prefer=p["prefer"],
    )  # fmt: skip
    if p["label_strategy"] not in ("uniform", "active"):
        fail(f"--label-strategy must be uniform or active, not {p['label_strategy']!r}")
    if p["label_rate"] is not None and not 0.0 < p["label_rate"] <= 1.0:
        fail(f"--label-rate must lie in (0, 1], not {p['label_rate']!r}")
    return GradeOptions(
        suite_path=None if suite_path is None else str(suite_path),
        prompt=single,
        baseline=p["baseline"],
        candidates=list(p["candidate"] or []),
        judges=list(p["judge"] or [DEFAULT_JUDGE]),
        judge_model=p["judge_model"],
        task=p["task"],
        system_prompt=p["system_prompt"],
        concurrency=p["concurrency"],
        rpm=p["rpm"],
        tpm=p["tpm"],
        shared=p["shared"],
        lease_s=p["lease_s"],
        db_patience=p["db_patience"],
        run_id=resume or run_id,
        resume=resume is not None,
        db=p["db"],
        use_cache=not p["no_cache"],
        base_url=p["base_url"],
        api_key=p["api_key"],
        temperature=p["temperature"],
        max_tokens=p["max_tokens"],
        seed=p["seed"],
        timeout=p["timeout"],
        max_retries=p["max_retries"],
        pricing=pricing,
        route_on=list(p["route_on"] or []),
        until_decided=p["until_decided"],
        order_seed=p["order_seed"],
        check_judges_every=p["check_judges_every"],
        samples=p["samples"],
        allow_uncalibrated=policy.allow_uncalibrated,
        target=policy.target,
        label_rate=p["label_rate"],
        label_strategy=p["label_strategy"],
        min_quality=policy.min_quality,
        min_samples=policy.min_samples,
        confidence=policy.confidence,
        min_stability=policy.min_stability,
        prefer=policy.prefer,
        gate=p["min_quality"] is not None,
        given=given_fields(ctx),
    )


app = typer.Typer(rich_markup_mode=None, add_completion=False)
"""The ``grade`` command alone (``llm_connect.cli`` mounts it when it runs)."""
app.command("grade", cls=FastHelpCommand)(grade)
